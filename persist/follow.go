package persist

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/logging"
)

// The sink as a follower of the server's WAL (docs/design.md, "Followers of the WAL"): migrate, check
// that the database belongs to this WAL, follow it from the persisted seq.

// followerSource adapts a journal.Follower to Source.
type followerSource struct {
	f    *journal.Follower
	recs []Record
}

func (s *followerSource) Next(ctx context.Context, max int) ([]Record, error) {
	frs, err := s.f.Next(ctx, max)
	if err != nil {
		return nil, err
	}
	s.recs = s.recs[:0]
	for _, r := range frs {
		s.recs = append(s.recs, Record{Cmd: *r.Cmd, Events: r.Events})
	}
	return s.recs, nil
}

// Follow keeps the Postgres read model following pl's WAL until ctx ends:
// migrate, read the persisted seq, follow the WAL from the next one, and
// start over (with backoff) after anything that stops it. Postgres being
// away never blocks the core: the follower reads the WAL on its own.
// migrated is set once the migrations are applied (the Postgres features
// are initialised); walID is the data dir's (LoadOrCreateWALID): a database
// another WAL's sink filled is never written.
func (sink *Sink) Follow(ctx context.Context, pl *journal.Pipeline, walID string, migrated *atomic.Bool) {
	pool, log := sink.pool, sink.log
	backoff := 100 * time.Millisecond
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
			backoff = min(2*backoff, 5*time.Second)
			return true
		}
	}
	for ctx.Err() == nil {
		if err := Migrate(ctx, pool); err != nil {
			log.Warn("sink: migrations not applied yet; retrying", "err", err)
			if !pause() {
				return
			}
			continue
		}
		if !migrated.Swap(true) {
			log.Info("sink: migrations applied; the Postgres features are initialised (ready)")
		}
		persisted, err := sink.PersistedSeq(ctx)
		if err != nil {
			log.Warn("sink: cannot read the persisted seq; retrying", "err", err)
			if !pause() {
				return
			}
			continue
		}
		if d := pl.DurableSeq(); persisted > d {
			// The sink only ever writes durable seqs of its own WAL, so a
			// checkpoint past this WAL's end means the database was written
			// from another data dir (or acknowledged WAL entries were lost).
			// Its rows are another history: following from persisted+1
			// would upsert this WAL's orders over them. Write nothing.
			logging.Critical(ctx, log, "sink: the database is ahead of this WAL (written from another data dir?); the sink writes nothing to it",
				"persisted_seq", persisted, "durable_seq", d)
			return
		}
		// The database records the data dir it follows: adopted by the
		// first sink (a new database, or one from before wal_id existed,
		// not past this WAL's end as checked above), refused by every other.
		var dbWAL *string
		if err := pool.QueryRow(ctx, `UPDATE core_checkpoint SET wal_id = COALESCE(wal_id, $1) WHERE id = 1 RETURNING wal_id`,
			walID).Scan(&dbWAL); err != nil {
			log.Warn("sink: cannot read the database's WAL id; retrying", "err", err)
			if !pause() {
				return
			}
			continue
		}
		if dbWAL == nil || *dbWAL != walID {
			other := "NULL"
			if dbWAL != nil {
				other = *dbWAL
			}
			logging.Critical(ctx, log, "sink: the database belongs to another data dir's WAL; the sink writes nothing to it",
				"database_wal_id", other, "wal_id", walID)
			return
		}
		// Rows past the checkpoint (which the sink would write again: the
		// ledger has no unique key) cannot exist: core_checkpoint refuses to
		// move back over them (migration 0008).
		f, err := pl.NewFollower(persisted + 1)
		var gone *journal.HistoryGoneError
		if errors.As(err, &gone) {
			// The database is behind what the WAL still holds (e.g. wiped
			// after the WAL front was truncated): rows before Earliest can
			// no longer be derived. Say so loudly and continue from there.
			logging.Critical(context.Background(), log, "sink: events before the earliest retained seq cannot be re-derived; the gap is recorded in sink_gaps",
				"persisted_seq", persisted, "earliest", gone.Earliest)
			if err := RecordGap(ctx, pool, persisted+1, gone.Earliest-1,
				"the WAL was released past the sink's checkpoint (--follower-max-retained) or truncated"); err != nil {
				log.Warn("sink: cannot move the checkpoint; retrying", "err", err)
				if !pause() {
					return
				}
				continue
			}
			f, err = pl.NewFollower(gone.Earliest)
		}
		if err != nil {
			log.Error("sink: cannot follow the WAL; retrying", "from", persisted+1, "err", err)
			if !pause() {
				return
			}
			continue
		}
		log.Info("sink: following the WAL", "from_seq", f.NextSeq())
		backoff = 100 * time.Millisecond
		err = sink.Run(ctx, &followerSource{f: f})
		if ctx.Err() != nil || errors.Is(err, journal.ErrStopped) {
			return
		}
		log.Error("sink: stopped; restarting", "err", err)
		if !pause() {
			return
		}
	}
}
