package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/strictjson"
	"github.com/knowdp/knowdp/release"
)

// TestOpenAPI checks that the served OpenAPI document lists exactly the
// routes the mux serves, with the right security, and that each route is
// what the mux dispatches its path to.
func TestOpenAPI(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			Security []map[string][]string `json:"security"`
		} `json:"paths"`
	}
	s.must(http.StatusOK, "GET", "/openapi.json", "", nil, &doc)
	s.must(http.StatusOK, "GET", "/healthz", "", nil, nil) // checked against the document like every call
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	var documented, served []string
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
			var rt *route
			for i := range s.srv.rts {
				if s.srv.rts[i].path == path && strings.EqualFold(s.srv.rts[i].method, method) {
					rt = &s.srv.rts[i]
				}
			}
			if rt == nil {
				continue
			}
			var want []string
			switch rt.auth {
			case roleAdmin:
				want = []string{"adminKey"}
			case roleAnalyst:
				want = []string{"analystKey"}
			}
			var got []string
			for _, sec := range op.Security {
				for k := range sec {
					got = append(got, k)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s %s: security %v, the route needs %v", method, path, got, want)
			}
		}
	}
	param := regexp.MustCompile(`\{[a-z]+\}`)
	for _, rt := range s.srv.rts {
		served = append(served, rt.method+" "+rt.path)
		req := httptest.NewRequest(rt.method, param.ReplaceAllString(rt.path, "x"), nil)
		if _, pattern := s.srv.mux.Handler(req); pattern != rt.method+" "+rt.path {
			t.Errorf("%s %s is dispatched to %q", rt.method, rt.path, pattern)
		}
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("routes and OpenAPI differ:\ndocumented %v\nserved     %v", documented, served)
	}
	// Every $ref resolves.
	raw, _ := os.ReadFile("openapi.json")
	var full map[string]any
	if err := json.Unmarshal(raw, &full); err != nil {
		t.Fatal(err)
	}
	comps := full["components"].(map[string]any)
	for _, m := range regexp.MustCompile(`"\$ref": "#/components/([a-zA-Z]+)/([A-Za-z]+)"`).FindAllStringSubmatch(string(raw), -1) {
		if _, ok := comps[m[1]].(map[string]any)[m[2]]; !ok {
			t.Errorf("dangling $ref %s/%s", m[1], m[2])
		}
	}
}

// TestOpenAPIFields checks that the OpenAPI schemas of the request types
// list exactly the JSON fields the strict decoder accepts (so that levels
// and parents of a hierarchical dimension are documented), that every
// documented split parses, and that the invariants endpoint documents the
// values of an invariant at a level.
func TestOpenAPIFields(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	mustUnmarshal(t, raw, &doc)
	for _, tc := range []struct {
		schema string
		typ    reflect.Type
	}{
		{"Dimension", reflect.TypeFor[domain.Dimension]()},
		{"QueryRequest", reflect.TypeFor[QueryRequest]()},
		{"Policy", reflect.TypeFor[Policy]()},
		{"DatasetRequest", reflect.TypeFor[DatasetRequest]()},
	} {
		var documented, decoded []string
		for name := range doc.Components.Schemas[tc.schema].Properties {
			documented = append(documented, name)
		}
		for name := range strictjson.Fields(tc.typ) {
			decoded = append(decoded, name)
		}
		slices.Sort(documented)
		slices.Sort(decoded)
		if !slices.Equal(documented, decoded) {
			t.Errorf("%s: documented %v, decoded %v", tc.schema, documented, decoded)
		}
	}
	splits := doc.Components.Schemas["QueryRequest"].Properties["split"].Enum
	if !slices.Contains(splits, "spine") {
		t.Errorf("split enum %v lacks spine", splits)
	}
	for _, name := range splits {
		if _, err := release.ParseSplit(name); err != nil {
			t.Errorf("documented split %q: %v", name, err)
		}
	}
	inv := string(doc.Paths["/v1/datasets/{dataset}/invariants"]["get"])
	if !strings.Contains(inv, `"values"`) {
		t.Errorf("the invariants endpoint does not document the values of an invariant at a level")
	}
}

