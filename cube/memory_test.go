package cube

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knowdp/knowdp/domain"
	"github.com/knowdp/knowdp/internal/testkit"
)

func TestCheckMemory(t *testing.T) {
	write := func(t *testing.T, root, name, text string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const meminfo = "MemTotal:       24683620 kB\nMemFree:        23022672 kB\nMemAvailable:    1048576 kB\n" // 1 GiB
	for _, tc := range []struct {
		name          string
		meminfo       string
		max, current  string
		need          int64
		wantErr       bool
		wantAvailable string
	}{
		{"fits meminfo", meminfo, "", "", 1 << 29, false, ""},
		{"exceeds meminfo", meminfo, "", "", 3 << 29, true, "1.0 GiB available"},
		{"cgroup tighter", meminfo, "536870912\n", "268435456\n", 1 << 29, true, "256.0 MiB available"},
		{"cgroup unlimited", meminfo, "max\n", "1000\n", 1 << 29, false, ""},
		{"cgroup over its limit", meminfo, "1000", "2000", 1, true, "0 B available"},
		{"nothing readable", "", "", "", 1 << 62, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.meminfo != "" {
				write(t, root, "proc/meminfo", tc.meminfo)
			}
			if tc.max != "" {
				write(t, root, "sys/fs/cgroup/memory.max", tc.max)
				write(t, root, "sys/fs/cgroup/memory.current", tc.current)
			}
			err := checkMemory(root, tc.need)
			if (err != nil) != tc.wantErr || (err != nil && (!errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), tc.wantAvailable))) {
				t.Fatalf("need %d: error %v, want error %v with %q", tc.need, err, tc.wantErr, tc.wantAvailable)
			}
		})
	}
	s := testkit.TestSchema(t, 10, 10, 10)
	if got, want := ReleaseMemory(s, []domain.Cuboid{domain.Base(3)}, []domain.Cuboid{domain.Base(3)}, false), int64(8*(1000+3*1000)); got != want {
		t.Errorf("ReleaseMemory base = %d, want %d", got, want)
	}
	d0, d01 := testkit.CuboidOf([]int{0}), testkit.CuboidOf([]int{0, 1})
	if got, want := ReleaseMemory(s, []domain.Cuboid{d0, d01}, []domain.Cuboid{d0}, true), int64(8*(10+100+6*10)); got != want {
		t.Errorf("ReleaseMemory nonneg {0} = %d, want %d", got, want)
	}
	big := testkit.TestSchema(t, 1<<11, 1<<11, 1<<11, 1<<11, 1<<11, 1<<11)
	if got := ReleaseMemory(big, []domain.Cuboid{domain.Base(6)}, []domain.Cuboid{domain.Base(6)}, false); got != math.MaxInt64/2 {
		t.Errorf("ReleaseMemory of 2^66 cells = %d, want saturation", got)
	}
}
