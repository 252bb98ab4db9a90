package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/replication/natstest"
)

// ReplicationConfig configures `bench replication`: the pipeline scenario
// with the local WAL alone and with sync replication (every group commit
// also stored by a JetStream stream of Nodes replicas before it is
// acknowledged), alternating in the same run, on a NATS cluster started in
// this process on 127.0.0.1.
type ReplicationConfig struct {
	Commands  int // per run, >= 1
	Producers int
	Rounds    int // alternating local / sync rounds (closed loop, then half load); 3 if 0
	Nodes     int // NATS nodes and stream replicas; 3 if 0
	Seed      uint64
	Workload  Options
	Logger    *slog.Logger
}

// ReplicationResult is the report (medians over the rounds).
type ReplicationResult struct {
	Nodes      int     `json:"nodes"`
	Commands   int     `json:"commands"`
	LocalRate  float64 `json:"local_cmds_per_sec"` // closed loop, local WAL only
	SyncRate   float64 `json:"sync_cmds_per_sec"`  // closed loop, sync replication
	RateRatio  float64 `json:"sync_over_local"`    // target >= 0.5
	HalfRate   float64 `json:"half_load_cmds_per_sec"`
	LocalP50us float64 `json:"local_half_ack_p50_us"` // open loop at HalfRate
	LocalP99us float64 `json:"local_half_ack_p99_us"`
	SyncP50us  float64 `json:"sync_half_ack_p50_us"`
	SyncP99us  float64 `json:"sync_half_ack_p99_us"`
	P99DeltaUs float64 `json:"sync_minus_local_p99_us"` // target <= 2000
	// The process's CPU (pipeline, NATS nodes, producers) per command,
	// closed loop: on a saturated 2-core machine the rate ratio is about
	// the inverse ratio of these.
	LocalCPUus float64 `json:"local_cpu_us_per_cmd"`
	SyncCPUus  float64 `json:"sync_cpu_us_per_cmd"`
	// A closed-loop sync run with a standby (its own pipeline, in this
	// process) following the log: its rate, the standby's largest lag
	// (commands acknowledged by the primary, not yet durable on the
	// standby) and its catch-up after the last ack.
	StandbyRunRate   float64 `json:"standby_run_cmds_per_sec"`
	StandbyLagMax    float64 `json:"standby_lag_max_cmds"`
	StandbyCatchUpMs float64 `json:"standby_catch_up_ms"`
}

// RunReplication runs the scenario.
func RunReplication(cfg ReplicationConfig) (ReplicationResult, error) {
	if cfg.Rounds == 0 {
		cfg.Rounds = 3
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tmp, err := os.MkdirTemp("", "ubs-bench-replication-")
	if err != nil {
		return ReplicationResult{}, err
	}
	defer os.RemoveAll(tmp)
	cluster, err := natstest.Run(cfg.Nodes, filepath.Join(tmp, "nats"))
	if err != nil {
		return ReplicationResult{}, err
	}
	defer cluster.Shutdown()
	r := &replRun{cfg: cfg, tmp: tmp, url: cluster.URL()}
	var local, sync, localHalf, syncHalf []PipelineResult
	var localCPU, syncCPU []float64
	for i := 0; i < cfg.Rounds; i++ {
		l, err := r.pipeline(0, false, false)
		if err != nil {
			return ReplicationResult{}, err
		}
		localCPU = append(localCPU, r.cpuUs)
		s, err := r.pipeline(0, true, false)
		if err != nil {
			return ReplicationResult{}, err
		}
		syncCPU = append(syncCPU, r.cpuUs)
		local, sync = append(local, l), append(sync, s)
	}
	res := ReplicationResult{Nodes: cfg.Nodes, Commands: cfg.Commands,
		LocalRate: median(rates(local)), SyncRate: median(rates(sync)),
		LocalCPUus: median(localCPU), SyncCPUus: median(syncCPU)}
	res.RateRatio = res.SyncRate / res.LocalRate
	sb, err := r.pipeline(0, true, true)
	if err != nil {
		return ReplicationResult{}, err
	}
	res.StandbyRunRate, res.StandbyLagMax, res.StandbyCatchUpMs = sb.CmdsPerSec, r.lagMax, r.catchUpMs
	res.HalfRate = res.LocalRate / 2
	for i := 0; i < cfg.Rounds; i++ {
		l, err := r.pipeline(res.HalfRate, false, false)
		if err != nil {
			return ReplicationResult{}, err
		}
		s, err := r.pipeline(res.HalfRate, true, false)
		if err != nil {
			return ReplicationResult{}, err
		}
		localHalf, syncHalf = append(localHalf, l), append(syncHalf, s)
	}
	pick := func(rs []PipelineResult, f func(PipelineResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return median(v)
	}
	res.LocalP50us = pick(localHalf, func(r PipelineResult) float64 { return r.AckP50us })
	res.LocalP99us = pick(localHalf, func(r PipelineResult) float64 { return r.AckP99us })
	res.SyncP50us = pick(syncHalf, func(r PipelineResult) float64 { return r.AckP50us })
	res.SyncP99us = pick(syncHalf, func(r PipelineResult) float64 { return r.AckP99us })
	res.P99DeltaUs = res.SyncP99us - res.LocalP99us
	return res, nil
}

func rates(rs []PipelineResult) []float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = r.CmdsPerSec
	}
	return v
}

