package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// Defaults and limits of the pipeline scenario.
const (
	DefaultBatch         = 64
	MaxBatch             = 1 << 14 // a claim must fit the ring with room to spare
	MaxProducers         = 1_024
	DefaultProgressEvery = 100 * time.Millisecond
	DefaultWarmup        = 100_000
	// DefaultTime is the fixed command time: with it the same seed gives the
	// same state hash on every run.
	DefaultTime int64 = 1_700_000_000_000_000_000
)

// PipelineConfig configures the pipeline scenario.
type PipelineConfig struct {
	Dir       string // data dir; must not hold a WAL yet
	Commands  int    // commands to submit, >= 1
	Producers int    // producer goroutines, 1..MaxProducers
	Batch     int    // seqs per SubmitFunc claim; DefaultBatch if 0
	Seed      uint64
	Workload  Options
	Time      int64 // fixed command time (unix ns); DefaultTime if 0
	// Rate, if > 0, paces submission open-loop at this many commands/s in
	// total (each producer at Rate/Producers); 0 = closed loop, as fast as
	// the ring admits. Latency is measured from the claim, and a paced
	// producer that falls behind its schedule submits at once, so latency
	// under overload is understated; run below the measured maximum.
	Rate float64
	// Warmup is how many commands after the workload's setup (funding and
	// seeded books) are excluded from the latency histogram: the first
	// ones run while the heap, the maps and the WAL tail buffers are still
	// growing (page faults on fresh memory are expensive on this VM).
	// Throughput always counts every command. DefaultWarmup if 0; negative
	// = record every command.
	Warmup int
	// Progress, if set, is called with the highest acknowledged seq at least
	// every ProgressEvery while commands are in flight, and once at the end.
	Progress      func(acked core.Seq)
	ProgressEvery time.Duration  // DefaultProgressEvery if 0
	Logger        *slog.Logger   // journal's logger; discards if nil
	Journal       journal.Config // RingSize, MaxBatch, SnapshotEvery, NoSync, ReadView... (Dir, Now, OnAck are set here)
	// Check, with Interval > 0, runs the periodic full invariant check
	// (journal.RunChecker) during the run, as the exchange does
	// (--core-check-interval); CheckOnView needs Journal.ReadView.
	Check journal.CheckerConfig
	// Large, if set, first writes this state into Dir (BuildLargeState,
	// its command times ending before Time) and runs the workload on top
	// of it (Workload.On(ShiftOf(...)): its own assets, markets, users and
	// orders, with ids above the state's): journal.Start recovers the
	// state, so the core and every replica hold it, and every snapshot and
	// check is of it. Building and starting are not measured; the latency
	// and the processor's pauses are measured from the same seq as
	// without it, shifted by the state's last seq.
	Large *LargeState
}

// PipelineResult is the scenario's outcome; its JSON form is the bench's
// one-line report.
type PipelineResult struct {
	Commands   int      `json:"commands"`
	LastSeq    core.Seq `json:"last_seq"`     // highest acknowledged seq
	CmdsPerSec float64  `json:"cmds_per_sec"` // Commands / (first submit .. last ack)
	AckP50us   float64  `json:"ack_p50_us"`   // submit (Slot.Enq) -> ack, per command
	AckP99us   float64  `json:"ack_p99_us"`
	AckP999us  float64  `json:"ack_p999_us"`
	// LatencyFromSeq is the first seq whose latency is in the histogram
	// (after setup and warm-up); 0 = every command. Not in the JSON report,
	// whose keys are fixed.
	LatencyFromSeq core.Seq `json:"-"`
	StateHash      string   `json:"state_hash"` // after Close

	Elapsed   time.Duration `json:"-"`
	AckMaxUs  float64       `json:"-"`
	ClockSkew time.Duration `json:"-"` // uncertainty of the Enq clock calibration
	// Checks is how many periodic full checks ran (Config.Check), and
	// CheckMaxUs the longest one.
	Checks     int     `json:"-"`
	CheckMaxUs float64 `json:"-"`
	// MaxApplyUs is the processor's longest pause: the longest it spent on
	// one command (journal.Config.MeasureApply). Snapshots are the
	// snapshots the state follower wrote, the last one's serialization and
	// write time and size.
	MaxApplyUs float64 `json:"-"`
	// CPUusPerCmd is this process's CPU (every thread: pipeline, replicas,
	// producers) per command over the measured span (Linux; 0 elsewhere):
	// on a saturated machine throughput is about cores / CPU per command.
	CPUusPerCmd     float64 `json:"-"`
	Snapshots       uint64  `json:"-"`
	SnapSerializeMs float64 `json:"-"`
	SnapWriteMs     float64 `json:"-"`
	SnapBytes       int64   `json:"-"`
	// With Config.Large: the state under the workload (its last seq, its
	// snapshot's size, the time to build it) and journal.Start's time on it.
	Large LargeStateBuilt `json:"-"`
	Start time.Duration   `json:"-"`
	// With Config.Large and snapshots on: the state follower's lag behind
	// the last ack when the run ended, the snapshots it had written by
	// then, and how long it then took to catch up (after the measurement;
	// Snapshots and the Snap fields are as of then).
	StateLag       core.Seq      `json:"-"`
	SnapshotsInRun uint64        `json:"-"`
	CatchUp        time.Duration `json:"-"`
}

