package server

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/knowdp/knowdp/internal/pgtest"
	"github.com/knowdp/knowdp/server/store"
)

// chromium is Debian's Chromium, which scripts/test.sh installs.
const chromium = "/usr/bin/chromium"

// needChromium skips the test when Chromium is not installed (fails it under
// $KNOWDP_TEST_REQUIRE_ALL=1).
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		pgtest.Missing(t, chromium+" is not installed (Debian's chromium package)")
	}
	if testing.Short() {
		t.Skip("skipped under -short: starts a browser")
	}
}

// TestCuratorPage loads the curator's page in headless Chromium against a
// real server and checks that it shows the dataset, the analyst, the budget
// spent and the recent queries. Set KNOWDP_SCREENSHOT to a file name to keep
// a PNG of the page.
func TestCuratorPage(t *testing.T) {
	needChromium(t)
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 2, []string{"year"})
	_, key := s.analyst("alice")
	if st, _, raw := s.ask("arrests", key, map[string]any{"kind": "cuboid", "epsilon": 0.5, "cuboid": []string{"sex"}}, ""); st != http.StatusCreated {
		t.Fatalf("query: %d %s", st, raw)
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	if err := chromedp.Do(bctx,
		chromedp.Navigate(s.ts.URL+"/admin/#key="+s.admin),
		chromedp.WaitVisible(`body[data-loaded="yes"]`),
	); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	text := func(sel string) string {
		v, err := chromedp.Run(bctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("chromium: text of %s: %v", sel, err)
		}
		return v
	}
	datasets, analysts, queries, status := text("#datasets"), text("#analysts"), text("#queries"), text("#status")
	adminKeys := text("#admin-keys")
	adminID, _ := store.KeyID(s.admin)
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("chromium: screenshot: %v", err)
	}
	if name := os.Getenv("KNOWDP_SCREENSHOT"); name != "" {
		os.WriteFile(name, shot, 0o644)
	}
	for _, c := range []struct{ what, text, want string }{
		{"datasets", datasets, "arrests"},
		{"datasets", datasets, "Toronto arrests"},
		{"datasets", datasets, "5,226"},
		{"datasets", datasets, "{year}"},
		{"analysts", analysts, "alice"},
		{"analysts", analysts, "arrests: 0.5 / 2"},
		{"queries", queries, "cuboid"},
		{"queries", queries, "alice"},
		{"status", status, "Loaded"},
		{"admin keys", adminKeys, adminID + " (this page)"},
		{"admin keys", adminKeys, "active"},
	} {
		if !strings.Contains(c.text, c.want) {
			t.Errorf("%s shows %q, want it to contain %q", c.what, c.text, c.want)
		}
	}
}
