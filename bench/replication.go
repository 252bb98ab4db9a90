package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
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
	// Procs runs the NATS nodes as nats-server processes (natstest.RunProcs;
	// a real deployment's shape: their own runtimes, their own GC) instead
	// of servers inside this process. Their CPU is counted in the CPU per
	// command.
	Procs    bool
	Seed     uint64
	Workload Options
	Logger   *slog.Logger
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
	P99DeltaUs float64 `json:"sync_minus_local_p99_us"` // at HalfRate; see OwnHalfRate
	// The same comparison at half of sync's own maximum (OwnHalfRate =
	// SyncRate/2), local-only and sync at that one rate, alternating: the
	// half load of the system measured. HalfRate (half of local-only's
	// maximum) is 0.5/RateRatio of sync's maximum — 87-100 % of it at the
	// ratios measured here, where any queue's p99 grows without bound — so
	// the target (sync's ack p99 at half load <= 2 ms above local-only's)
	// is judged here: with sync at exactly the throughput target (0.5x
	// local) HalfRate would be sync's whole capacity and no pipeline could
	// meet both targets.
	OwnHalfRate       float64 `json:"own_half_load_cmds_per_sec"`
	OwnHalfLocalP50us float64 `json:"own_half_local_ack_p50_us"`
	OwnHalfLocalP99us float64 `json:"own_half_local_ack_p99_us"`
	OwnHalfSyncP50us  float64 `json:"own_half_sync_ack_p50_us"`
	OwnHalfSyncP99us  float64 `json:"own_half_sync_ack_p99_us"`
	OwnHalfP99DeltaUs float64 `json:"own_half_sync_minus_local_p99_us"` // target <= 2000
	// The median of each round's own difference at OwnHalfRate.
	OwnHalfP99DeltaPairedUs float64 `json:"own_half_sync_minus_local_p99_paired_us"`
	// The floor the log service sets: the sync runs at OwnHalfRate sent
	// FloorRecordRate records/s of FloorRecordBytes (compressed bodies, mean);
	// the same stream alone — records of that size at that rate through a
	// replication.Log, no pipeline beside it — stores them in these times
	// (append to stored, µs; medians over the rounds). Sync's ack cannot be
	// faster than its log's store.
	FloorRecordRate  float64 `json:"floor_records_per_sec"`
	FloorRecordBytes float64 `json:"floor_record_bytes"`
	FloorStoreP50us  float64 `json:"floor_store_p50_us"`
	FloorStoreP99us  float64 `json:"floor_store_p99_us"`
	// The same half-load runs with the log's connection left on whichever
	// node the client picked (replication.Config.AnyNode: the behaviour
	// before the connection moved to the stream's leader), alternating
	// with the others in the same rounds.
	// The median over the rounds of each round's own difference (its sync
	// run beside its local run, adjacent in time): less moved by a machine
	// whose load changes between rounds than the difference of medians.
	P99DeltaPairedUs  float64 `json:"sync_minus_local_p99_paired_us"`
	AnyNodeP99us      float64 `json:"sync_any_node_half_ack_p99_us"`
	AnyNodeP99DeltaUs float64 `json:"sync_any_node_minus_local_p99_us"`
	// Where the time goes at half load (sync, medians over the rounds):
	// an append's time from the journaler's send to the replication stage
	// learning it is stored, the replication stage's wait for the log after
	// the local fsync (what sync adds to an ack), and the journaler's group
	// commit (send + local write + fsync).
	StoreP50us     float64 `json:"sync_half_store_p50_us"`
	StoreP99us     float64 `json:"sync_half_store_p99_us"`
	LogWaitP50us   float64 `json:"sync_half_log_wait_p50_us"`
	LogWaitP99us   float64 `json:"sync_half_log_wait_p99_us"`
	GroupCommitP50 float64 `json:"sync_half_group_commit_p50_us"`
	GroupCommitP99 float64 `json:"sync_half_group_commit_p99_us"`
	InFlightP99    float64 `json:"sync_half_in_flight_p99"` // appends sent, not yet known stored, at each append
	Procs          bool    `json:"nats_processes"`
	LoadAvg        string  `json:"loadavg,omitempty"` // /proc/loadavg at the end
	// The process's CPU (pipeline, NATS nodes, producers) per command,
	// closed loop: on a saturated 2-core machine the rate ratio is about
	// the inverse ratio of these.
	LocalCPUus float64 `json:"local_cpu_us_per_cmd"`
	SyncCPUus  float64 `json:"sync_cpu_us_per_cmd"`
	// Of SyncCPUus, the NATS processes' part (Procs only; 0 in process):
	// what a deployment spends on other hosts. On this host the half load
	// (LocalRate/2) asks HalfRate x SyncCPUus of the CPUs: near sync's
	// own capacity when the nodes share them.
	SyncNATSCPUus float64 `json:"sync_nats_cpu_us_per_cmd"`
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
	run := natstest.Run
	if cfg.Procs {
		run = natstest.RunProcs
	}
	cluster, err := run(cfg.Nodes, filepath.Join(tmp, "nats"))
	if err != nil {
		return ReplicationResult{}, err
	}
	defer cluster.Shutdown()
	r := &replRun{cfg: cfg, tmp: tmp, url: cluster.URL(), pids: cluster.PIDs()}
	var local, sync, localHalf, syncHalf []PipelineResult
	var localCPU, syncCPU, natsCPU []float64
	for i := 0; i < cfg.Rounds; i++ {
		l, err := r.pipeline(0, false, false, false)
		if err != nil {
			return ReplicationResult{}, err
		}
		localCPU = append(localCPU, r.cpuUs)
		s, err := r.pipeline(0, true, false, false)
		if err != nil {
			return ReplicationResult{}, err
		}
		syncCPU, natsCPU = append(syncCPU, r.cpuUs), append(natsCPU, r.natsCPUus)
		local, sync = append(local, l), append(sync, s)
	}
	res := ReplicationResult{Nodes: cfg.Nodes, Commands: cfg.Commands, Procs: cfg.Procs,
		LocalRate: median(rates(local)), SyncRate: median(rates(sync)),
		LocalCPUus: median(localCPU), SyncCPUus: median(syncCPU), SyncNATSCPUus: median(natsCPU)}
	res.RateRatio = res.SyncRate / res.LocalRate
	sb, err := r.pipeline(0, true, true, false)
	if err != nil {
		return ReplicationResult{}, err
	}
	res.StandbyRunRate, res.StandbyLagMax, res.StandbyCatchUpMs = sb.CmdsPerSec, r.lagMax, r.catchUpMs
	res.HalfRate = res.LocalRate / 2
	var anyHalf []PipelineResult
	var times []replTimes
	for i := 0; i < cfg.Rounds; i++ {
		l, s, err := r.pair(res.HalfRate)
		if err != nil {
			return ReplicationResult{}, err
		}
		times = append(times, r.times)
		a, err := r.pipeline(res.HalfRate, true, false, true)
		if err != nil {
			return ReplicationResult{}, err
		}
		localHalf, syncHalf, anyHalf = append(localHalf, l), append(syncHalf, s), append(anyHalf, a)
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
	res.AnyNodeP99us = pick(anyHalf, func(r PipelineResult) float64 { return r.AckP99us })
	res.AnyNodeP99DeltaUs = res.AnyNodeP99us - res.LocalP99us
	res.P99DeltaPairedUs = pairedP99Delta(syncHalf, localHalf)
	res.OwnHalfRate = res.SyncRate / 2
	var ownLocal, ownSync []PipelineResult
	var floorRate, floorSize, floorP50, floorP99 []float64
	for i := 0; i < cfg.Rounds; i++ {
		l, s, err := r.pair(res.OwnHalfRate)
		if err != nil {
			return ReplicationResult{}, err
		}
		ownLocal, ownSync = append(ownLocal, l), append(ownSync, s)
		secs := float64(s.Commands) / s.CmdsPerSec
		recRate, size := float64(r.records)/secs, float64(r.bytes)/float64(max(r.records, 1))
		// Twice the sync run's records (about twice its length), at least 100.
		store, err := r.logAlone(recRate, int(size), max(100, 2*int(r.records)))
		if err != nil {
			return ReplicationResult{}, err
		}
		floorRate, floorSize = append(floorRate, recRate), append(floorSize, size)
		floorP50, floorP99 = append(floorP50, quantile(store, 50)), append(floorP99, quantile(store, 99))
	}
	res.FloorRecordRate, res.FloorRecordBytes = math.Round(median(floorRate)), math.Round(median(floorSize))
	res.FloorStoreP50us, res.FloorStoreP99us = median(floorP50), median(floorP99)
	res.OwnHalfLocalP50us = pick(ownLocal, func(r PipelineResult) float64 { return r.AckP50us })
	res.OwnHalfLocalP99us = pick(ownLocal, func(r PipelineResult) float64 { return r.AckP99us })
	res.OwnHalfSyncP50us = pick(ownSync, func(r PipelineResult) float64 { return r.AckP50us })
	res.OwnHalfSyncP99us = pick(ownSync, func(r PipelineResult) float64 { return r.AckP99us })
	res.OwnHalfP99DeltaUs = res.OwnHalfSyncP99us - res.OwnHalfLocalP99us
	res.OwnHalfP99DeltaPairedUs = pairedP99Delta(ownSync, ownLocal)
	tpick := func(f func(replTimes) float64) float64 {
		v := make([]float64, len(times))
		for i, t := range times {
			v[i] = f(t)
		}
		return math.Round(median(v))
	}
	res.StoreP50us = tpick(func(t replTimes) float64 { return quantile(t.store, 50) })
	res.StoreP99us = tpick(func(t replTimes) float64 { return quantile(t.store, 99) })
	res.LogWaitP50us = tpick(func(t replTimes) float64 { return quantile(t.wait, 50) })
	res.LogWaitP99us = tpick(func(t replTimes) float64 { return quantile(t.wait, 99) })
	res.GroupCommitP50 = tpick(func(t replTimes) float64 { return quantile(t.commit, 50) })
	res.GroupCommitP99 = tpick(func(t replTimes) float64 { return quantile(t.commit, 99) })
	res.InFlightP99 = tpick(func(t replTimes) float64 { return quantile(t.inFlight, 99) })
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.LoadAvg = strings.TrimSpace(string(b))
	}
	return res, nil
}

