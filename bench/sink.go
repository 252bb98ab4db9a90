package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist"
)

// SinkLagTargetMs is the sink's lag target: under 1 s at the full pipeline rate.
const SinkLagTargetMs = 1000

// DefaultSinkTimeout bounds how long the sink scenario waits, after the
// last ack, for the sink to commit the last record.
const DefaultSinkTimeout = 2 * time.Minute

// SinkConfig configures the sink scenario: the pipeline's workload runs
// through the journal (fsync on) while a persist.Sink follows the WAL into
// a throw-away Postgres database, exactly as cmd/exchange wires it (a
// journal.Follower as the Source, Sink.Run with its retries).
type SinkConfig struct {
	AdminURL  string // Postgres server; database ubs_bench_<random> is created and dropped
	Dir       string // data dir for the WAL; must not hold one yet
	Commands  int
	Producers int
	Batch     int // seqs per SubmitFunc claim (DefaultBatch if 0)
	Rate      float64
	Seed      uint64
	Workload  Options
	MaxBatch  int           // the sink's records per transaction (persist.DefaultMaxBatch if 0)
	Timeout   time.Duration // DefaultSinkTimeout if 0
	Logger    *slog.Logger  // journal's and sink's logger; discards if nil
	Journal   journal.Config
}

// SinkResult is the sink scenario's report.
type SinkResult struct {
	Commands    int     `json:"commands"`
	OfferedRate float64 `json:"offered_rate,omitempty"` // commands/s; 0 = closed loop (full pipeline rate)
	// PipelineRate is durable commands/s: first submit .. last ack.
	PipelineRate float64 `json:"pipeline_cmds_per_sec"`
	// The sink's rates: records (= commands), events and rows committed to
	// Postgres per second, over first submit .. last commit.
	RecordsPerSec float64 `json:"sink_records_per_sec"`
	EventsPerSec  float64 `json:"sink_events_per_sec"`
	RowsPerSec    float64 `json:"sink_rows_per_sec"`
	Ratio         float64 `json:"ratio"` // sink records/s ÷ pipeline commands/s (1 = it kept up)
	Events        uint64  `json:"events"`
	Rows          uint64  `json:"rows"`
	Batches       uint64  `json:"batches"` // sink transactions
	// Lag of each record: its Postgres commit minus its ack to the client.
	LagP50ms float64 `json:"lag_p50_ms"`
	LagP99ms float64 `json:"lag_p99_ms"`
	LagMaxms float64 `json:"lag_max_ms"`
	// CatchUpSec is last ack .. last commit: the backlog left when the
	// load stopped.
	CatchUpSec float64 `json:"catch_up_s"`
	// Early counts records the sink committed before their ack was seen
	// (durable and read by the follower before OnAck ran): lag 0.
	Early uint64 `json:"early,omitempty"`
}

