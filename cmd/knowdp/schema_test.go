package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestSchemaFromLookup builds the bundled hierarchy of US places from its
// lookup table and checks it against data/us-geo.schema.json (made by
// scripts/gen-us-geo from the places themselves): the same levels, the
// same leaves in the same order and the same parents.
func TestSchemaFromLookup(t *testing.T) {
	out := filepath.Join(t.TempDir(), "geo.schema.json")
	code, stdout, stderr := runCLI(t, "schema", "--hierarchy", "geo=region,division,state,place",
		"--from", repoFile("data/us-geo-places.csv"), "--dimension", "sex=F,M",
		"--dimension", "agegroup=0-17,18-24,25-34,35-44,45-54,55-64,65+", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if want := "wrote " + out + ": geo (842 values in levels region > division > state > place), sex (2 values), agegroup (7 values)\n"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	read := func(path string) any {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got, want := read(out), read(repoFile("data/us-geo.schema.json")); !reflect.DeepEqual(got, want) {
		t.Errorf("the schema built from data/us-geo-places.csv differs from data/us-geo.schema.json")
	}
	// Without --out it goes to stdout; --schema starts from a schema and
	// replaces a dimension of the same name where it stands.
	code, stdout, stderr = runCLI(t, "schema", "--schema", repoFile("data/us-geo.schema.json"), "--dimension", "sex=X,Y,Z")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s struct {
		Dimensions []struct {
			Name   string   `json:"name"`
			Values []string `json:"values"`
		} `json:"dimensions"`
	}
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Dimensions) != 3 || s.Dimensions[1].Name != "sex" || strings.Join(s.Dimensions[1].Values, ",") != "X,Y,Z" || len(s.Dimensions[0].Values) != 842 {
		t.Errorf("merged schema: %+v", s.Dimensions)
	}
}

func TestSchemaErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.csv", "region,state,town\nWest,CA,CA/LA\nWest,CA,CA/SF\nEast,NY,NY/NYC\n")
	twoParents := write("two.csv", "region,state,town\nWest,CA,CA/LA\nEast,NY,NY/NYC\nEast,CA,CA/SF\n")
	leafTwice := write("leaf.csv", "region,state,town\nWest,CA,CA/LA\nWest,NV,CA/LA\n")
	empty := write("empty.csv", "region,state,town\nWest,CA,CA/LA\nWest,,NV/Reno\n")
	renamed := write("renamed.csv", "REGION,ST,town\nWest,CA,CA/LA\n")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no dimension", []string{}, 2, "give at least one --hierarchy"},
		{"no --from", []string{"--hierarchy", "geo=region,state"}, 2, "missing required flag --from"},
		{"one level", []string{"--hierarchy", "geo=state", "--from", good}, 2, "at least two levels"},
		{"level twice", []string{"--hierarchy", "geo=state,state", "--from", good}, 2, `level "state" is listed twice`},
		{"bad dimension", []string{"--dimension", "sex"}, 2, `--dimension "sex": want NAME=VALUE,...`},
		{"missing column", []string{"--hierarchy", "geo=region,county,town", "--from", good}, 1, `--from: --hierarchy geo: ` + good + `: no column "county" (the header has region, state, town)`},
		{"two parents", []string{"--hierarchy", "geo=region,state,town", "--from", twoParents}, 1, twoParents + `: row 4, column "region": state "CA" is in region "East" here but in "West" at row 2; each value has one parent`},
		{"leaf in two states", []string{"--hierarchy", "geo=region,state,town", "--from", leafTwice}, 1, leafTwice + `: row 3, column "state": town "CA/LA" is in state "NV" here but in "CA" at row 2`},
		{"empty value", []string{"--hierarchy", "geo=region,state,town", "--from", empty}, 1, empty + `: row 3, column "state": empty value of level "state" of geo`},
		{"missing file", []string{"--hierarchy", "geo=region,state", "--from", filepath.Join(dir, "none.csv")}, 1, "--from: open " + filepath.Join(dir, "none.csv")},
		{"duplicate flat value", []string{"--dimension", "sex=F,F"}, 1, "not valid"},
		{"output is the lookup file", []string{"--hierarchy", "geo=region,state,town", "--from", good, "--out", good}, 2, "--out " + good + " is the same file as --from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"schema"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d (want %d), stderr %q, want %q\nstdout %s", code, tc.code, stderr, tc.want, stdout)
			}
		})
	}
	// LEVEL:COLUMN reads a level from a column of another name.
	code, stdout, stderr := runCLI(t, "schema", "--hierarchy", "geo=region:REGION,state:ST,town", "--from", renamed)
	if code != 0 || !strings.Contains(stdout, `"levels": [`) || !strings.Contains(stdout, `"CA/LA": "CA"`) {
		t.Errorf("LEVEL:COLUMN: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
