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

	// The resends since STUCK, each seen once its send is recorded
	// (submit_attempts + 1), with its time and the back-off it set.
	var at []time.Time
	var backoffs []time.Duration
	attempts := -1
	waitFor(t, 5*time.Second, "six resends of the STUCK tx", func() bool {
		got := e.get(tx.ID)
		if got.ResubmitBackoff > 0 && got.SubmitAttempts > attempts && got.LastSubmitAt != nil {
			if attempts >= 0 { // the first one seen may be half recorded: a reference only
				at, backoffs = append(at, *got.LastSubmitAt), append(backoffs, got.ResubmitBackoff)
			}
			attempts = got.SubmitAttempts
		}
		return len(at) >= 5
	})
	// From where the sampling started, each back-off doubles up to the cap,
	// and the resends are as far apart (record times: a loaded machine's
	// send latency jitters, hence half of it).
	for i := 1; i < len(backoffs); i++ {
		if want := min(2*backoffs[i-1], limit); backoffs[i] != want || backoffs[0] < base {
			t.Fatalf("back-off after each resend: %v, want doubling from %v up to %v", backoffs, base, limit)
		}
		if gap := at[i].Sub(at[i-1]); gap < backoffs[i-1]/2 {
			t.Fatalf("resend %d came %v after the previous one, want about %v (times %v)", i, gap, backoffs[i-1], at)
		}
	}
	if backoffs[len(backoffs)-1] != limit {
		t.Fatalf("back-offs %v never reached the cap %v", backoffs, limit)
	}
	if n := logs.count("level=WARN msg=\"chaintx: resubmitted a STUCK tx: backing off\""); n != 3 {
		t.Fatalf("%d WARN lines for the back-off, want 3 (one per doubling: 100ms, 200ms, 400ms)", n)
	}
	if n := logs.count("msg=\"chaintx: resubmitted\" "); n > 3 {
		t.Fatalf("%d INFO resubmit lines, want at most the ones before STUCK", n)
	}
}
