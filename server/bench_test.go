package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/knowdp/knowdp/internal/pgtest"
)

// processCPU returns the CPU time (user and system) used by this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkServe is the load benchmark: analysts' linear queries over
// loopback HTTP with the durable ledger on (SQLite with synchronous=FULL, and
// PostgreSQL when $KNOWDP_TEST_POSTGRES is set), from 1, 16 and 64
// concurrent clients. Every query is distinct, so each one is computed,
// charged and committed (no answer comes from the cache). It reports
// answered queries per second and latency percentiles.
func BenchmarkServe(b *testing.B) {
	stores := []struct {
		name string
		cfg  func(b *testing.B) Config
	}{{"sqlite", func(b *testing.B) Config { return Config{DataDir: b.TempDir()} }}}
	if os.Getenv(pgtest.Env) != "" {
		stores = append(stores, struct {
			name string
			cfg  func(b *testing.B) Config
		}{"postgres", func(b *testing.B) Config { return Config{Postgres: pgtest.Schema(b)} }})
	}
	years := []string{"1997", "1998", "1999", "2000", "2001", "2002"}
	for _, st := range stores {
		for _, clients := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", st.name, clients), func(b *testing.B) {
				s := startServer(b, st.cfg(b))
				s.registerArrests("arrests", 4096, []string{"year"})
				_, key := s.analyst("bench")
				hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
				// Bodies are made before the clock starts.
				bodies := make([][]byte, b.N)
				for i := range bodies {
					q := map[string]any{"kind": "linear", "epsilon": 1.0 / (1 << 20), "queries": []LinearQuery{
						countQuery(i/len(years)+1, map[string][]string{"year": {years[i%len(years)]}})}}
					bodies[i], _ = json.Marshal(q)
				}
				lat := make([]time.Duration, b.N)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				cpu0 := processCPU()
				start := time.Now()
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := int(next.Add(1) - 1)
							if i >= b.N {
								return
							}
							req, _ := http.NewRequest("POST", s.ts.URL+"/v1/datasets/arrests/queries", bytes.NewReader(bodies[i]))
							req.Header.Set("Authorization", "Bearer "+key)
							t0 := time.Now()
							res, err := hc.Do(req)
							if err != nil {
								b.Error(err)
								return
							}
							io.Copy(io.Discard, res.Body)
							res.Body.Close()
							lat[i] = time.Since(t0)
							if res.StatusCode != http.StatusCreated {
								b.Errorf("status %d", res.StatusCode)
								return
							}
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				cpu := processCPU() - cpu0
				b.StopTimer()
				slices.Sort(lat)
				pct := func(p float64) float64 {
					return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "queries/s")
				b.ReportMetric(pct(0.50), "p50-ms")
				b.ReportMetric(pct(0.90), "p90-ms")
				b.ReportMetric(pct(0.99), "p99-ms")
				// CPU of the whole process (server and clients) per query:
				// on a loaded machine, cores / this bounds what an idle one
				// could do.
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/query")
			})
		}
	}
}