// stateCatchUpLimit bounds the wait for the state follower after a run on a
// large state.
const stateCatchUpLimit = 5 * time.Minute

// keepWholeWAL forbids WAL front truncation, so `replay verify` can re-derive
// every command from seq 1.
func keepWholeWAL() core.Seq { return 0 }

// RunPipeline starts a journal.Pipeline on cfg.Dir (fsync on unless
// cfg.Journal.NoSync), drives cfg.Commands workload commands into it from
// cfg.Producers goroutines through SubmitFunc, waits until all are
// acknowledged, closes it and reports throughput, ack latency and the final
// state hash.
func RunPipeline(cfg PipelineConfig) (PipelineResult, error) {
	if err := cfg.defaults(); err != nil {
		return PipelineResult{}, err
	}
	w, err := NewWorkload(cfg.Seed, cfg.Workload)
	if err != nil {
		return PipelineResult{}, err
	}
	var large LargeStateBuilt
	if cfg.Large != nil {
		ls := *cfg.Large
		ls.EndTime = cfg.Time
		if large, err = BuildLargeState(cfg.Dir, ls); err != nil {
			return PipelineResult{}, err
		}
		w = w.On(ShiftOf(large))
	}
	base := large.Seq // the workload's seqs are base+1..base+Commands
	lat := newAckLatency(base + core.Seq(cfg.Commands))
	lat.base = base
	if cfg.Warmup > 0 {
		// Never exclude more than half of the steady commands, so a short
		// run still reports latencies.
		steady := max(cfg.Commands-w.SetupLen(), 0)
		lat.from = base + core.Seq(w.SetupLen()+min(cfg.Warmup, steady/2)+1)
	} else if base > 0 {
		lat.from = base + 1
	}
	var calibrating atomic.Bool
	calN := 0 // calibration claims made; calibrating goroutine only
	jc := cfg.Journal
	jc.Dir, jc.Logger, jc.OnAck = cfg.Dir, cfg.Logger, lat.onAck
	jc.MeasureApply, jc.MeasureApplyFrom = true, lat.from // the longest pause of the measured commands, as their latencies
	if jc.TruncateLimit == nil {
		jc.TruncateLimit = keepWholeWAL
	}
	fixed := cfg.Time
	jc.Now = func() int64 {
		if calibrating.Load() {
			lat.cal[calN].t1 = nanotime()
		}
		return fixed
	}
	t1 := time.Now()
	pl, err := journal.Start(jc)
	if err != nil {
		return PipelineResult{}, err
	}
	startTook := time.Since(t1)
	if last := pl.AckedSeq(); last != base {
		_ = pl.Close()
		if base > 0 {
			return PipelineResult{}, fmt.Errorf("bench: %s: recovered seq %d, want the large state's %d", cfg.Dir, last, base)
		}
		return PipelineResult{}, fmt.Errorf("bench: %s already holds a WAL up to seq %d; use an empty data dir", cfg.Dir, last)
	}

	start, cpu0 := time.Now(), procsCPU([]int{os.Getpid()})
	// The first claims run alone, one command each, to calibrate the latency clock.
	calFill := func(seq core.Seq, c *core.Command) {
		lat.cal[calN].t2 = nanotime()
		w.Fill(seq, c)
	}
	first := min(calClaims, cfg.Commands)
	calibrating.Store(true)
	for ; calN < first; calN++ {
		if _, err := pl.SubmitFunc(1, calFill); err != nil {
			_ = pl.Close()
			return PipelineResult{}, err
		}
	}
	calibrating.Store(false)

	var checks int
	var checkMax time.Duration
	stopCheck := func() error { return nil }
	if cfg.Check.Interval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		cc := cfg.Check
		cc.OnCheck = func(d time.Duration, _ core.Seq, _ []core.Violation) { checks, checkMax = checks+1, max(checkMax, d) }
		done := make(chan error, 1)
		go func() { done <- pl.RunChecker(ctx, cc) }()
		stopCheck = func() error { cancel(); return <-done }
	}
	errs := produce(pl, w, cfg, int64(cfg.Commands-first))
	waitErr := waitAcked(pl, lat, cfg)
	elapsed, cpu := time.Since(start), procsCPU([]int{os.Getpid()})-cpu0
	waitErr = errors.Join(waitErr, stopCheck())
	perr := errs()
	st := pl.StateStats()
	// With a large state the state follower may be far behind at the last
	// ack (a full check or a snapshot of it takes a while): how far, and,
	// after the measurement, the time it takes to catch up, so that the
	// snapshots of the run are reported.
	lag, inRun, catchUp := core.Seq(0), st.Snapshots, time.Duration(0)
	if last := pl.AckedSeq(); cfg.Large != nil && !jc.NoSnapshots && waitErr == nil {
		lag = last - min(st.Seq, last)
		t2 := time.Now()
		for st.Seq < last && time.Since(t2) < stateCatchUpLimit && pl.Err() == nil {
			time.Sleep(10 * time.Millisecond)
			st = pl.StateStats()
		}
		catchUp = time.Since(t2)
	}
	cerr := pl.Close()
	if err := errors.Join(waitErr, perr, cerr); err != nil {
		return PipelineResult{}, err
	}
	if cfg.Progress != nil {
		cfg.Progress(pl.AckedSeq())
	}
	skew := time.Duration(lat.bestSpan / 2)
	if lat.negative != 0 {
		cfg.Logger.Warn("bench: negative ack latencies recorded as 0", "count", lat.negative, "skew", skew)
	}
	return PipelineResult{
		Commands:        cfg.Commands,
		LastSeq:         pl.AckedSeq(),
		CmdsPerSec:      math.Round(float64(cfg.Commands) / elapsed.Seconds()),
		AckP50us:        round1(lat.quantileMicros(50)),
		AckP99us:        round1(lat.quantileMicros(99)),
		AckP999us:       round1(lat.quantileMicros(99.9)),
		LatencyFromSeq:  lat.from,
		StateHash:       pl.Processor().StateHash(),
		Elapsed:         elapsed,
		AckMaxUs:        float64(lat.hist.Max()) / 1e3,
		ClockSkew:       skew,
		Checks:          checks,
		CheckMaxUs:      float64(checkMax.Microseconds()),
		MaxApplyUs:      float64(pl.MaxApply().Nanoseconds()) / 1e3,
		CPUusPerCmd:     round1(float64(cpu) / userHZ * 1e6 / float64(cfg.Commands)),
		Snapshots:       st.Snapshots,
		SnapSerializeMs: float64(st.LastSerialize.Microseconds()) / 1e3,
		SnapWriteMs:     float64(st.LastWrite.Microseconds()) / 1e3,
		SnapBytes:       st.LastBytes,
		Large:           large,
		Start:           startTook,
		StateLag:        lag,
		SnapshotsInRun:  inRun,
		CatchUp:         catchUp,
	}, nil
}

