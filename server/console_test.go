package server

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// browse opens a headless Chromium on the page at url, accepting every
// confirm() the page shows, and returns its context.
func browse(t *testing.T, url string) context.Context {
	t.Helper()
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
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	dialogs := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	if err := chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitVisible(`body[data-loaded="yes"]`)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return bctx
}

// TestOperatorConsole (issue 33) drives the operator's console in headless
// Chromium against a real server: it registers a dataset, tops up an
// analyst's budget (and is refused a cut below what was spent), retires a
// dataset, shows an analyst's spending over time and the audit trail; each
// step is checked in the page and, through the API, in the server. Set
// KNOWDP_SCREENSHOT_CONSOLE to a file name to keep a PNG of the page.
func TestOperatorConsole(t *testing.T) {
	needChromium(t)
	s := startServer(t, Config{DataDir: t.TempDir()})
	s.registerArrests("arrests", 2, []string{"year"})
	alice, key := s.analyst("alice")
	if st, _, raw := s.ask("arrests", key, map[string]any{"kind": "cuboid", "epsilon": 0.5, "cuboid": []string{"sex"}}, ""); st != http.StatusCreated {
		t.Fatalf("query: %d %s", st, raw)
	}
	b := browse(t, s.ts.URL+"/admin/#key="+s.admin)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(b, actions...); err != nil {
			t.Fatalf("chromium: %s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(b, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("chromium: text of %s: %v", sel, err)
		}
		return v
	}
	// waitText waits until the element's text contains want.
	waitText := func(sel, want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			got := text(sel)
			if strings.Contains(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s shows %q, want it to contain %q", sel, got, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Register a dataset from the form.
	do("register",
		chromedp.Click(`#register-box summary`),
		chromedp.SetValue(`#reg-id`, "arrests2"),
		chromedp.SetValue(`#reg-name`, "Arrests, second release"),
		chromedp.SetValue(`#reg-path`, "arrests.csv"),
		chromedp.SetValue(`#reg-budget`, "3"),
		chromedp.SetValue(`#reg-invariants`, "year; sex"),
		chromedp.SetValue(`#reg-schema`, string(arrestsSchema(t))),
		chromedp.Click(`#register button[type=submit]`),
		chromedp.WaitVisible(`#datasets tr[data-id="arrests2"]`),
	)
	var reg adminDatasetView
	s.must(http.StatusOK, "GET", "/admin/v1/datasets/arrests2", s.admin, nil, &reg)
	if reg.Rows != 5226 || reg.EpsilonPerAnalyst != 3 || len(reg.Invariants) != 2 || reg.Name != "Arrests, second release" {
		t.Errorf("registered from the page: %+v", reg)
	}
	waitText(`#register-result`, "Registered arrests2: 5,226 rows")

	// Top up alice's budget on arrests; a cut below what she spent is refused.
	do("top up",
		chromedp.SetValue(`#budget-analyst`, alice),
		chromedp.SetValue(`#budget-dataset`, "arrests"),
		chromedp.SetValue(`#budget-mode`, "add"),
		chromedp.SetValue(`#budget-amount`, "0.5"),
		chromedp.SetValue(`#budget-note`, "grant 2024-17"),
		chromedp.Click(`#budget button[type=submit]`),
	)
	waitText(`#budget-result`, "total 2.5 epsilon, spent 0.5, remaining 2")
	if got := s.budgetOf("arrests", key); got.TotalSteps != steps(2.5) {
		t.Errorf("alice's total after the top-up: %d steps, want %d", got.TotalSteps, steps(2.5))
	}
	waitText(`#analysts`, "arrests: 0.5 / 2.5 epsilon")
	do("cut",
		chromedp.SetValue(`#budget-mode`, "total"),
		chromedp.SetValue(`#budget-amount`, "0.25"),
		chromedp.Click(`#budget button[type=submit]`),
	)
	waitText(`#budget-result`, "below what the analyst has spent")
	if got := s.budgetOf("arrests", key); got.TotalSteps != steps(2.5) {
		t.Errorf("a refused cut changed the total to %d steps", got.TotalSteps)
	}

	// Retire the new dataset (the page asks to confirm; the test accepts).
	do("retire", chromedp.Click(`#datasets tr[data-id="arrests2"] button`), chromedp.WaitVisible(`#datasets tr.retired[data-id="arrests2"]`))
	s.must(http.StatusOK, "GET", "/admin/v1/datasets/arrests2", s.admin, nil, &reg)
	if reg.Retired == nil {
		t.Errorf("the dataset retired from the page is not retired: %+v", reg)
	}
	waitText(`#datasets tr[data-id="arrests2"]`, "retired")

	// Alice's spending over time: a chart and a table per dataset.
	do("spending",
		chromedp.SetValue(`#spending-bucket`, "query"),
		chromedp.Click(`#analysts tr[data-id="`+alice+`"] td:last-child button:last-child`),
		chromedp.WaitVisible(`figure.spending[data-dataset="arrests"] svg path.total`),
	)
	fig := text(`figure.spending[data-dataset="arrests"]`)
	for _, want := range []string{"spent 0.5 of 2.5 epsilon", "0.5", "2.5"} {
		if !strings.Contains(fig, want) {
			t.Errorf("the spending view shows %q, want it to contain %q", fig, want)
		}
	}
	if rows, err := chromedp.Run(b, chromedp.Evaluate[int](`document.querySelectorAll('figure.spending[data-dataset="arrests"] tbody tr').length`)); err != nil || rows != 2 {
		t.Errorf("spending per answer: %d rows (%v), want 2 (the answer and the top-up)", rows, err)
	}

	// The audit trail lists what the page did, by this page's key.
	audit := text(`#audit`)
	for _, want := range []string{"dataset.registered", "budget.changed", "2 → 2.5 epsilon", "grant 2024-17", "dataset.retired", "analyst.created", "(this page)"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit trail shows %q, want it to contain %q", audit, want)
		}
	}
	if name := os.Getenv("KNOWDP_SCREENSHOT_CONSOLE"); name != "" {
		shot, err := chromedp.Run(b, chromedp.FullScreenshot(100)) // quality 100: a PNG
		if err != nil {
			t.Fatalf("chromium: screenshot: %v", err)
		}
		os.WriteFile(name, shot, 0o644)
	}
}
