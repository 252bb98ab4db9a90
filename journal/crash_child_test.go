//go:build unix

package journal

// The child half of TestCrashRecovery (crash_test.go): the test binary
// re-executed with -test.run=^TestCrashChild$ runs the journaling pipeline
// on a data dir under a deterministic multi-producer workload until it is
// SIGKILLed, printing "acked <seq>" only after the pipeline acknowledged seq.
// The workload is a pure function of (seed, seq), so the parent can rebuild
// and check every command without talking to the child.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

// Environment of a child process (set by the parent only).
const (
	crashEnvDir  = "UBS_CRASH_CHILD_DIR"
	crashEnvSeed = "UBS_CRASH_CHILD_SEED"
	crashEnvMode = "UBS_CRASH_CHILD_MODE" // "keep" (no WAL truncation), "truncate" or "poison-race"
)

// Pipeline shape of the child: frequent snapshots, small segments, so that
// kills land inside snapshot writes, segment rotations and front truncations.
const (
	crashSnapshotEvery = 700
	crashSegmentSize   = 64 << 10
	crashRingSize      = 4096
	crashMaxBatch      = 256
	crashProducers     = 3
	crashChildLifetime = 90 * time.Second // a child the parent forgot still dies
)

// crashPoison says whether the workload contains poison commands: in both
// modes, now that a poison rebuild starts from the pipeline's in-memory base
// snapshot instead of racing the snapshot writer's prune and the WAL front
// truncation (TestCrashPoisonRebuildRace pins that bug down).
func crashPoison(bool) bool { return true }

// crashCoreConfig lets the workload contain poison commands (KindDebugPanic).
var crashCoreConfig = core.Config{AllowDebugPanic: true}

// crashPipelineConfig is the child's pipeline configuration; the parent
// recovers with the same Dir, SegmentSize and Core.
func crashPipelineConfig(dir string, truncate bool, log *slog.Logger) Config {
	cfg := Config{
		Dir:           dir,
		RingSize:      crashRingSize,
		MaxBatch:      crashMaxBatch,
		SnapshotEvery: crashSnapshotEvery,
		KeepSnapshots: 2,
		SegmentSize:   crashSegmentSize,
		Core:          crashCoreConfig,
		Logger:        log,
		Now:           func() int64 { return 0 }, // hashes must not depend on the clock
	}
	if !truncate {
		cfg.TruncateLimit = keepAll
	}
	return cfg
}

// TestCrashChild is not a test on its own: it is the process that
// TestCrashRecovery starts and kills.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnvDir)
	if dir == "" {
		t.Skip("helper process of TestCrashRecovery; runs only when re-executed by it")
	}
	seed, err := strconv.ParseUint(os.Getenv(crashEnvSeed), 10, 64)
	if err != nil {
		crashChildExit(os.Stdout, 2, "bad seed: %v", err)
	}
	if os.Getenv(crashEnvMode) == "poison-race" {
		crashPoisonRaceChild(dir)
	}
	crashChildMain(dir, seed, os.Getenv(crashEnvMode))
}

// crashChildExit reports a failure the parent will show, and exits.
func crashChildExit(w io.Writer, code int, format string, args ...any) {
	fmt.Fprintf(w, "error "+format+"\n", args...)
	if f, ok := w.(interface{ Flush() error }); ok {
		_ = f.Flush()
	}
	os.Exit(code)
}

// crashWatchdog makes sure a child never outlives its parent (which may
// itself have been killed) nor crashChildLifetime.
func crashWatchdog() {
	ppid := os.Getppid()
	go func() {
		deadline := time.Now().Add(crashChildLifetime)
		for os.Getppid() == ppid && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		os.Exit(3)
	}()
}

