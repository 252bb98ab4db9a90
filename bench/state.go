package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// The state scenario (issue 39): spec 003 transfers executed through the
// real pipeline (journal, processor, read view, state follower with its
// snapshots) with a short retention, to show that memory and snapshots
// follow what the core retains, not what it ever made. The command clock is
// simulated: it advances 1 µs per submitted batch (StateBatch commands,
// stamped together), so the retention is in command time: R µs retain about
// R x StateBatch commands' worth of finished transfers.

// StateConfig configures RunState.
type StateConfig struct {
	Dir        string
	Transfers  int           // transfers to execute, >= 1
	Users      int           // spec 003 users, >= 2
	Retention  time.Duration // in command time (1 µs per batch of StateBatch commands)
	Every      int           // report every this many transfers
	Snapshot   uint64        // commands between snapshots (the state follower)
	Logger     *slog.Logger
	Progress   func(StatePoint)
	ReadView   bool // keep the read view, as the exchange does
	NoSync     bool
	TickEvery  int // transfers between ticks (<= core.MaxP2PExecPerTick)
	ForgetEvry int // transfers between forgets
}

// StatePoint is one report of the run.
type StatePoint struct {
	Transfers   int           // executed so far (submitted and acknowledged)
	Retained    int           // transfers the core holds
	Made        uint64        // transfers ever made
	RSSBytes    int64         // resident memory of the process
	HeapBytes   uint64        // Go heap in use after a GC
	SnapBytes   int64         // the last snapshot's size
	Snapshots   uint64        // written so far
	SnapWrite   time.Duration // the last snapshot's write
	SnapSer     time.Duration // the last snapshot's serialization (on the state follower)
	CmdsPerSec  float64       // since the previous point
	MaxApplyNow time.Duration // the processor's longest pause so far
}

// StateBatch is the commands per SubmitFunc claim of the state scenario.
const StateBatch = 1024

// RunState runs the scenario and returns one point per cfg.Every transfers.
func RunState(cfg StateConfig) ([]StatePoint, error) {
	if cfg.Transfers < 1 || cfg.Users < 2 || cfg.Every < 1 || cfg.Dir == "" {
		return nil, errors.New("bench: state: transfers, users (>= 2), every and dir are required")
	}
	if cfg.TickEvery <= 0 {
		cfg.TickEvery = 10_000
	}
	if cfg.ForgetEvry <= 0 {
		cfg.ForgetEvry = 9_973 // prime: never on a tick's position
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var clock atomic.Int64
	jc := journal.Config{Dir: cfg.Dir, SnapshotEvery: cfg.Snapshot, ReadView: true, NoSync: cfg.NoSync, Logger: cfg.Logger,
		MeasureApply: true, TruncateLimit: func() core.Seq { return core.Seq(1 << 62) },
		Now: func() int64 { return DefaultTime + clock.Add(1)*1_000 }}
	pl, err := journal.Start(jc)
	if err != nil {
		return nil, err
	}
	defer pl.Close()
	const usd core.AssetID = 1
	users := cfg.Users
	setup := 1 + users
	// Every seq after setup is a function of its position: a tick every
	// TickEvery transfers, a forget every ForgetEvry, else a transfer.
	period := cfg.TickEvery + 1
	fill := func(seq core.Seq, c *core.Command) {
		s := int(seq)
		switch {
		case s == 1:
			*c = core.Command{Kind: core.KindConfigAsset, Asset: usd, BaseScale: 2}
		case s <= setup:
			u := s - 1
			*c = core.Command{Kind: core.KindP2PCreateUser, User: core.UserID(u), Text: "user" + strconv.Itoa(u), Asset: usd, Amount: 1 << 40}
		default:
			k := s - setup
			switch {
			case k%period == 0:
				*c = core.Command{Kind: core.KindP2PTick}
			case k%(cfg.ForgetEvry+1) == 0:
				now := DefaultTime + clock.Load()*1_000
				*c = core.Command{Kind: core.KindP2PForget, Price: core.Price(max(1, now-int64(cfg.Retention)))}
			default:
				from := 1 + (k*7919)%users
				to := 1 + (k*104729+1)%users
				if to == from {
					to = 1 + from%users
				}
				*c = core.Command{Kind: core.KindP2PTransfer, User: core.UserID(from), OrderID: core.OrderID(to), Asset: usd, Amount: 1}
			}
		}
	}
	// transfers among the first k commands after setup
	xfersIn := func(k int) int { return k - k/period - k/(cfg.ForgetEvry+1) }
	var points []StatePoint
	submitted, last := 0, time.Now()
	lastSeq := core.Seq(0)
	for target := cfg.Every; ; target += cfg.Every {
		target = min(target, cfg.Transfers)
		for xfersIn(submitted-setup) < target || submitted < setup {
			n := min(StateBatch, setup+target*2-submitted)
			if submitted < setup {
				n = min(n, setup-submitted)
			}
			if _, err := pl.SubmitFunc(n, fill); err != nil {
				return points, err
			}
			submitted += n
		}
		seq := core.Seq(submitted)
		for pl.AckedSeq() < seq {
			time.Sleep(2 * time.Millisecond)
		}
		var st core.P2PStats
		if err := pl.Read(func(p *core.Processor) error { st = p.P2PStats(); return nil }); err != nil {
			return points, err
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		ss := pl.StateStats()
		now := time.Now()
		pt := StatePoint{Transfers: int(st.Made), Retained: st.Transfers, Made: st.Made, RSSBytes: rss(),
			HeapBytes: ms.HeapInuse, SnapBytes: ss.LastBytes, Snapshots: ss.Snapshots, SnapWrite: ss.LastWrite,
			SnapSer: ss.LastSerialize, CmdsPerSec: float64(seq-lastSeq) / now.Sub(last).Seconds(), MaxApplyNow: pl.MaxApply()}
		last, lastSeq = now, seq
		points = append(points, pt)
		if cfg.Progress != nil {
			cfg.Progress(pt)
		}
		if target >= cfg.Transfers {
			return points, nil
		}
	}
}

// rss is the process's resident memory (Linux; 0 elsewhere).
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n << 10
		}
	}
	return 0
}

// String is one line of the report.
func (p StatePoint) String() string {
	return fmt.Sprintf("transfers %9d  retained %8d  made %9d  rss_mb %7.1f  heap_mb %7.1f  snapshot_kb %8.1f (#%d, serialize %v, write %v)  cmds_per_sec %8.0f  max_apply %v",
		p.Transfers, p.Retained, p.Made, float64(p.RSSBytes)/(1<<20), float64(p.HeapBytes)/(1<<20), float64(p.SnapBytes)/1024,
		p.Snapshots, p.SnapSer.Round(time.Microsecond), p.SnapWrite.Round(time.Microsecond), p.CmdsPerSec, p.MaxApplyNow.Round(time.Microsecond))
}
