package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/knowdp/knowdp/server/store"
)

// TestDisconnectNotAnError (issue 33): a store error seen after the client
// went away is logged as the client's leaving, not as the store's failure
// at ERROR; the same error while the client waits still is one.
func TestDisconnectNotAnError(t *testing.T) {
	var logs syncBuffer
	s := &Server{log: slog.New(slog.NewTextHandler(&logs, nil))}
	storeErr := fmt.Errorf("read budget: %w", syscall.ECONNRESET)
	if !store.Unavailable(storeErr) {
		t.Fatal("the test's error is not a storage failure")
	}
	for _, tc := range []struct {
		name     string
		gone     bool
		err      error
		status   int
		level    string
		logWants string
	}{
		{"client gone", true, storeErr, 499, "level=INFO", "client went away"},
		{"client waiting", false, storeErr, http.StatusServiceUnavailable, "level=ERROR", "store unavailable"},
		{"client gone, commit failed", true, fmt.Errorf("batch: %w: %w", store.ErrCommitFailed, storeErr), http.StatusServiceUnavailable, "level=ERROR", "store unavailable"},
	} {
		logs.mu.Lock()
		logs.b.Reset()
		logs.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		if tc.gone {
			cancel()
		}
		r := httptest.NewRequest("GET", "/v1/datasets/d/budget", nil).WithContext(ctx)
		w := httptest.NewRecorder()
		s.fail(w, r, tc.err)
		cancel()
		line := logs.String()
		if w.Code != tc.status || !strings.Contains(line, tc.level) || !strings.Contains(line, tc.logWants) {
			t.Errorf("%s: status %d, log %q; want %d and %s %q", tc.name, w.Code, line, tc.status, tc.level, tc.logWants)
		}
	}
}
