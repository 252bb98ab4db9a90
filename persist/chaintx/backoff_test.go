package chaintx_test

// Issue 33 item 4: a STUCK tx is resent with a delay that doubles, from
// the resubmit interval up to its cap (not every interval forever), and
// logs one WARN per doubling (none at the cap).

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
)

// syncBuffer is a log sink the manager's goroutines may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

func TestStuckResubmitBacksOff(t *testing.T) {
	e := newEnv(t)
	key, sub := e.node.NewKey(t)
	e.automine(false) // never mined: STUCK, resent for ever
	cfg := e.fast(key, "a", e.store)
	const base, limit = 100 * time.Millisecond, 400 * time.Millisecond
	cfg.TrackInterval, cfg.StuckAfter = 20*time.Millisecond, 150*time.Millisecond
	cfg.ResubmitInterval, cfg.ResubmitMaxInterval = base, limit
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	m := e.start(cfg)
	tx := e.create(m, transfer(sub, "stuck", anviltest.Addr(0x34), 1))
	e.waitState(tx.ID, chaintx.Stuck, 5*time.Second)

	// The resends since STUCK, by their times (last_submit_at: set by the
	// claim and by the record of the send, both at the resend).
	var at []time.Time
	var backoffs []time.Duration
	waitFor(t, 5*time.Second, "six resends of the STUCK tx", func() bool {
		got := e.get(tx.ID)
		if got.LastSubmitAt != nil && got.ResubmitBackoff > 0 && (len(at) == 0 || got.LastSubmitAt.Sub(at[len(at)-1]) > 50*time.Millisecond) {
			at, backoffs = append(at, *got.LastSubmitAt), append(backoffs, got.ResubmitBackoff)
		}
		return len(at) >= 6
	})
	want := []time.Duration{base, 2 * base, limit, limit, limit, limit}
	for i, d := range want {
		if backoffs[i] != d {
			t.Fatalf("back-off after each resend: %v, want %v", backoffs, want)
		}
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < want[i-1]-20*time.Millisecond {
			t.Fatalf("resend %d came %v after the previous one, want >= %v (times %v)", i, gap, want[i-1], at)
		}
	}
	if n := logs.count("level=WARN msg=\"chaintx: resubmitted a STUCK tx: backing off\""); n != 3 {
		t.Fatalf("%d WARN lines for the back-off, want 3 (one per doubling: 100ms, 200ms, 400ms)", n)
	}
	if n := logs.count("msg=\"chaintx: resubmitted\" "); n > 3 {
		t.Fatalf("%d INFO resubmit lines, want at most the ones before STUCK", n)
	}
}