func (cfg *PipelineConfig) defaults() error {
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Time == 0 {
		cfg.Time = DefaultTime
	}
	if cfg.Warmup == 0 {
		cfg.Warmup = DefaultWarmup
	}
	if cfg.ProgressEvery == 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case cfg.Dir == "":
		return errors.New("bench: no data dir")
	case cfg.Commands < 1:
		return fmt.Errorf("bench: commands %d < 1", cfg.Commands)
	case cfg.Producers < 1 || cfg.Producers > MaxProducers:
		return fmt.Errorf("bench: producers %d outside 1..%d", cfg.Producers, MaxProducers)
	case cfg.Batch < 1 || cfg.Batch > MaxBatch:
		return fmt.Errorf("bench: batch %d outside 1..%d", cfg.Batch, MaxBatch)
	case cfg.Journal.RingSize != 0 && cfg.Batch > cfg.Journal.RingSize:
		return fmt.Errorf("bench: batch %d larger than the ring (%d)", cfg.Batch, cfg.Journal.RingSize)
	}
	return nil
}

// produce starts cfg.Producers goroutines that claim batches until remaining
// commands are submitted; the returned func waits for them.
func produce(pl *journal.Pipeline, w *Workload, cfg PipelineConfig, remaining int64) func() error {
	var left atomic.Int64
	left.Store(remaining)
	take := func() int {
		for {
			r := left.Load()
			if r <= 0 {
				return 0
			}
			n := min(r, int64(cfg.Batch))
			if left.CompareAndSwap(r, r-n) {
				return int(n)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, cfg.Producers)
	for i := range cfg.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start, sent := time.Now(), 0
			for n := take(); n > 0; n = take() {
				if cfg.Rate > 0 {
					due := start.Add(time.Duration(float64(sent) * float64(time.Second) * float64(cfg.Producers) / cfg.Rate))
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					}
					sent += n
				}
				if _, err := pl.SubmitFunc(n, w.Fill); err != nil {
					errs[i] = fmt.Errorf("bench: producer %d: %w", i, err)
					return
				}
			}
		}()
	}
	return func() error { wg.Wait(); return errors.Join(errs...) }
}

// waitAcked blocks until the last command is acknowledged, reporting
// progress, or fails if the pipeline stops first.
func waitAcked(pl *journal.Pipeline, lat *ackLatency, cfg PipelineConfig) error {
	tick := time.NewTicker(cfg.ProgressEvery)
	defer tick.Stop()
	for {
		select {
		case <-lat.done:
			return nil
		case <-pl.Dead():
			if err := pl.Err(); err != nil {
				return err
			}
			return journal.ErrStopped
		case <-tick.C:
			// A failed pipeline closes Dead only in Close; poll its error too.
			if err := pl.Err(); err != nil {
				return err
			}
			if cfg.Progress != nil {
				cfg.Progress(pl.AckedSeq())
			}
		}
	}
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