func crashChildMain(dir string, seed uint64, mode string) {
	crashWatchdog()

	var mu sync.Mutex // guards out
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	var line []byte // OnAck only (never called concurrently)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := crashPipelineConfig(dir, mode != "keep", log)
	poison := crashPoison(mode == "truncate")
	fill := func(seq core.Seq, c *core.Command) { crashCommand(seed, poison, seq, c) }
	cfg.OnAck = func(s *Slot) {
		// Called only once s.Cmd is durable: the line is written after the ack.
		line = strconv.AppendUint(append(line[:0], "acked "...), uint64(s.Cmd.Seq), 10)
		line = append(line, '\n')
		mu.Lock()
		_, _ = out.Write(line)
		mu.Unlock()
	}
	fail := func(code int, format string, args ...any) {
		mu.Lock()
		crashChildExit(out, code, format, args...)
	}

	fmt.Fprintln(os.Stdout, "recovering") // unbuffered: the parent learns the kill phase
	pl, err := Start(cfg)
	if err != nil {
		fail(2, "start: %v", err)
	}
	mu.Lock()
	fmt.Fprintf(out, "start %d\n", pl.AckedSeq())
	_ = out.Flush()
	mu.Unlock()

	for p := 0; p < crashProducers; p++ {
		go func() {
			rng := crashRand{s: seed ^ uint64(p+1)*0x9e3779b97f4a7c15}
			for {
				if _, err := pl.SubmitFunc(1+rng.intn(8), fill); err != nil {
					fail(5, "submit: %v (pipeline err %v)", err, pl.Err())
				}
			}
		}()
	}
	tick := time.NewTicker(2 * time.Millisecond)
	for {
		select {
		case <-tick.C:
			mu.Lock()
			err := out.Flush()
			mu.Unlock()
			if err != nil {
				os.Exit(6) // the parent is gone
			}
		case <-pl.Dead():
			fail(7, "pipeline stopped: %v", pl.Err())
		}
	}
}

// crashRand is splitmix64: a tiny deterministic generator, so that the
// command at seq is a pure function of (seed, seq).
type crashRand struct{ s uint64 }

func (r *crashRand) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *crashRand) intn(n int) int { return int(r.next() % uint64(n)) }

func crashRandAt(seed uint64, seq core.Seq) crashRand {
	r := crashRand{s: seed}
	r.s ^= r.next() + uint64(seq)*0xd6e8feb86659fd93
	r.next()
	return r
}

// Workload shape.
const (
	crashUsers    = 24
	crashAssets   = 3
	crashSetupEnd = core.Seq(5 + crashUsers*crashAssets) // last seq of the fixed prologue
	crashLookback = 400                                  // cancels, refunds, repeats refer this far back
)

func crashKey(prefix byte, seq core.Seq) core.Key {
	k, _ := core.KeyFrom(string(prefix) + strconv.FormatUint(uint64(seq), 10))
	return k
}

// crashMarket returns the configuration and mid price of markets 1 and 2.
func crashMarket(m core.MarketID) (core.MarketCfg, core.Price, core.Price) {
	if m == 1 { // BTC(8)/USDT(6) around 50,000 USDT, levels 1 USDT apart
		return core.MarketCfg{Base: 1, Quote: 2, BaseScale: 8, Tick: 10_000, Lot: 10_000, MinQty: 10_000,
			MaxQty: 100_000_000_000, MakerFee: 1000, TakerFee: 2000}, 50_000_000_000, 1_000_000
	}
	// ETH(8)/USDT(6) around 100 USDT, levels 0.1 USDT apart
	return core.MarketCfg{Base: 3, Quote: 2, BaseScale: 8, Tick: 1_000, Lot: 100_000, MinQty: 100_000,
		MaxQty: 1_000_000_000_000, MakerFee: 0, TakerFee: 500}, 100_000_000, 100_000
}

// crashCommand writes the command of seq into c (overwriting it): a
// prologue configuring assets, markets and funding users, then a random mix
// of crossing orders, cancels and modifies of earlier orders, transfers,
// refunds, idempotent repeats, status changes, halts, ticks, snapshot
// requests, poison commands and invalid commands of many kinds.
func crashCommand(seed uint64, poison bool, seq core.Seq, c *core.Command) {
	crashCommandRef(seed, poison, seq, c, true)
}