// pair runs the pipeline at rate with the local WAL alone, then with sync
// replication: one round's two runs, adjacent in time.
func (r *replRun) pair(rate float64) (local, sync PipelineResult, err error) {
	if local, err = r.pipeline(rate, false, false, false); err != nil {
		return local, sync, err
	}
	sync, err = r.pipeline(rate, true, false, false)
	return local, sync, err
}

// pairedP99Delta is the median over the rounds of each round's sync p99
// minus its local p99 (µs).
func pairedP99Delta(sync, local []PipelineResult) float64 {
	d := make([]float64, len(sync))
	for i := range sync {
		d[i] = sync[i].AckP99us - local[i].AckP99us
	}
	return math.Round(median(d))
}

func rates(rs []PipelineResult) []float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = r.CmdsPerSec
	}
	return v
}

// quantile is the q-th percentile of v (0 if empty); it sorts v.
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[min(len(v)-1, int(float64(len(v))*q/100))]
}

// replTimes are one sync run's timings, in µs (see ReplicationResult).
type replTimes struct {
	store, wait, commit, inFlight []float64
}

// timedLog is the Replicator of a measured run: the Log, timing its
// appends (journaler) and waits (replication stage).
type timedLog struct {
	*replication.Log
	mu      sync.Mutex
	pending []timedAppend // appended, not yet seen stored, in order
	times   replTimes
}

