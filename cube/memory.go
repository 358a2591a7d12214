package cube

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/knowdp/knowdp/domain"
)

// ErrMemory is wrapped by CheckMemory's error when an allocation would not
// fit in the memory available.
var ErrMemory = errors.New("not enough memory")

// ReleaseMemory estimates the bytes that aggregating the cuboids a
// release needs (release.Plan.Needs) and releasing
// those of them in released take: every needed cuboid once, and each
// released cuboid's noisy copy and consistency work arrays (more for a
// non-negative release, whose iteration keeps correction terms). It is an
// estimate for refusing hopeless sizes early, not a bound.
func ReleaseMemory(s *domain.Schema, needs, released []domain.Cuboid, nonneg bool) int64 {
	copies := 3.0
	if nonneg {
		copies = 6
	}
	size := func(c domain.Cuboid) float64 { // in float64: no overflow
		n := 1.0
		for _, i := range c.Dims() {
			n *= float64(s.Size(i))
		}
		return n
	}
	var cells float64
	for _, c := range needs {
		cells += size(c)
	}
	for _, c := range released {
		cells += copies * size(c)
	}
	if b := 8 * cells; b < math.MaxInt64/2 {
		return int64(b)
	}
	return math.MaxInt64 / 2
}

// CheckMemory returns an error wrapping ErrMemory if need bytes exceed the
// memory available to this process: MemAvailable of /proc/meminfo, or the
// room left under the cgroup (v2) memory limit if that is smaller. Where
// neither can be read, it returns nil: the check is a courtesy that turns
// an out-of-memory crash into a clear error, not a guarantee.
func CheckMemory(need int64) error {
	return checkMemory("/", need)
}

func checkMemory(root string, need int64) error {
	avail, ok := availableMemory(root)
	if !ok || need <= avail {
		return nil
	}
	return fmt.Errorf("%w: about %s needed, %s available", ErrMemory, formatBytes(need), formatBytes(avail))
}

// availableMemory reads the memory available under root (the file system
// root; tests use a fake one).
func availableMemory(root string) (int64, bool) {
	avail, ok := int64(0), false
	if b, err := os.ReadFile(filepath.Join(root, "proc/meminfo")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[0] == "MemAvailable:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb >= 0 && kb < math.MaxInt64/1024 {
					avail, ok = kb*1024, true
				}
			}
		}
	}
	readInt := func(name string) (int64, bool) {
		b, err := os.ReadFile(filepath.Join(root, "sys/fs/cgroup", name))
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v, err == nil && v >= 0
	}
	if limit, okL := readInt("memory.max"); okL { // "max" (no limit) does not parse
		used, _ := readInt("memory.current")
		room := max(limit-used, 0)
		if !ok || room < avail {
			avail, ok = room, true
		}
	}
	return avail, ok
}

// formatBytes formats a byte count with a binary unit (KiB, MiB, GiB, TiB).
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i])
}
