package persist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ubscore/ubscore/core"
)

// Defaults of Options.
const (
	DefaultMaxBatch       = 8192
	DefaultLinger         = 100 * time.Millisecond
	DefaultMinBackoff     = 50 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultAttemptTimeout = 30 * time.Second
)

// Errors that retrying cannot fix: Run returns them instead of retrying.
var (
	// ErrSeqGap: a batch starts beyond persisted_seq+1, so rows would be
	// missing (the Source was opened at the wrong seq, or the database was
	// reset under a running Sink). Reopen the Source at PersistedSeq()+1.
	ErrSeqGap = errors.New("persist: batch does not follow the persisted seq")
	// ErrBadBatch: the records of a batch are not contiguous in seq.
	ErrBadBatch = errors.New("persist: records not contiguous in seq")
)

// Options configure a Sink; zero fields take the defaults.
type Options struct {
	MaxBatch       int           // records per Source.Next and per transaction (DefaultMaxBatch)
	Linger         time.Duration // after a batch short of MaxBatch, Run waits this long (from the batch's start) before taking the next (DefaultLinger; < 0: no wait)
	Logger         *slog.Logger  // slog.Default() when nil
	MinBackoff     time.Duration // first retry delay (DefaultMinBackoff); doubles per failure
	MaxBackoff     time.Duration // retry delay cap (DefaultMaxBackoff)
	AttemptTimeout time.Duration // bound on one WriteBatch attempt inside Run (DefaultAttemptTimeout)
}

func (o Options) withDefaults() Options {
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(DefaultMaxBackoff, o.MinBackoff)
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	return o
}

// Stats are the Sink's counters since it was created.
type Stats struct {
	PersistedSeq  core.Seq  // last seq known committed (as PersistedSeqCached)
	Batches       uint64    // transactions committed that wrote at least one record
	Records       uint64    // records written (records skipped as already persisted excluded)
	Rows          uint64    // rows written or updated, all tables
	Skipped       uint64    // records skipped because persisted_seq already covered them
	Retries       uint64    // failed WriteBatch attempts that Run retried
	MissingOrders uint64    // order updates that found no orders row (history before the database)
	LastError     string    // the last WriteBatch error, "" if none yet
	LastErrorAt   time.Time // when it happened
}

// Sink writes the core's durable records to Postgres: one transaction per
// batch, the checkpoint (persisted_seq) in the same transaction, so the
// tables always equal the event stream up to persisted_seq. It is idempotent
// by seq: records at or below persisted_seq are skipped.
type Sink struct {
	pool *pgxpool.Pool
	opts Options
	log  *slog.Logger

	mu   sync.Mutex // serializes WriteBatch (guards rows and copy)
	rows batchRows  // scratch, reused
	copy copyBuf    // scratch, reused

	persisted     atomic.Uint64 // core.Seq last seen committed
	batches       atomic.Uint64
	records       atomic.Uint64
	rowsWritten   atomic.Uint64
	skipped       atomic.Uint64
	retries       atomic.Uint64
	missingOrders atomic.Uint64
	errMu         sync.Mutex
	lastErr       string
	lastErrAt     time.Time

	// beforeCommit, when set (tests only), runs just before COMMIT; an error
	// aborts the transaction after every row was written.
	beforeCommit func(ctx context.Context, tx pgx.Tx) error
}

// NewSink returns a Sink writing through pool. The schema must exist (Migrate).
func NewSink(pool *pgxpool.Pool, opts Options) *Sink {
	opts = opts.withDefaults()
	return &Sink{pool: pool, opts: opts, log: opts.Logger}
}

// PersistedSeq reads core_checkpoint: the last seq whose rows are committed
// (0 when nothing is). Open the Source at PersistedSeq()+1.
func (s *Sink) PersistedSeq(ctx context.Context) (core.Seq, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, "SELECT persisted_seq FROM core_checkpoint WHERE id = 1").Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		seq, err = 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("persist: read core_checkpoint: %w", err)
	}
	s.persisted.Store(uint64(seq))
	return core.Seq(seq), nil
}