// crashCommandRef is crashCommand; with resolve false, commands that refer
// to an earlier seq are left with only their Kind set (to bound recursion).
func crashCommandRef(seed uint64, poison bool, seq core.Seq, c *core.Command, resolve bool) {
	*c = core.Command{}
	switch {
	case seq == 0:
		return
	case seq <= 3:
		c.Kind, c.Asset, c.BaseScale = core.KindConfigAsset, core.AssetID(seq), [...]uint8{8, 6, 8}[seq-1]
		return
	case seq <= 5:
		c.Kind, c.Market = core.KindConfigMarket, core.MarketID(seq-3)
		c.Cfg, _, _ = crashMarket(c.Market)
		return
	case seq <= crashSetupEnd:
		i := int(seq - 6)
		c.Kind, c.User, c.Asset = core.KindSpotDeposit, core.UserID(1+i/crashAssets), core.AssetID(1+i%crashAssets)
		c.Amount = [...]core.Units{10_000_000_000, 10_000_000_000_000, 1_000_000_000_000}[c.Asset-1]
		c.Key = crashKey('s', seq)
		return
	}
	r := crashRandAt(seed, seq)
	user := func() core.UserID {
		switch r.intn(50) {
		case 0:
			return core.FeeUser
		case 1:
			return core.UserID(1000 + r.intn(5)) // no account yet, or a small one
		}
		return core.UserID(1 + r.intn(crashUsers))
	}
	back := func() core.Seq {
		d := core.Seq(1 + r.intn(crashLookback))
		if seq-d <= crashSetupEnd {
			return 0
		}
		return seq - d
	}
	switch x := r.intn(1000); {
	case x < 6: // a sweep: an IOC through the whole opposite side keeps the books small
		c.Kind, c.Type, c.TIF, c.User = core.KindPlaceOrder, core.Limit, core.IOC, core.UserID(1+r.intn(crashUsers))
		c.Market = core.MarketID(1 + r.intn(2))
		cfg, mid, step := crashMarket(c.Market)
		c.Side, c.Price, c.Qty = core.Buy, mid+11*step, cfg.Lot*5000
		if r.intn(2) == 0 {
			c.Side, c.Price = core.Sell, mid-11*step
		}
	case x < 450: // limit orders around the mid: many cross and partially fill
		crashOrder(&r, seq, c)
		c.User = user()
	case x < 500: // market orders
		c.Kind, c.Type, c.User = core.KindPlaceOrder, core.Market, user()
		c.Market = core.MarketID(1 + r.intn(2))
		cfg, _, _ := crashMarket(c.Market)
		c.Side = core.Side(1 + r.intn(2))
		if c.Side == core.Buy && r.intn(2) == 0 {
			c.QuoteQty = core.Units(1 + r.intn(500_000_000))
		} else {
			c.Qty = cfg.Lot * core.Units(1+r.intn(30))
		}
	case x < 660: // cancel an earlier order (by client id, as its owner) or a guessed id
		c.Kind = core.KindCancelOrder
		if !resolve {
			return
		}
		var p core.Command
		if s := back(); s != 0 {
			crashCommandRef(seed, poison, s, &p, false)
		}
		if p.Kind == core.KindPlaceOrder && !p.Key.IsZero() && r.intn(10) != 0 {
			c.User, c.Key = p.User, p.Key
			if r.intn(2) == 0 {
				c.Market = p.Market
			}
		} else {
			c.User, c.OrderID = user(), core.OrderID(1+r.intn(int(seq)/2+1))
		}
	case x < 700: // modify an earlier order
		c.Kind = core.KindModifyOrder
		if !resolve {
			return
		}
		var p core.Command
		if s := back(); s != 0 {
			crashCommandRef(seed, poison, s, &p, false)
		}
		if p.Kind != core.KindPlaceOrder || p.Key.IsZero() {
			c.User, c.OrderID, c.Qty = user(), core.OrderID(1+r.intn(int(seq)/2+1)), 10_000
			return
		}
		cfg, mid, step := crashMarket(p.Market)
		c.User, c.Key, c.Market = p.User, p.Key, p.Market
		if r.intn(2) == 0 {
			c.Price = mid + step*core.Price(r.intn(21)-10)
		}
		if r.intn(2) == 0 || c.Price == 0 {
			c.Qty = cfg.Lot * core.Units(1+r.intn(40))
		}
	case x < 800: // deposits, and repeats of earlier ones (idempotent or conflicting)
		c.Kind = core.KindSpotDeposit
		if s, again := back(), r.intn(5) == 0; s != 0 && again {
			if !resolve {
				return // perhaps a repeat itself: not repeated in turn
			}
			var p core.Command
			crashCommandRef(seed, poison, s, &p, false)
			if p.Kind == core.KindSpotDeposit && !p.Key.IsZero() {
				*c = p
				if r.intn(3) == 0 {
					c.Amount++ // REQ_ID_CONFLICT
				}
				return
			}
		}
		c.User, c.Asset, c.Key = user(), core.AssetID(1+r.intn(crashAssets+1)), crashKey('d', seq)
		c.Amount = core.Units(1 + r.intn(1_000_000_000))
	case x < 880: // withdrawals, some larger than the balance
		c.Kind, c.User, c.Asset, c.Key = core.KindSpotWithdraw, user(), core.AssetID(1+r.intn(crashAssets)), crashKey('w', seq)
		c.Amount = core.Units(1 + r.intn(3_000_000_000))
	case x < 900: // refunds of earlier withdrawals (some of which failed)
		c.Kind = core.KindSpotRefund
		if !resolve {
			return
		}
		var p core.Command
		if s := back(); s != 0 {
			crashCommandRef(seed, poison, s, &p, false)
		}
		if p.Kind == core.KindSpotWithdraw {
			c.User, c.Asset, c.Amount, c.Key = p.User, p.Asset, p.Amount, p.Key
		} else {
			c.User, c.Asset, c.Amount, c.Key = user(), 1, 1, crashKey('w', seq)
		}
	case x < 930: // operator adjustments, both signs
		c.Kind, c.User, c.Asset, c.Key = core.KindAdjust, user(), core.AssetID(1+r.intn(crashAssets)), crashKey('a', seq)
		c.Amount = core.Units(r.intn(200_000_000) - 100_000_000)
		if c.Amount == 0 {
			c.Amount = 1
		}
	case x < 945:
		c.Kind, c.User = core.KindSetAccountStatus, user()
		if r.intn(8) == 0 {
			c.Status = core.Frozen
		}
	case x < 946:
		c.Kind, c.Market = core.KindHaltMarket, core.MarketID(1+r.intn(2))
	case x < 965:
		c.Kind, c.Market = core.KindResumeMarket, core.MarketID(1+r.intn(3))
	case x < 980:
		c.Kind, c.Flags = core.KindTick, core.TickFullCheck
	case x < 983:
		c.Kind = core.KindSnapshot
	case x < 984:
		// Poison, rejected whole live and on every replay; rare, because
		// Recover replays from its base again for every new poison found.
		c.Kind, c.User = core.KindDebugPanic, core.UserID(1+r.intn(crashUsers))
		if r.intn(10) != 0 || !poison {
			c.Kind, c.User = core.KindTick, 0
		}
	default: // invalid orders of many shapes
		crashOrder(&r, seq, c)
		c.User = core.UserID(1 + r.intn(crashUsers))
		switch r.intn(7) {
		case 0:
			c.Price++
		case 1:
			c.Qty = 0
		case 2:
			c.Market = 9
		case 3:
			c.Side = 3
		case 4:
			c.TIF = 9
		case 5:
			c.STP = 5
		case 6:
			c.Qty = 1 << 60
		}
	}
}

