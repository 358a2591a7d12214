package report

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

const workloadJSON = `{
  "mechanism": "Laplace noise",
  "composition": "sequential composition",
  "epsilon": 0.9999999999990905,
  "epsilon_budget": 1,
  "neighbours": "worst-case induced neighbours given the exact cuboids {b}",
  "split": "optimal", "strategy": "requested",
  "objective": 10, "objective_lower_bound": 9.5, "optimality_gap": 0.05,
  "guarantee": "unconditional",
  "moe90": "half-width of the interval",
  "measurements": [{"cuboid": ["a","b"], "epsilon": 0.75, "sensitivity": 2, "sensitivity_rule": "rule", "scale": 2.6666, "grid": 1e-6},
                   {"cuboid": ["a"], "epsilon": 0.25, "sensitivity": 2, "sensitivity_rule": "rule", "scale": 8, "grid": 1e-6}],
  "tables": [{"cuboid": ["a","b"], "file": "ab.csv", "public": false, "measured": true, "moe90": 4.5, "variance": 9},
             {"cuboid": ["a"], "file": "a.csv", "public": false, "measured": true, "moe90": 3, "variance": 4},
             {"cuboid": [], "file": "total.csv", "public": true, "measured": false, "moe90": 0, "variance": 0, "note": "public"}],
  "exact": [["b"]],
  "seeded": false, "domains_from_data": false, "private": true
}`

const sidecarJSON = `{"mechanism": "Gaussian noise", "composition": "zCDP", "epsilon": 7.766216625311749, "rho": 1, "rho_budget": 1,
  "delta": 1e-6, "neighbours": "n", "split": "optimal", "strategy": "requested", "objective": 4, "guarantee": "unconditional",
  "estimate": "least squares", "moe90": "each count is within moe90",
  "measurements": [{"cuboid": ["a","b"], "sensitivity": 2, "sensitivity_rule": "L1 rule", "grid": 1e-6, "rho": 1,
    "l2_sensitivity": 1.4142135623730951, "l2_sensitivity_rule": "L2 rule", "sigma": 1.0000004}],
  "tables": [{"cuboid": ["a","b"], "file": "t.csv", "cells": 4, "weight": 1, "public": false, "measured": true,
    "moe90": 1.1630876239769234, "variance": 1.0000008}],
  "exact": [["a"]], "seeded": false, "domains_from_data": false, "private": true, "warnings": []}`

const estimateJSON = `{"measurements": "m.json", "note": "post-processing", "mechanism": "laplace", "epsilon": 1,
  "guarantee": "unconditional", "private": true,
  "tables": [{"cuboid": ["a"], "file": "a.csv", "public": false, "variance": 4, "moe90": 3}]}`

func TestParseMetadata(t *testing.T) {
	m, err := ParseMetadata("release.json", []byte("\ufeff"+workloadJSON))
	if err != nil {
		t.Fatal(err)
	}
	if m.OneTable || m.Gaussian || m.Epsilon != 0.9999999999990905 || m.EpsilonBudget != 1 || len(m.Measurements) != 2 ||
		len(m.Tables) != 3 || m.Tables[2].File != "total.csv" || !m.Tables[2].Public || *m.Tables[0].Variance != 9 ||
		m.MOE90Note != "half-width of the interval" || *m.OptimalityGap != 0.05 || *m.Seeded || !m.Private {
		t.Errorf("workload: %+v", m)
	}
	if m.Measurements[0].Epsilon != 0.75 || m.Measurements[1].Scale != 8 {
		t.Errorf("measurements: %+v", m.Measurements)
	}

	m, err = ParseMetadata("t.json", []byte(sidecarJSON))
	if err != nil {
		t.Fatal(err)
	}
	if !m.OneTable || !m.Gaussian || m.Rho != 1 || len(m.Measurements) != 1 || m.Measurements[0].Rho != 1 ||
		m.Measurements[0].Sigma != 1.0000004 || len(m.Tables) != 1 || m.Tables[0].MOE90 != 1.1630876239769234 ||
		!m.Tables[0].Measured || m.Tables[0].File != "t.csv" || m.MOE90Note != "each count is within moe90" {
		t.Errorf("sidecar: %+v", m)
	}

	m, err = ParseMetadata("estimate.json", []byte(estimateJSON))
	if err != nil {
		t.Fatal(err)
	}
	if m.OneTable || m.Seeded != nil || m.Note != "post-processing" || len(m.Measurements) != 0 || m.Tables[0].File != "a.csv" {
		t.Errorf("estimate: %+v", m)
	}

	for _, c := range []struct{ name, json, want string }{
		{"refine", `{"answers": "a.csv", "private": null, "guarantee": "inherited"}`, "neither"},
		{"schema", `{"dimensions": []}`, "neither"},
		{"no private", `{"cuboid": ["a"], "epsilon": 1}`, `no "private"`},
		{"no epsilon", `{"cuboid": ["a"], "private": true}`, `no "epsilon"`},
		{"no tables", `{"tables": [], "epsilon": 1, "private": true}`, "lists no tables"},
		{"no file", `{"tables": [{"cuboid": ["a"]}], "epsilon": 1, "private": true}`, `table 1 ({a}) has no "file"`},
		{"type", `{"tables": [], "epsilon": "1", "private": true}`, `field "epsilon": string`},
		{"syntax", `{"tables": [`, "unexpected end"},
	} {
		_, err := ParseMetadata("x.json", []byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "x.json: ") {
			t.Errorf("%s: error %v, want one naming x.json and containing %q", c.name, err, c.want)
		}
		if c.want == "neither" && !errors.Is(err, ErrNotRelease) {
			t.Errorf("%s: %v is not ErrNotRelease", c.name, err)
		}
	}
}

