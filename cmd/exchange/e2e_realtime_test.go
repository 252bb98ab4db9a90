//go:build linux

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/journal/rttest"
)

// TestE2ERealtimeProcessor: --realtime-processor runs the exchange's
// processor on a SCHED_FIFO thread, the process's only one (the thread the
// start-up log names), the exchange accepts commands on it, and SIGTERM stops it
// cleanly. Where this machine refuses the policy, the exchange says so in a
// warning and serves all the same.
func TestE2ERealtimeProcessor(t *testing.T) {
	t.Parallel()
	s := e2eStart(t, t.TempDir(), "", "--realtime-processor")
	admin, user := s.token(1000, true), s.token(7, false)
	if st, b := s.do("POST", "/admin/v1/adjust", admin, map[string]any{"user_id": 7, "asset": "USDT",
		"amount": "1000", "ref": "rt-1"}); st != 200 {
		t.Fatalf("adjust: %d %v", st, b)
	}
	if st, b := s.do("POST", "/api/v1/order", user, map[string]any{"market": "BTC-USDT", "side": "BUY", "type": "LIMIT",
		"price": "100", "quantity": "1"}); st != 200 {
		t.Fatalf("order: %d %v", st, b)
	}
	allowed := rttest.Permitted()
	want := "the processor runs on a real-time thread"
	if !allowed {
		want = "could not get real-time priority"
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(s.Logs(), want); { // INFO lines are flushed in batches
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q:\n%s", want, s.Logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	fifo := rttest.FIFOThreads(t, s.cmd.Process.Pid)
	logs := s.Logs()
	if !allowed {
		if len(fifo) != 0 || !strings.Contains(logs, "could not get real-time priority") {
			t.Fatalf("refused here, yet SCHED_FIFO threads %v or no warning:\n%s", fifo, logs)
		}
	} else if len(fifo) != 1 || !strings.Contains(logs, fmt.Sprintf(`"tid":%d`, fifo[0])) ||
		!strings.Contains(logs, "the processor runs on a real-time thread") {
		t.Fatalf("SCHED_FIFO threads %v, want the processor's alone:\n%s", fifo, logs)
	}
	s.Stop()
}
