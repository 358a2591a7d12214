package ingest_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/server/ingest"
)

// A curator names a file inside the operator's source directory; one
// outside it is refused before it is opened, and a value outside the
// schema's domain is reported by row, never quoted.
func Example() {
	dir, err := os.MkdirTemp("", "knowdp-ingest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "people.csv"), []byte("sex,age\nF,adult\nM,child\nF,adult\n"), 0o600); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.csv"), []byte("sex,age\nF,adult\nF,Ada Lovelace\n"), 0o600); err != nil {
		log.Fatal(err)
	}
	schema, err := domain.ParseSchema([]byte(`{"dimensions":[{"name":"sex","values":["F","M"]},{"name":"age","values":["child","adult"]}]}`))
	if err != nil {
		log.Fatal(err)
	}
	dirs, err := ingest.Dirs([]string{dir})
	if err != nil {
		log.Fatal(err)
	}
	hide := strings.NewReplacer(dirs[0], "DIR") // the temporary directory
	_, err = ingest.Path(dirs, "/etc/passwd", "source.csv")
	fmt.Println(hide.Replace(err.Error()))
	for _, name := range []string{"people.csv", "bad.csv"} {
		path, err := ingest.Path(dirs, name, "source.csv")
		if err != nil {
			log.Fatal(err)
		}
		c, err := ingest.CountCSV(context.Background(), path, "", schema, 1<<20)
		if err != nil {
			fmt.Println(hide.Replace(err.Error()))
			continue
		}
		fmt.Println(name, c.Counts)
	}
	// Output:
	// source.csv: /etc/passwd is outside the source directories (DIR)
	// people.csv [0 2 1 0]
	// source.csv: DIR/bad.csv: row 3 is malformed or has a value outside its column's declared domain (values are not quoted)
}
