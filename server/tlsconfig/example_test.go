package tlsconfig_test

import (
	"fmt"

	"github.com/knowdp/knowdp/server/tlsconfig"
)

// A PostgreSQL database on another host must be reached with TLS; one on
// this machine need not.
func ExampleCheckPostgres() {
	for _, dsn := range []string{
		"postgres://knowdp@db.example.org/agency?sslmode=verify-full",
		"postgres://knowdp@db.example.org/agency",
		"postgres://knowdp@127.0.0.1/agency?sslmode=disable",
	} {
		fmt.Println(tlsconfig.CheckPostgres(dsn) == nil)
	}
	// Output:
	// true
	// false
	// true
}