type timedAppend struct {
	last core.Seq
	at   time.Time
}

func (t *timedLog) Append(first core.Seq, cmds [][]byte) error {
	t.mu.Lock()
	t.pending = append(t.pending, timedAppend{first + core.Seq(len(cmds)) - 1, time.Now()})
	t.times.inFlight = append(t.times.inFlight, float64(len(t.pending)))
	t.mu.Unlock()
	return t.Log.Append(first, cmds)
}

func (t *timedLog) WaitStored(ctx context.Context, seq core.Seq) error {
	t0 := time.Now()
	err := t.Log.WaitStored(ctx, seq)
	now := time.Now()
	t.mu.Lock()
	t.times.wait = append(t.times.wait, float64(now.Sub(t0).Microseconds()))
	n := 0
	for n < len(t.pending) && t.pending[n].last <= seq {
		t.times.store = append(t.times.store, float64(now.Sub(t.pending[n].at).Microseconds()))
		n++
	}
	t.pending = t.pending[n:]
	t.mu.Unlock()
	return err
}

// replRun is one RunReplication's state.
type replRun struct {
	cfg       ReplicationConfig
	tmp, url  string
	pids      []int     // the NATS nodes' processes (Procs)
	times     replTimes // the last sync run's
	n         int       // runs so far (names the data dirs and streams)
	lagMax    float64   // the last run's standby lag
	catchUpMs float64
	cpuUs     float64 // the last run's process CPU per command
	records   uint64  // the last sync run's records appended, and their bytes
	bytes     uint64
	natsCPUus float64 // the NATS processes' part of it
}