// crashOrder fills a limit order around a market's mid price.
func crashOrder(r *crashRand, seq core.Seq, c *core.Command) {
	c.Kind, c.Type = core.KindPlaceOrder, core.Limit
	c.Market = core.MarketID(1 + r.intn(2))
	cfg, mid, step := crashMarket(c.Market)
	c.Side = core.Side(1 + r.intn(2))
	c.Price = mid + step*core.Price(r.intn(21)-10)
	c.Qty = cfg.Lot * core.Units(1+r.intn(50))
	switch t := r.intn(20); {
	case t < 16:
		c.TIF = core.GTC
	case t < 18:
		c.TIF = core.IOC
	case t < 19:
		c.TIF = core.FOK
	default:
		c.TIF = core.PostOnly
	}
	c.STP = core.STP(r.intn(2))
	if r.intn(10) < 7 {
		c.Key = crashKey('o', seq)
	}
}

// crashPoisonRaceChild is the child of TestCrashPoisonRebuildRace. It makes
// the snapshot writer's work (write a newer snapshot, prune the older ones)
// happen at one precise moment of a poison rebuild: after the rebuild listed
// the snapshots and before it loads the one it chose. A damaged snapshot
// file is the hook: the rebuild logs a warning when it skips it, and the
// logging handler does the writer's work right then. It prints "ok" if the
// pipeline survives the poison command.
func crashPoisonRaceChild(dir string) {
	crashWatchdog()
	var (
		pl    *Pipeline
		armed atomic.Bool
		snap  []byte // the state at seq crashRaceNewSnap
	)
	hook := func(msg string) {
		if msg == "journal: skipping damaged snapshot" && armed.CompareAndSwap(true, false) {
			if err := pl.snaps.Write(uint64(crashRaceNewSnap), snap); err != nil {
				crashChildExit(os.Stdout, 2, "hook: %v", err)
			}
			if _, err := pl.snaps.Prune(1); err != nil {
				crashChildExit(os.Stdout, 2, "hook: %v", err)
			}
		}
	}
	log := slog.New(crashHookHandler{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), hook})
	cfg := crashPipelineConfig(dir, true, log)
	cfg.KeepSnapshots, cfg.SnapshotEvery = 1, 1<<40
	var err error
	if pl, err = Start(cfg); err != nil {
		crashChildExit(os.Stdout, 2, "start: %v", err)
	}
	ref := core.New(crashCoreConfig)
	r := NewReply()
	submit := func(c core.Command) core.Event {
		if _, err := pl.Submit(&c, r); err != nil {
			crashChildExit(os.Stdout, 2, "submit: %v", err)
		}
		if err := pl.Wait(r); err != nil {
			crashChildExit(os.Stdout, 2, "wait: %v", err)
		}
		return r.Result()
	}
	var c core.Command
	for seq := core.Seq(1); seq < crashRacePoison; seq++ {
		crashCommand(0, false, seq, &c)
		if seq == crashRaceOldSnap {
			c = core.Command{Kind: core.KindSnapshot}
		}
		submit(c)
		c.Seq = seq
		ref.Apply(&c)
		if seq == crashRaceNewSnap {
			snap = ref.AppendSnapshot(nil)
		}
	}
	// Wait (bounded) for the snapshot writer to store the snapshot at
	// crashRaceOldSnap: the state follower's, which a race build on a
	// loaded machine reaches in seconds (10 s was once too short).
	old := pl.snaps.path(uint64(crashRaceOldSnap))
	for deadline := time.Now().Add(crashStartWait); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(old); err == nil {
			break
		}
		if time.Now().After(deadline) {
			crashChildExit(os.Stdout, 2, "snapshot %d was never written", crashRaceOldSnap)
		}
	}
	damaged := pl.snaps.path(uint64(crashRaceOldSnap) + 2)
	if err := os.WriteFile(damaged, []byte("not a snapshot"), 0o640); err != nil {
		crashChildExit(os.Stdout, 2, "%v", err)
	}
	armed.Store(true)
	poison := core.Command{Kind: core.KindDebugPanic, User: 1}
	if res := submit(poison); res.Code != core.CodePoisonCommand {
		crashChildExit(os.Stdout, 2, "poison result %v", res.Code)
	}
	poison.Seq = crashRacePoison
	ref.Discard(&poison, core.Rollback{})
	if err := pl.Close(); err != nil {
		crashChildExit(os.Stdout, 2, "close: %v", err)
	}
	if got, want := pl.Processor().StateHash(), ref.StateHash(); got != want {
		crashChildExit(os.Stdout, 2, "state after the poison rebuild %s, want %s", got, want)
	}
	// The hook may not have run: a rebuild that does not list the snapshot
	// directory cannot race with the writer this way.
	fmt.Println("ok")
	os.Exit(0)
}

// Seqs of the poison-race scenario (all inside the deposit prologue of crashCommand).
const (
	crashRaceOldSnap = core.Seq(40)
	crashRaceNewSnap = core.Seq(60)
	crashRacePoison  = core.Seq(70)
)

// crashHookHandler calls hook with every message before handling it.
type crashHookHandler struct {
	slog.Handler
	hook func(msg string)
}

func (h crashHookHandler) Handle(ctx context.Context, r slog.Record) error {
	h.hook(r.Message)
	return h.Handler.Handle(ctx, r)
}
