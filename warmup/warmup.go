// Package warmup rebuilds, at start-up, what the HTTP layer keeps in
// memory beside the core and does not journal: the order history
// (gateway.History) and the breakers' log, from the WAL and the recovered
// state, inside journal.Start (journal.Config.WarmUp) beside the copies of the
// replicas.
package warmup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
)

// WholeMax bounds the history warm-up (History's wholeMax): a WAL of at
// most this many commands is replayed whole; a longer one from the
// snapshot the recovery started from (at most SnapshotEvery commands, 0 after a graceful stop,
// which snapshots at its last seq). Issue 39: at a million accounts and
// orders, replaying 2M commands from seq 1 alone took 6 s of a restart.
const WholeMax = 1_000_000

// History rebuilds hist (and the breakers' log brk) from the
// WAL still on disk up to the recovered seq: journal.Config.WarmUp, run
// during journal.Start beside the copies of the replicas. Everything after that
// seq (recovery's own breaker trips) goes through the read view's OnView.
// A standby, which has no archive, knows its history is complete when it
// has every command from seq 1 (gateway.History.FromStart).
//
// A long WAL is replayed from the recovery's snapshot only (WholeMax):
// History's floors then start at the first order and trade it sees, and
// seedResting adds the resting orders. Pages below the floors come from
// the archive (Postgres); a standby sends them to the primary; a primary
// without Postgres lists what History holds, as it does once retention has
// truncated the WAL (docs/api.md, "Order history").
func History(ctx context.Context, pl *journal.Pipeline, hist *gateway.History, brk *gateway.BreakerLog, standby bool,
	wholeMax core.Seq, log *slog.Logger) error {
	rec := pl.Recovery()
	target := rec.Seq
	start := core.Seq(1)
	if target > wholeMax {
		start = rec.SnapshotSeq + 1
	}
	// from is where History's commands begin: start, or the earliest the
	// WAL still derives; target+1 when there is nothing to replay.
	from := start
	var f *journal.Follower
	if start <= target {
		var err error
		f, err = pl.NewFollower(start)
		var gone *journal.HistoryGoneError
		if errors.As(err, &gone) {
			f, err = pl.NewFollower(gone.Earliest)
		}
		if err != nil {
			return fmt.Errorf("history warm-up: %w", err)
		}
		from = f.NextSeq()
	}
	if standby && from == 1 { // every command comes from seq 1: the replay's, then OnView's
		hist.FromStart()
	}
	if from > 1 {
		hist.Skipped(from - 1)
	}
	for f != nil && f.NextSeq() <= target {
		if err := ctx.Err(); err != nil { // SIGTERM during a long warm-up
			return err
		}
		recs, err := f.Next(ctx, int(min(4096, target-f.NextSeq()+1)))
		if err != nil {
			return fmt.Errorf("history warm-up: %w", err)
		}
		for _, r := range recs {
			hist.Apply(r.Cmd, r.Events)
			brk.Replay(r.Cmd, r.Events)
		}
	}
	log.Info("exchange: history rebuilt from the WAL", "from_seq", from, "to_seq", target, "replayed", target+1-from)
	seedResting(pl, hist, log)
	return nil
}

// seedResting adds the orders resting in the recovered state that History
// does not know (History.Seed), at the end of the warm-up: nothing else
// reads or changes the History or the processor then (journal.Config.WarmUp),
// and it runs beside the copies of the replicas (1M orders: 2.3-4.5 s
// there, on a machine that touches new memory slowly; docs/state-at-scale.md).
func seedResting(pl *journal.Pipeline, hist *gateway.History, log *slog.Logger) {
	t := time.Now()
	hist.Seed(pl.Processor())
	log.Info("exchange: history seeded with the resting orders", "live", hist.Stats().LiveOrders, "took", time.Since(t))
}