// RunSink runs the sink scenario.
func RunSink(cfg SinkConfig) (SinkResult, error) {
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultSinkTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case cfg.AdminURL == "" || cfg.Dir == "":
		return SinkResult{}, errors.New("bench: sink needs a Postgres URL and a data dir")
	case cfg.Commands < 1 || cfg.Producers < 1 || cfg.Producers > MaxProducers || cfg.Batch < 1 || cfg.Batch > MaxBatch || cfg.Rate < 0:
		return SinkResult{}, fmt.Errorf("bench: sink: commands %d, producers %d, batch %d, rate %v out of range",
			cfg.Commands, cfg.Producers, cfg.Batch, cfg.Rate)
	}
	w, err := NewWorkload(cfg.Seed, cfg.Workload)
	if err != nil {
		return SinkResult{}, err
	}
	ctx := context.Background()
	url, drop, err := TempDatabase(ctx, cfg.AdminURL)
	if err != nil {
		return SinkResult{}, err
	}
	defer func() { _ = drop() }()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return SinkResult{}, err
	}
	defer pool.Close()
	if err := persist.Migrate(ctx, pool); err != nil {
		return SinkResult{}, err
	}
	sink := persist.NewSink(pool, persist.Options{MaxBatch: cfg.MaxBatch, Logger: cfg.Logger})

	n := cfg.Commands
	acked := make([]atomic.Int64, n+1) // ack time (nanotime) by seq
	allAcked := make(chan struct{})
	fixed := DefaultTime
	jc := cfg.Journal
	jc.Dir, jc.Logger = cfg.Dir, cfg.Logger
	jc.Now = func() int64 { return fixed }
	jc.TruncateLimit = keepWholeWAL
	jc.OnAck = func(s *journal.Slot) {
		if seq := int(s.Cmd.Seq); seq <= n {
			acked[seq].Store(nanotime())
			if seq == n {
				close(allAcked)
			}
		}
	}
	pl, err := journal.Start(jc)
	if err != nil {
		return SinkResult{}, err
	}
	if last := pl.AckedSeq(); last != 0 {
		_ = pl.Close()
		return SinkResult{}, fmt.Errorf("bench: %s already holds a WAL up to seq %d; use an empty data dir", cfg.Dir, last)
	}
	f, err := pl.NewFollower(1)
	if err != nil {
		_ = pl.Close()
		return SinkResult{}, err
	}
	src := &lagSource{f: f, acked: acked, target: core.Seq(n), hist: hdrhistogram.New(1, latencyMax, latencySigFigs),
		done: make(chan struct{})}
	sctx, stopSink := context.WithCancel(ctx)
	sinkErr := make(chan error, 1)
	go func() { sinkErr <- sink.Run(sctx, src) }()

	start := nanotime()
	errs := produce(pl, w, PipelineConfig{Producers: cfg.Producers, Batch: cfg.Batch, Rate: cfg.Rate}, int64(n))
	var runErr error
	select {
	case <-allAcked:
	case <-pl.Dead():
		runErr = errors.Join(errors.New("bench: pipeline stopped"), pl.Err())
	case err := <-sinkErr:
		runErr = fmt.Errorf("bench: sink stopped: %w", err)
		sinkErr <- err
	}
	lastAck := nanotime()
	if runErr == nil {
		select {
		case <-src.done:
		case err := <-sinkErr:
			runErr = fmt.Errorf("bench: sink stopped: %w", err)
			sinkErr <- err
		case <-time.After(cfg.Timeout):
			runErr = fmt.Errorf("bench: the sink did not catch up within %v of the last ack (persisted seq %d of %d)",
				cfg.Timeout, sink.PersistedSeqCached(), n)
		}
	}
	stopSink()
	if err := <-sinkErr; runErr == nil && err != nil && !errors.Is(err, context.Canceled) {
		runErr = err
	}
	perr := errs()
	cerr := pl.Close()
	if err := errors.Join(runErr, perr, cerr); err != nil {
		return SinkResult{}, err
	}
	st := sink.Stats()
	pipeSec := float64(lastAck-start) / 1e9
	sinkSec := float64(src.lastCommit-start) / 1e9
	res := SinkResult{Commands: n, OfferedRate: cfg.Rate,
		PipelineRate:  math.Round(float64(n) / pipeSec),
		RecordsPerSec: math.Round(float64(st.Records) / sinkSec),
		EventsPerSec:  math.Round(float64(src.events) / sinkSec),
		RowsPerSec:    math.Round(float64(st.Rows) / sinkSec),
		Events:        src.events, Rows: st.Rows, Batches: st.Batches,
		LagP50ms:   round1(float64(src.hist.ValueAtQuantile(50)) / 1e6),
		LagP99ms:   round1(float64(src.hist.ValueAtQuantile(99)) / 1e6),
		LagMaxms:   round1(float64(src.hist.Max()) / 1e6),
		CatchUpSec: math.Round(float64(max(src.lastCommit-lastAck, 0))/1e6) / 1e3,
		Early:      src.early,
	}
	if res.PipelineRate > 0 {
		res.Ratio = math.Round(res.RecordsPerSec/res.PipelineRate*1000) / 1000
	}
	return res, nil
}

// lagSource is persist.Source over a journal.Follower (as cmd/exchange's)
// that also measures lag: Sink.Run asks for the next records only after
// the previous ones committed, so at each Next the previous batch is in
// Postgres and each of its records' lag is now minus its ack time.
type lagSource struct {
	f          *journal.Follower
	recs       []persist.Record
	lo, hi     core.Seq // the batch handed out last (lo > hi: none)
	evs        uint64   // its events
	acked      []atomic.Int64
	target     core.Seq
	hist       *hdrhistogram.Histogram // ns
	events     uint64
	early      uint64
	lastCommit int64
	done       chan struct{} // closed when target is committed
}

func (s *lagSource) Next(ctx context.Context, max int) ([]persist.Record, error) {
	if s.hi >= s.lo && s.hi > 0 {
		now := nanotime()
		for seq := s.lo; seq <= s.hi && int(seq) < len(s.acked); seq++ {
			a := s.acked[seq].Load()
			if a == 0 || a > now {
				s.early++
				a = now
			}
			_ = s.hist.RecordValue(min(max64(now-a, 1), latencyMax))
		}
		s.events += s.evs
		s.lastCommit = now
		if s.hi >= s.target {
			close(s.done)
			s.target = math.MaxUint64
		}
		s.lo, s.hi = 1, 0
	}
	frs, err := s.f.Next(ctx, max)
	if err != nil {
		return nil, err
	}
	s.recs, s.evs = s.recs[:0], 0
	for _, r := range frs {
		s.recs = append(s.recs, persist.Record{Cmd: *r.Cmd, Events: r.Events})
		s.evs += uint64(len(r.Events))
	}
	if len(s.recs) > 0 {
		s.lo, s.hi = s.recs[0].Cmd.Seq, s.recs[len(s.recs)-1].Cmd.Seq
	}
	return s.recs, nil
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