func TestVerdict(t *testing.T) {
	yes, no := true, false
	base := Metadata{Epsilon: 0.9999999999990905, Private: true, Guarantee: "unconditional", Seeded: &no, DomainsFromData: &no}
	gauss := base
	gauss.Gaussian, gauss.Rho, gauss.Epsilon, gauss.Delta = true, 1, 7.766216625311749, 1e-6
	seededButPrivate := base // a contradiction: the seed wins
	seededButPrivate.Seeded = &yes
	fromData := base
	fromData.DomainsFromData, fromData.Private, fromData.Guarantee = &yes, false, "none"
	cond := base
	cond.Guarantee, cond.GuaranteeNote = "conditional", "sensitivity 3 given for {a}"
	exact := base
	exact.ReleasedExactly = true
	inherited := base
	inherited.Guarantee = "inherited"
	for _, c := range []struct {
		name     string
		m        Metadata
		class    string
		headline string
		reasons  int
	}{
		{"laplace", base, "private", "Differentially private: ε = 1.", 0},
		{"gaussian", gauss, "private", "Differentially private: ρ = 1 (zero-concentrated DP), which implies (ε, δ)-DP with ε = 7.76622 at δ = 1e-06.", 0},
		{"seeded", seededButPrivate, "not-private", "NOT differentially private", 1},
		{"domains from data", fromData, "not-private", "NOT differentially private", 3},
		{"conditional", cond, "conditional", "Private only under a condition: ε = 1", 2},
		{"released exactly", exact, "exact", "TRUE counts", 1},
		{"inherited", inherited, "private", "As private as the release it was estimated from: ε = 1", 0},
	} {
		v := c.m.Verdict()
		if v.Class != c.class || !strings.Contains(v.Headline, c.headline) || len(v.Reasons) != c.reasons {
			t.Errorf("%s: %+v, want class %s, headline with %q, %d reasons", c.name, v, c.class, c.headline, c.reasons)
		}
	}
}

// TestPublicTablesAreTrueCounts: a release.json whose every table is
// public (knowdp release of a table the invariants determine) gets the
// "TRUE counts" verdict, as release-graph's released_exactly does; one
// private table among them does not.
func TestPublicTablesAreTrueCounts(t *testing.T) {
	doc := func(public2 bool) string {
		return fmt.Sprintf(`{"private": true, "epsilon": 0, "guarantee": "unconditional", "seeded": false,
			"tables": [{"cuboid": ["year"], "file": "year.csv", "public": true}, {"cuboid": ["sex"], "file": "sex.csv", "public": %v}]}`, public2)
	}
	for _, c := range []struct {
		public2 bool
		class   string
	}{{true, "exact"}, {false, "private"}} {
		m, err := ParseMetadata("release.json", []byte(doc(c.public2)))
		if err != nil {
			t.Fatal(err)
		}
		if v := m.Verdict(); v.Class != c.class {
			t.Errorf("second table public %v: verdict %+v, want class %s", c.public2, v, c.class)
		}
	}
}
