package sidecar

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestRoundTrip reads sidecars that knowdp release wrote (seeded, so not
// private) and writes them back: every field must be known to the format
// and come out in the same order, with the same values, byte for byte, so
// that a reader that decodes into Metadata and a writer that encodes it
// agree with the files knowdp writes. The fixtures cover a workload with
// what each invariant costs, one without invariants (its lower bound), a
// Gaussian release across a hierarchy (levels), a release per privacy
// unit (a private count of truncated units) and an integer one-table
// release (integer_exact).
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		file  string
		check func(Metadata) bool
	}{
		{"workload.json", func(m Metadata) bool { return len(m.Tables[0].WithoutInvariants) > 0 && len(m.Exact) == 2 }},
		{"lower-bound.json", func(m Metadata) bool { return m.LowerBound != nil && m.LowerBound.Value > 0 && m.SplitBound != nil }},
		{"views-gaussian.json", func(m Metadata) bool { return m.Hierarchy == "geo" && len(m.Levels) > 0 && m.Rho > 0 && m.Delta > 0 }},
		{"units.json", func(m Metadata) bool {
			return m.PrivacyUnit != nil && m.PrivacyUnit.Column == "student" && m.PrivacyUnit.TruncatedUnits != nil
		}},
		{"one-table-integer.json", func(m Metadata) bool { return len(m.Tables) == 1 && m.Tables[0].IntegerExact != nil }},
	} {
		t.Run(tc.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(want))
			dec.DisallowUnknownFields()
			var m Metadata
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("decoding: %v", err)
			}
			if m.Private || !m.Seeded || m.Guarantee != "none" {
				t.Errorf("a seeded release read as private %v, seeded %v, guarantee %q", m.Private, m.Seeded, m.Guarantee)
			}
			if !tc.check(m) {
				t.Errorf("the fields this fixture is for were not read: %+v", m)
			}
			got, err := json.MarshalIndent(m, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
				t.Errorf("written back, the sidecar differs from the one knowdp wrote:\n%s", firstDiff(got, want))
			}
		})
	}
}

// TestCuboidMetadataFields pins the JSON names of a one-cuboid story that
// readers rely on, with the omitempty fields of a Laplace release left out.
func TestCuboidMetadataFields(t *testing.T) {
	exact := false
	for _, tc := range []struct {
		name string
		m    CuboidMetadata
		want []string
		not  []string
	}{
		{"laplace", CuboidMetadata{Epsilon: 1, Scale: 8},
			[]string{`"epsilon":1`, `"scale":8`, `"moe90_note":""`, `"released_exactly":false`, `"private":false`},
			[]string{`"rho"`, `"sigma"`, `"integer_exact"`, `"nonneg_residual"`}},
		{"integer", CuboidMetadata{Integer: true, IntegerExact: &exact, IntegerMaxDeviation: 2},
			[]string{`"integer":true`, `"integer_exact":false`, `"integer_max_deviation":2`}, nil},
		{"gaussian", CuboidMetadata{Rho: 0.5, L2Squared: 3, Delta: 1e-6},
			[]string{`"rho":0.5`, `"l2_sensitivity_squared":3`, `"delta":0.000001`}, nil},
	} {
		b, err := json.Marshal(tc.m)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !bytes.Contains(b, []byte(w)) {
				t.Errorf("%s: %s lacks %s", tc.name, b, w)
			}
		}
		for _, w := range tc.not {
			if bytes.Contains(b, []byte(w)) {
				t.Errorf("%s: %s has %s", tc.name, b, w)
			}
		}
	}
}

// firstDiff shows where a and b part, with some context.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-80)
	return "got:  ..." + string(a[from:min(len(a), i+80)]) + "\nwant: ..." + string(b[from:min(len(b), i+80)])
}