// replRun is one RunReplication's state.
type replRun struct {
	cfg       ReplicationConfig
	tmp, url  string
	n         int     // runs so far (names the data dirs and streams)
	lagMax    float64 // the last run's standby lag
	catchUpMs float64
	cpuUs     float64 // the last run's process CPU per command
}

// pipeline runs the pipeline scenario once at rate (0: closed loop), with
// sync replication if sync, and a standby following it if standby.
func (r *replRun) pipeline(rate float64, sync, standby bool) (res PipelineResult, err error) {
	cpu0, _ := sampleCPU(os.Getpid())
	defer func() {
		if cpu1, cerr := sampleCPU(os.Getpid()); cerr == nil && cpu0 != nil && err == nil {
			r.cpuUs = float64(cpu1.self-cpu0.self) * 1e6 / userHZ / float64(r.cfg.Commands)
		}
	}()
	r.n++
	dir := filepath.Join(r.tmp, fmt.Sprintf("run%d", r.n))
	defer os.RemoveAll(dir)
	pc := PipelineConfig{Dir: filepath.Join(dir, "primary"), Commands: r.cfg.Commands, Producers: r.cfg.Producers,
		Seed: r.cfg.Seed, Workload: r.cfg.Workload, Rate: rate, Logger: r.cfg.Logger}
	if !sync {
		return RunPipeline(pc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := fmt.Sprintf("UBS_BENCH_%d", r.n)
	open := func(node string) (*replication.Log, error) {
		return replication.Open(ctx, replication.Config{URL: r.url, Stream: stream, Subject: "ubs.bench." + stream,
			Replicas: r.cfg.Nodes, Node: node, Logger: r.cfg.Logger})
	}
	defer r.deleteStream(stream)
	primary, err := open("primary")
	if err != nil {
		return PipelineResult{}, err
	}
	defer primary.Close()
	if err := primary.Claim(ctx, 0, 0, 1); err != nil {
		return PipelineResult{}, err
	}
	pc.Journal.Replicator = primary
	if !standby {
		return RunPipeline(pc)
	}
	// The standby: its own pipeline following the log.
	sbLog, err := open("standby")
	if err != nil {
		return PipelineResult{}, err
	}
	defer sbLog.Close()
	spl, err := journal.Start(journal.Config{Dir: filepath.Join(dir, "standby"), Standby: true, Logger: r.cfg.Logger})
	if err != nil {
		return PipelineResult{}, err
	}
	defer spl.Close()
	sb := replication.NewStandby(sbLog, spl)
	runErr := make(chan error, 1)
	go func() { runErr <- sb.Run(ctx) }()
	var acked atomic.Uint64
	var lagMax float64
	pc.ProgressEvery = 10 * time.Millisecond
	pc.Progress = func(a core.Seq) {
		acked.Store(uint64(a))
		if lag := float64(a) - float64(spl.DurableSeq()); lag > lagMax {
			lagMax = lag
		}
	}
	res, err = RunPipeline(pc)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	for spl.DurableSeq() < res.LastSeq {
		select {
		case err := <-runErr:
			return res, fmt.Errorf("standby stopped at %d of %d: %w", spl.DurableSeq(), res.LastSeq, err)
		case <-time.After(time.Millisecond):
		}
		if time.Since(t0) > time.Minute {
			return res, errors.New("the standby did not catch up within a minute")
		}
	}
	r.lagMax, r.catchUpMs = lagMax, float64(time.Since(t0).Microseconds())/1000
	return res, nil
}

func (r *replRun) deleteStream(name string) {
	nc, err := nats.Connect(r.url)
	if err != nil {
		return
	}
	defer nc.Close()
	if js, err := jetstream.New(nc); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, name)
	}
}
