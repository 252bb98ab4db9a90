package persist

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// TestFollow: the sink migrates a new database (migrated set), adopts the
// WAL's id and follows the WAL to its durable seq; a sink of another WAL
// (another wal.id) on that database writes nothing and returns.
func TestFollow(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool := newTestDB(t).pool(t)
	pl, err := journal.Start(journal.Config{Dir: t.TempDir(), ReadView: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	r := journal.NewReply()
	submit := func(c core.Command) {
		t.Helper()
		if _, err := pl.Submit(&c, r); err != nil || pl.Wait(r) != nil || r.Result().Code != core.OK {
			t.Fatalf("%v: %v %v", c.Kind, err, r.Result().Code)
		}
	}
	submit(core.Command{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 6})
	key := func(s string) core.Key { k, _ := core.KeyFrom(s); return k }
	submit(core.Command{Kind: core.KindAdjust, User: 1, Asset: 1, Amount: 1_000, Key: key("f1")})

	ours, theirs := strings.Repeat("a", 32), strings.Repeat("b", 32)
	sink := NewSink(pool, Options{Logger: log})
	var migrated atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { sink.Follow(ctx, pl, ours, &migrated) })
	caughtUp := func() bool {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if migrated.Load() && sink.PersistedSeqCached() == pl.DurableSeq() {
				return true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return false
	}
	if !caughtUp() {
		t.Fatalf("not caught up: migrated %v, persisted %d, durable %d", migrated.Load(), sink.PersistedSeqCached(), pl.DurableSeq())
	}
	submit(core.Command{Kind: core.KindAdjust, User: 2, Asset: 1, Amount: 2_000, Key: key("f2")})
	if !caughtUp() {
		t.Fatalf("a later command not followed: persisted %d, durable %d", sink.PersistedSeqCached(), pl.DurableSeq())
	}
	cancel()
	wg.Wait()
	var dbWAL string
	if err := pool.QueryRow(context.Background(), `SELECT wal_id FROM core_checkpoint WHERE id = 1`).Scan(&dbWAL); err != nil || dbWAL != ours {
		t.Fatalf("database's wal_id %q (%v), want %q", dbWAL, err, ours)
	}

	// Another WAL's sink: refused, returns on its own, writes nothing.
	submit(core.Command{Kind: core.KindAdjust, User: 3, Asset: 1, Amount: 3_000, Key: key("f3")})
	other := NewSink(pool, Options{Logger: log})
	before := sink.PersistedSeqCached()
	done := make(chan struct{})
	go func() { other.Follow(context.Background(), pl, theirs, &migrated); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("a sink of another WAL kept running")
	}
	if got, err := other.PersistedSeq(context.Background()); err != nil || got != before {
		t.Fatalf("persisted seq %d (%v) after a foreign sink, want %d", got, err, before)
	}
}