// pipeline runs the pipeline scenario once at rate (0: closed loop), with
// sync replication if sync (its Log on any node if anyNode), and a standby
// following it if standby.
func (r *replRun) pipeline(rate float64, sync, standby, anyNode bool) (res PipelineResult, err error) {
	cpu0, _ := sampleCPU(os.Getpid())
	nats0 := procsCPU(r.pids)
	defer func() {
		if cpu1, cerr := sampleCPU(os.Getpid()); cerr == nil && cpu0 != nil && err == nil {
			nats := procsCPU(r.pids) - nats0
			per := func(ticks int64) float64 { return float64(ticks) * 1e6 / userHZ / float64(r.cfg.Commands) }
			r.cpuUs, r.natsCPUus = per(cpu1.self-cpu0.self+nats), per(nats)
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
			Replicas: r.cfg.Nodes, Node: node, Logger: r.cfg.Logger, AnyNode: anyNode})
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
	tl := &timedLog{Log: primary}
	pc.Journal.Replicator = tl
	if !standby {
		pc.Journal.OnJournalBatch = func(_ int, d time.Duration) {
			tl.times.commit = append(tl.times.commit, float64(d.Microseconds())) // journaler goroutine only
		}
		res, err = RunPipeline(pc)
		r.times = tl.times
		r.records, r.bytes = primary.Sent()
		return res, err
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

// logAlone appends n records of size bytes (one incompressible command
// each) at rate records/s to a fresh stream through a replication.Log, with
// no pipeline beside it, and returns their store times (append to stored,
// µs): the floor the log service itself sets under sync's acks at that
// record rate.
func (r *replRun) logAlone(rate float64, size, n int) ([]float64, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.n++
	stream := fmt.Sprintf("UBS_BENCH_%d", r.n)
	defer r.deleteStream(stream)
	l, err := replication.Open(ctx, replication.Config{URL: r.url, Stream: stream, Subject: "ubs.bench." + stream,
		Replicas: r.cfg.Nodes, Node: "floor", Logger: r.cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	if err := l.Claim(ctx, 0, 0, 1); err != nil {
		return nil, err
	}
	body := make([]byte, max(size, 1))
	rng := rand.NewChaCha8([32]byte{byte(r.cfg.Seed)})
	_, _ = rng.Read(body)
	type sentAt struct {
		seq core.Seq
		at  time.Time
	}
	ch := make(chan sentAt, n)
	store := make([]float64, 0, n)
	done := make(chan error, 1)
	go func() {
		for s := range ch {
			if err := l.WaitStored(ctx, s.seq); err != nil {
				done <- err
				return
			}
			store = append(store, float64(time.Since(s.at).Microseconds()))
		}
		done <- nil
	}()
	every := time.Duration(float64(time.Second) / rate)
	t0 := time.Now()
	for i := 1; i <= n; i++ {
		if d := time.Until(t0.Add(time.Duration(i-1) * every)); d > 0 {
			time.Sleep(d)
		}
		at := time.Now()
		if err := l.Append(core.Seq(i), [][]byte{body}); err != nil {
			close(ch)
			return nil, errors.Join(err, <-done)
		}
		ch <- sentAt{core.Seq(i), at}
	}
	close(ch)
	if err := <-done; err != nil {
		return nil, err
	}
	return store, nil
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
