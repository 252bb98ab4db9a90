package persist

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sliceSource serves recorded records, max at a time, then blocks until ctx
// is done (a live WAL with nothing new). onNext runs before each call.
type sliceSource struct {
	mu     sync.Mutex
	recs   []Record
	pos    int
	calls  int
	onNext func(call int)
}

func (s *sliceSource) Next(ctx context.Context, max int) ([]Record, error) {
	s.mu.Lock()
	s.calls++
	call, hook := s.calls, s.onNext
	s.mu.Unlock()
	if hook != nil {
		hook(call)
	}
	s.mu.Lock()
	if s.pos >= len(s.recs) {
		s.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	n := min(max, len(s.recs)-s.pos)
	out := s.recs[s.pos : s.pos+n]
	s.pos += n
	s.mu.Unlock()
	return out, nil
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestRunRetriesAndConverges: the first connections are refused, one commit
// fails after all rows were written, and every backend is terminated mid-run;
// Run retries the same records until they commit and the tables converge to
// exactly the stream, with nothing doubled.
func TestRunRetriesAndConverges(t *testing.T) {
	db, _ := migratedDB(t)
	const users = 10
	r := newRecorder(t)
	r.randomStream(2, 1500, users)

	cfg := db.poolConfig()
	var connects atomic.Int32
	cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error {
		if connects.Add(1) <= 3 {
			return errors.New("injected: connection refused")
		}
		return nil
	}
	pool := openPool(t, cfg)
	sink := NewSink(pool, Options{MaxBatch: 100, Logger: quietLogger(), MinBackoff: 2 * time.Millisecond,
		MaxBackoff: 20 * time.Millisecond})
	var commits atomic.Int32
	sink.beforeCommit = func(context.Context, pgx.Tx) error {
		if commits.Add(1) == 3 {
			return errors.New("injected: commit lost")
		}
		return nil
	}
	src := &sliceSource{recs: r.recs, onNext: func(call int) {
		if call == 6 || call == 11 {
			db.terminateBackends(t)
		}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sink.Run(ctx, src) }()
	deadline := time.Now().Add(20 * time.Second)
	for sink.PersistedSeqCached() != r.lastSeq() {
		if time.Now().After(deadline) {
			t.Fatalf("Run did not converge: %+v", sink.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
	st := sink.Stats()
	if st.Retries < 4 || st.LastError == "" || st.Records != uint64(len(r.recs)) || st.Batches < 15 {
		t.Fatalf("stats %+v", st)
	}
	checkAgainstProcessor(t, db.pool(t), r, users)
	t.Logf("stats %+v", st)
}

// TestRunWithPostgresDown: with nothing listening, Run keeps retrying the
// same batch (never taking the next one), records the error, and returns
// promptly when its context ends.
func TestRunWithPostgresDown(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	pool := openPool(t, cfg)
	r := crossingScenario(t)
	src := &sliceSource{recs: r.recs}
	sink := NewSink(pool, Options{MaxBatch: 4, Logger: quietLogger(), MinBackoff: time.Millisecond,
		MaxBackoff: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sink.Run(ctx, src) }()
	deadline := time.Now().Add(10 * time.Second)
	for sink.Stats().Retries < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no retries: %+v", sink.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	cancelRun(t, cancel, done, "Run did not stop after cancel")
	st := sink.Stats()
	if src.calls != 1 || st.Batches != 0 || st.LastError == "" || st.PersistedSeq != 0 {
		t.Fatalf("calls %d, stats %+v", src.calls, st)
	}
}

// TestRunStopsOnGap: a Source opened beyond persisted_seq+1 is a permanent
// error, not an endless retry.
func TestRunStopsOnGap(t *testing.T) {
	_, pool := migratedDB(t)
	r := crossingScenario(t)
	sink := NewSink(pool, Options{Logger: quietLogger()})
	err := sink.Run(context.Background(), &sliceSource{recs: r.recs[3:]})
	if !errors.Is(err, ErrSeqGap) {
		t.Fatalf("Run returned %v", err)
	}
}

// trickleSource makes one record available every `every`, as a WAL
// follower does under a steady load: Next returns all that are available
// (up to max), blocking until there is one.
type trickleSource struct {
	recs  []Record
	start time.Time
	every time.Duration
	pos   int
}

func (s *trickleSource) Next(ctx context.Context, max int) ([]Record, error) {
	for {
		avail := min(len(s.recs), int(time.Since(s.start)/s.every))
		if avail > s.pos {
			n := min(max, avail-s.pos)
			out := s.recs[s.pos : s.pos+n]
			s.pos += n
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// TestRunLingers: records trickling in are written in batches at most one
// per Linger once the sink has caught up (instead of one tiny batch per
// write), all of them, and with Linger < 0 in many more batches.
func TestRunLingers(t *testing.T) {
	_, pool := migratedDB(t)
	r := newRecorder(t)
	r.httpLikeStream(400, 8) // 416 records, one per ms: ~0.42 s
	run := func(linger time.Duration) Stats {
		resetTables(t, pool)
		sink := NewSink(pool, Options{Logger: quietLogger(), Linger: linger})
		src := &trickleSource{recs: r.recs, start: time.Now(), every: time.Millisecond}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- sink.Run(ctx, src) }()
		deadline := time.Now().Add(20 * time.Second)
		for sink.PersistedSeqCached() != r.lastSeq() {
			if time.Now().After(deadline) {
				t.Fatalf("linger %v: Run did not finish: %+v", linger, sink.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v", err)
		}
		checkLedgerSums(t, pool, r, 8)
		return sink.Stats()
	}
	st := run(100 * time.Millisecond)
	// ~0.42 s of records: a batch at most every 100 ms after the first
	// (which may be tiny), however slow this machine is.
	if st.Records != uint64(len(r.recs)) || st.Batches > 7 {
		t.Fatalf("linger 100ms: %d batches for %d records (%+v)", st.Batches, st.Records, st)
	}
	if st0 := run(-1); st0.Batches <= st.Batches {
		t.Fatalf("no linger: %d batches, with linger %d", st0.Batches, st.Batches)
	}
}

// TestRunLingerEndsWithCtx: a cancel while Run lingers after a short batch
// ends it at once, not when Linger has passed (shutdown must not wait).
func TestRunLingerEndsWithCtx(t *testing.T) {
	_, pool := migratedDB(t)
	r := newRecorder(t)
	r.httpLikeStream(4, 8)
	resetTables(t, pool)
	sink := NewSink(pool, Options{Logger: quietLogger(), Linger: time.Minute})
	src := &trickleSource{recs: r.recs, start: time.Now().Add(-time.Hour), every: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sink.Run(ctx, src) }()
	for deadline := time.Now().Add(20 * time.Second); sink.PersistedSeqCached() != r.lastSeq(); {
		if time.Now().After(deadline) {
			t.Fatalf("the short batch was never written: %+v", sink.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancelRun(t, cancel, done, "Run kept lingering after its context ended")
}

// cancelRun cancels a Run and requires it to return context.Canceled within
// 5 s; stuck says what it means if it does not.
func cancelRun(t *testing.T, cancel context.CancelFunc, done <-chan error, stuck string) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(stuck)
	}
}