// TestErrorsIndependentOfData sends the same refused and failing requests to
// two datasets with the same schema and policy but different rows: every
// status and message must be the same, since an analyst-facing error may not
// depend on private data.
func TestErrorsIndependentOfData(t *testing.T) {
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("full", 1, []string{"year"})
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "data", "arrests.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	part := filepath.Join(t.TempDir(), "part.csv")
	if err := os.WriteFile(part, []byte(strings.Join(lines[:300], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	req := DatasetRequest{ID: "part", Schema: arrestsSchema(t), Source: Source{CSV: part}, Policy: Policy{EpsilonPerAnalyst: 1, Invariants: [][]string{{"year"}}}}
	s.must(http.StatusCreated, "POST", "/admin/v1/datasets", s.admin, req, nil)
	_, key := s.analyst("e")
	bodies := []string{
		`{"kind":"cuboid","epsilon":0.9,"cuboid":["sex","agegroup"]}`,
		`{"kind":"cuboid","epsilon":0.9,"cuboid":["sex"]}`, // over budget now
		`{"kind":"cuboid","epsilon":0.05,"cuboid":["checks"],"nonneg":true}`,
		`{"kind":"linear","epsilon":0.2,"queries":[{"terms":[{"where":{"sex":["Female"]}}]}]}`,
		`{"kind":"linear","epsilon":0.01,"refine":true,"queries":[{"terms":[{"where":{"year":["1997"]}}]}]}`,
		`{"kind":"linear","epsilon":1e-12,"queries":[{"terms":[{"coef":1048576}]}]}`,
		`{"kind":"cuboid","epsilon":1e-9,"cuboid":["sex"]}`, // too small for the sampler
		`{"kind":"prior","epsilon":0.01,"query":{"terms":[{"where":{"year":["2002"]}}]},"prior":{"values":[1,2],"probabilities":[0.5,0.5]}}`,
		`{"kind":"prior","epsilon":0.01,"fraction":true,"query":{"terms":[{}]},"prior":{"pieces":[{"lo":0,"hi":1,"density":1}]}}`,
		`{"kind":"linear","epsilon":0.5,"queries":[{"terms":[{"where":{"year":["1997"]}}]}]}`, // over budget
	}
	for _, body := range bodies {
		var got [2]string
		for i, ds := range []string{"full", "part"} {
			st, r, raw := s.ask(ds, key, body, "")
			if st == http.StatusCreated {
				got[i] = fmt.Sprintf("answered, charged %d steps", r.Steps)
				continue
			}
			got[i] = http.StatusText(st) + ": " + errMsg(raw)
		}
		t.Logf("%s -> %s", body, got[0])
		if got[0] != got[1] {
			t.Errorf("%s:\n full: %s\n part: %s", body, got[0], got[1])
		}
	}
}

// TestSpecCheck checks the checker that every test's requests and responses
// go through (specChecked): the document must be valid OpenAPI, and a
// response with an undocumented field or status, a request with an
// undocumented field that the server accepts, and an accepted request
// without a key must each be reported.
func TestSpecCheck(t *testing.T) {
	doc, router := loadSpec(t)
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi %q: the document is written for 3.0.3", doc.OpenAPI)
	}
	exchange := func(method, path, key, body string, status int, resp string) error {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		rec := &recordingWriter{ResponseWriter: httptest.NewRecorder()}
		rec.Header().Set("Content-Type", "application/json")
		rec.WriteHeader(status)
		rec.Write([]byte(resp))
		return checkExchange(doc, router, r, []byte(body), rec)
	}
	budget := `{"dataset":"d","unit":"epsilon","total":1,"spent":0,"remaining":1,"total_steps":1099511627776,"spent_steps":0,"remaining_steps":1099511627776}`
	analyst := `{"name":"alice"}`
	created := `{"analyst":{"id":"a_1","name":"alice","created_at":"2024-01-01T00:00:00Z","keys":[],"budgets":[]},"api_key":"kdp_x","note":"n"}`
	for _, tc := range []struct {
		name               string
		method, path, body string
		key                string
		status             int
		resp               string
		ok                 bool
	}{
		{"documented", "GET", "/v1/datasets/d/budget", "", "k", 200, budget, true},
		{"documented error", "GET", "/v1/datasets/d/budget", "", "k", 404, `{"error":{"code":"not_found","message":"not found"}}`, true},
		{"created", "POST", "/admin/v1/analysts", analyst, "k", 201, created, true},
		{"undocumented response field", "GET", "/v1/datasets/d/budget", "", "k", 200, strings.Replace(budget, `"unit"`, `"extra":1,"unit"`, 1), false},
		{"missing required field", "GET", "/v1/datasets/d/budget", "", "k", 200, strings.Replace(budget, `"spent":0,`, "", 1), false},
		{"undocumented status", "GET", "/v1/datasets/d/budget", "", "k", 418, `{"error":{"code":"internal","message":"x"}}`, false},
		{"undocumented error code", "GET", "/v1/datasets/d/budget", "", "k", 404, `{"error":{"code":"gone","message":"x"}}`, false},
		{"undocumented request field accepted", "POST", "/admin/v1/analysts", `{"name":"alice","team":"x"}`, "k", 201, created, false},
		{"undocumented request field refused", "POST", "/admin/v1/analysts", `{"name":"alice","team":"x"}`, "k", 400, `{"error":{"code":"bad_request","message":"x"}}`, true},
		{"no key, answered", "GET", "/v1/datasets/d/budget", "", "", 200, budget, false},
		{"no key, refused", "GET", "/v1/datasets/d/budget", "", "", 401, `{"error":{"code":"unauthorized","message":"x"}}`, true},
		{"undocumented path answered", "GET", "/v1/nothing", "", "k", 200, `{}`, false},
		{"undocumented path refused", "GET", "/v1/nothing", "", "k", 404, `{"error":{"code":"not_found","message":"x"}}`, true},
	} {
		err := exchange(tc.method, tc.path, tc.key, tc.body, tc.status, tc.resp)
		if (err == nil) != tc.ok {
			t.Errorf("%s: check says %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
