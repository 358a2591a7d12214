package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/knowdp/knowdp/server"
)

// A curator registers the arrests data with {year} published exactly and a
// budget of 2 per analyst, creates an analyst, and the analyst asks for a
// noisy {year, colour} cuboid twice: the second time the stored answer comes
// back at no cost. The curator's CSV file is read by the server, so it must
// lie in a directory the server was started with (SourceDirs).
func Example() {
	dir, _ := os.MkdirTemp("", "knowdp-example")
	defer os.RemoveAll(dir)
	admin := server.GenerateKey()
	srv, _, err := server.Open(context.Background(), server.Config{DataDir: dir, AdminKey: admin, SourceDirs: []string{"../data"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	call := func(path, key, body string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var out map[string]any
		json.Unmarshal(b, &out)
		return res.StatusCode, out
	}
	schema, _ := os.ReadFile("../data/arrests.schema.json")
	st, _ := call("/admin/v1/datasets", admin, `{"id": "arrests", "schema": `+string(schema)+`,
		"source": {"csv": "../data/arrests.csv"},
		"policy": {"epsilon_per_analyst": 2, "invariants": [["year"]]}}`)
	fmt.Println("register:", st)
	st, a := call("/admin/v1/analysts", admin, `{"name": "alice"}`)
	fmt.Println("analyst:", st)
	key := a["api_key"].(string)

	q := `{"kind": "cuboid", "epsilon": 0.5, "cuboid": ["year", "colour"]}`
	for range 2 {
		st, r := call("/v1/datasets/arrests/queries", key, q)
		fmt.Println("query:", st, "repeat:", r["repeat"], "charged:", r["charged"], "remaining:", r["remaining"])
	}
	// Output:
	// register: 201
	// analyst: 201
	// query: 201 repeat: false charged: 0.5 remaining: 1.5
	// query: 200 repeat: true charged: 0 remaining: 1.5
}