// PersistedSeqCached is the last persisted seq this Sink saw (after each
// commit, or read by PersistedSeq); it never touches the database.
func (s *Sink) PersistedSeqCached() core.Seq { return core.Seq(s.persisted.Load()) }

// Stats returns a snapshot of the counters.
func (s *Sink) Stats() Stats {
	s.errMu.Lock()
	lastErr, lastAt := s.lastErr, s.lastErrAt
	s.errMu.Unlock()
	return Stats{PersistedSeq: s.PersistedSeqCached(), Batches: s.batches.Load(), Records: s.records.Load(),
		Rows: s.rowsWritten.Load(), Skipped: s.skipped.Load(), Retries: s.retries.Load(),
		MissingOrders: s.missingOrders.Load(), LastError: lastErr, LastErrorAt: lastAt}
}

func (s *Sink) noteError(err error) {
	s.errMu.Lock()
	s.lastErr, s.lastErrAt = err.Error(), time.Now()
	s.errMu.Unlock()
}

// WriteBatch writes recs (contiguous in seq) in one transaction: it locks
// the checkpoint row, skips records at or below persisted_seq, writes the
// rows of the rest and moves persisted_seq to the last record's seq. A
// retried or overlapping batch therefore never doubles a row. On error
// nothing is written and the same records may be passed again.
func (s *Sink) WriteBatch(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := checkContiguous(recs); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.writeBatch(ctx, recs)
	if err != nil {
		s.noteError(err)
	}
	return err
}

func (s *Sink) writeBatch(ctx context.Context, recs []Record) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("persist: begin: %w", err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	var persisted int64
	if err := tx.QueryRow(ctx, "SELECT persisted_seq FROM core_checkpoint WHERE id = 1 FOR UPDATE").
		Scan(&persisted); err != nil {
		return fmt.Errorf("persist: lock core_checkpoint: %w", err)
	}
	first, last := recs[0].Cmd.Seq, recs[len(recs)-1].Cmd.Seq
	if last <= core.Seq(persisted) {
		s.skipped.Add(uint64(len(recs)))
		s.persisted.Store(uint64(persisted))
		return nil // the transaction only read: rolled back by the defer
	}
	if first > core.Seq(persisted)+1 {
		return fmt.Errorf("%w: batch starts at seq %d, persisted_seq is %d", ErrSeqGap, first, persisted)
	}
	skip := int(core.Seq(persisted) + 1 - first)
	todo := recs[skip:]
	s.rows.derive(todo)
	missing, err := writeRows(ctx, tx, &s.rows, &s.copy)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE core_checkpoint SET persisted_seq = $1, updated_at = now() WHERE id = 1",
		int64(last)); err != nil {
		return fmt.Errorf("persist: update core_checkpoint to %d: %w", last, err)
	}
	if s.beforeCommit != nil {
		if err := s.beforeCommit(ctx, tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("persist: commit seqs %d..%d: %w", todo[0].Cmd.Seq, last, err)
	}
	s.persisted.Store(uint64(last))
	s.batches.Add(1)
	s.records.Add(uint64(len(todo)))
	s.skipped.Add(uint64(skip))
	s.rowsWritten.Add(uint64(s.rows.rowCount() - missing))
	if missing > 0 {
		s.missingOrders.Add(uint64(missing))
		s.log.Warn("persist: order updates found no orders row (history before this database?)",
			"count", missing, "first_seq", todo[0].Cmd.Seq, "last_seq", last)
	}
	return nil
}

// checkContiguous requires recs to be in seq order without gaps.
func checkContiguous(recs []Record) error {
	for i := 1; i < len(recs); i++ {
		if recs[i].Cmd.Seq != recs[i-1].Cmd.Seq+1 {
			return fmt.Errorf("%w: seq %d follows %d", ErrBadBatch, recs[i].Cmd.Seq, recs[i-1].Cmd.Seq)
		}
	}
	return nil
}
