package journal

// These tests prove spec 004's runtime protection at the journal: recovery
// that degrades instead of dying (§2: a damaged or invariant-breaking
// snapshot falls back to the previous one or the WAL; what is still broken
// after recovery starts HALTED, journaled), a command failing its checks is
// discarded the same way live, on replay and on a follower (§3), the
// periodic full check on a replica trips the breaker through the ring (§6),
// and the follower retention registry.

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/logging"
)

var protCore = core.Config{AllowFaults: true}

func protKey(s string) core.Key { k, _ := core.KeyFrom(s); return k }

// protSetup: two markets (1 and 2, scale 0) and users 1 and 2 funded, and
// resting orders in both markets.
func protSetup() []core.Command {
	cmds := []core.Command{{Kind: core.KindConfigAsset, Asset: 1}, {Kind: core.KindConfigAsset, Asset: 2}}
	for _, m := range []core.MarketID{1, 2} {
		cmds = append(cmds, core.Command{Kind: core.KindConfigMarket, Market: m, Cfg: core.MarketCfg{Base: 1, Quote: 2,
			Tick: 1, Lot: 1, MinQty: 1, MaxQty: 1000, MakerFee: 1000, TakerFee: 2000}})
	}
	for _, u := range []core.UserID{1, 2} {
		cmds = append(cmds,
			core.Command{Kind: core.KindSpotDeposit, User: u, Asset: 1, Amount: 10_000, Key: protKey("b" + string(rune('0'+u)))},
			core.Command{Kind: core.KindSpotDeposit, User: u, Asset: 2, Amount: 1_000_000, Key: protKey("q" + string(rune('0'+u)))})
	}
	for i := 0; i < 20; i++ {
		m := core.MarketID(1 + i%2)
		cmds = append(cmds,
			core.Command{Kind: core.KindPlaceOrder, User: 1, Market: m, Side: core.Sell, Type: core.Limit, TIF: core.GTC,
				Price: core.Price(100 + i), Qty: 3},
			core.Command{Kind: core.KindPlaceOrder, User: 2, Market: m, Side: core.Buy, Type: core.Limit, TIF: core.GTC,
				Price: core.Price(90 - i), Qty: 2})
	}
	return cmds
}

func protStart(t *testing.T, dir string, extra ...func(*Config)) *Pipeline {
	t.Helper()
	cfg := Config{Dir: dir, Logger: quietLog(), SnapshotEvery: 10, KeepSnapshots: 3, TruncateLimit: keepAll,
		Core: protCore, ReadView: true}
	for _, f := range extra {
		f(&cfg)
	}
	pl, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func submit(t *testing.T, pl *Pipeline, c core.Command) core.Event {
	t.Helper()
	r := NewReply()
	if _, err := pl.Submit(&c, r); err != nil {
		t.Fatal(err)
	}
	if err := pl.Wait(r); err != nil {
		t.Fatal(err)
	}
	return r.Result()
}

func marketOf(t *testing.T, pl *Pipeline, id core.MarketID) core.MarketView {
	t.Helper()
	var v core.MarketView
	if err := pl.Read(func(p *core.Processor) error { v, _ = p.Market(id); return nil }); err != nil {
		t.Fatal(err)
	}
	return v
}

// fullReplayHash is the state hash of a replay of the whole WAL of dir.
func fullReplayHash(t *testing.T, dir string) string {
	t.Helper()
	full, err := Recover(RecoverConfig{Dir: dir, Logger: quietLog(), IgnoreSnapshots: true, ReadOnly: true, Core: protCore})
	if err != nil {
		t.Fatal(err)
	}
	full.WAL.Close()
	return full.StateHash
}

// protRun runs the setup in a fresh pipeline and closes it (snapshots
// every 10 commands, the whole WAL kept).
func protRun(t *testing.T) (dir, hash string) {
	dir = t.TempDir()
	pl := protStart(t, dir)
	runAll(t, pl, protSetup())
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, pl.Processor().StateHash()
}

func newestSnapshots(t *testing.T, dir string) []SnapshotInfo {
	t.Helper()
	s, err := OpenSnapshotStore(dir+"/"+SnapshotDir, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	infos, err := s.List()
	if err != nil || len(infos) < 2 {
		t.Fatalf("snapshots %v %v", infos, err)
	}
	return infos
}

// TestSpec2_CorruptSnapshotFallsBack: one flipped byte in the newest
// snapshot: recovery takes the previous one and the WAL after it, logs why,
// and reaches the same state as a replay of the whole WAL.
func TestSpec2_CorruptSnapshotFallsBack(t *testing.T) {
	dir, hash := protRun(t)
	infos := newestSnapshots(t, dir)
	newest := infos[len(infos)-1]
	b, err := os.ReadFile(newest.Path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(newest.Path, b, 0o640); err != nil {
		t.Fatal(err)
	}
	var logs walLogBuf
	rec, err := Recover(RecoverConfig{Dir: dir, Logger: textLog(&logs), Core: protCore})
	if err != nil {
		t.Fatal(err)
	}
	rec.WAL.Close()
	if rec.SnapshotSeq != core.Seq(infos[len(infos)-2].Seq) || rec.StateHash != hash || len(rec.Open) != 0 {
		t.Fatalf("base %d (want %d), hash equal %v, open %v", rec.SnapshotSeq, infos[len(infos)-2].Seq, rec.StateHash == hash, rec.Open)
	}
	if len(rec.Skipped) != 1 || !strings.Contains(rec.Skipped[0], "checksum") || !strings.Contains(logs.String(), "checksum") {
		t.Fatalf("skipped %v, logs:\n%s", rec.Skipped, logs.String())
	}
	if hash != fullReplayHash(t, dir) {
		t.Fatal("the closed state differs from a full replay")
	}
}

// TestSpec2_InvariantBreakingSnapshotFallsBack: the newest snapshot
// checksums and decodes but its state breaks invariants (damaged in memory
// before it was written): recovery takes the previous one, and with every
// snapshot unusable, the whole WAL from seq 1.
func TestSpec2_InvariantBreakingSnapshotFallsBack(t *testing.T) {
	dir, hash := protRun(t)
	infos := newestSnapshots(t, dir)
	store, err := OpenSnapshotStore(dir+"/"+SnapshotDir, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	breakSnap := func(info SnapshotInfo) {
		data, err := store.Load(info.Seq)
		if err != nil {
			t.Fatal(err)
		}
		p, err := core.Restore(protCore, data)
		if err != nil {
			t.Fatal(err)
		}
		c := core.Command{Kind: core.KindFault, Flags: uint8(core.FaultStrayFrozen), User: 1, Asset: 2, Amount: 1}
		if code := p.InjectFault(&c); code != core.OK {
			t.Fatal(code)
		}
		if err := store.Write(info.Seq, p.AppendSnapshot(nil)); err != nil {
			t.Fatal(err)
		}
	}
	breakSnap(infos[len(infos)-1])
	var logs walLogBuf
	rec, err := Recover(RecoverConfig{Dir: dir, Logger: textLog(&logs), Core: protCore})
	if err != nil {
		t.Fatal(err)
	}
	rec.WAL.Close()
	if rec.SnapshotSeq != core.Seq(infos[len(infos)-2].Seq) || rec.StateHash != hash || len(rec.Open) != 0 ||
		!strings.Contains(logs.String(), "breaks invariants") {
		t.Fatalf("base %d, hash equal %v, open %v, logs:\n%s", rec.SnapshotSeq, rec.StateHash == hash, rec.Open, logs.String())
	}
	for _, in := range infos {
		breakSnap(in)
	}
	rec, err = Recover(RecoverConfig{Dir: dir, Logger: quietLog(), Core: protCore})
	if err != nil {
		t.Fatal(err)
	}
	rec.WAL.Close()
	if rec.SnapshotSeq != 0 || rec.StateHash != hash || len(rec.Skipped) != len(infos) {
		t.Fatalf("full replay: base %d, hash equal %v, skipped %v", rec.SnapshotSeq, rec.StateHash == hash, rec.Skipped)
	}
}

// TestSpec2_BrokenMarketStartsHalted: a corruption the WAL itself holds
// (a fault command, found by no check before the stop) is reproduced by
// recovery; that market starts HALTED with RECOVERY_FAILED (a journaled
// trip), the other market trades, and the next start finds the damage
// contained, not open. Balance-level damage halts the core the same way,
// and the pipeline still starts and serves reads.
func TestSpec2_BrokenMarketStartsHalted(t *testing.T) {
	dir := t.TempDir()
	pl := protStart(t, dir)
	runAll(t, pl, protSetup())
	if r := submit(t, pl, core.Command{Kind: core.KindFault, Flags: uint8(core.FaultLevelDrift), Market: 1, Side: core.Sell, Amount: 4}); r.Code != core.OK {
		t.Fatal(r.Code)
	}
	pl.Close()

	var logs walLogBuf
	pl = protStart(t, dir, func(c *Config) { c.Logger = textLog(&logs) })
	rep := pl.Recovery()
	if len(rep.Open) != 1 || rep.Open[0].Market != 1 || len(rep.MarketCheck) != 2 {
		t.Fatalf("recovery report %+v", rep)
	}
	if v := marketOf(t, pl, 1); v.Status != core.MarketHalted || v.HaltReason != core.ReasonRecoveryFailed {
		t.Fatalf("market 1 %+v", v)
	}
	if v := marketOf(t, pl, 2); v.Status != core.MarketActive {
		t.Fatalf("market 2 %+v", v)
	}
	if r := submit(t, pl, core.Command{Kind: core.KindPlaceOrder, User: 1, Market: 2, Side: core.Sell, Type: core.Limit,
		TIF: core.GTC, Price: 500, Qty: 1}); r.Code != core.OK {
		t.Fatalf("market 2 order: %v", r.Code)
	}
	if !strings.Contains(logs.String(), "RECOVERY_FAILED") || !strings.Contains(logs.String(), "CRITICAL") {
		t.Fatalf("no CRITICAL RECOVERY_FAILED line:\n%s", logs.String())
	}
	// Balance-level damage on top: the core halts at the next start.
	if r := submit(t, pl, core.Command{Kind: core.KindFault, Flags: uint8(core.FaultStrayFrozen), User: 2, Asset: 2, Amount: 9}); r.Code != core.OK {
		t.Fatal(r.Code)
	}
	pl.Close()
	pl = protStart(t, dir)
	if rep := pl.Recovery(); len(rep.Open) != 1 || rep.Open[0].Market != 0 || len(rep.Contained) != 1 {
		t.Fatalf("second recovery %+v", rep)
	}
	var st core.BreakerState
	if err := pl.Read(func(p *core.Processor) error { st = p.CoreBreaker(); return nil }); err != nil {
		t.Fatal(err)
	}
	if st.Reason != core.ReasonRecoveryFailed {
		t.Fatalf("core breaker %+v", st)
	}
	pl.Close()
	hash := pl.Processor().StateHash()
	pl = protStart(t, dir)
	defer pl.Close()
	if rep := pl.Recovery(); len(rep.Open) != 0 || len(rep.Contained) != 2 {
		t.Fatalf("third recovery %+v: the halts were not journaled", rep)
	}
	if got := pl.recoveryHash(t); got != hash {
		t.Fatal("the third start's state differs from the second's")
	}
}

func (pl *Pipeline) recoveryHash(t *testing.T) string {
	t.Helper()
	var h string
	if err := pl.Read(func(p *core.Processor) error { h = p.StateHash(); return nil }); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSpec3_DiscardIsDeterministic: a command that would leave a balance
// negative is discarded live (INVARIANT_VIOLATION, the core halted), the
// read view agrees, and recovery and a follower from seq 1 reach the same
// state.
func TestSpec3_DiscardIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	var logs walLogBuf
	pl := protStart(t, dir, func(c *Config) { c.Logger = textLog(&logs) })
	runAll(t, pl, protSetup())
	submit(t, pl, core.Command{Kind: core.KindFault, Flags: uint8(core.FaultNegativeBalance), User: 2, Asset: 1, Amount: 10_005})
	r := submit(t, pl, core.Command{Kind: core.KindSpotDeposit, User: 2, Asset: 1, Amount: 1, Key: protKey("d-neg")})
	if r.Code != core.CodeInvariantViolation || pl.Evictions() != 1 || pl.Recoveries() != 2 {
		t.Fatalf("result %v, evictions %d, recoveries %d", r.Code, pl.Evictions(), pl.Recoveries())
	}
	var st core.BreakerState
	var bal core.Balance
	if err := pl.Read(func(p *core.Processor) error { st, bal = p.CoreBreaker(), p.BalanceOf(2, 1); return nil }); err != nil {
		t.Fatal(err)
	}
	if st.Reason != core.ReasonNegativeBalance || bal.Avail != -5 {
		t.Fatalf("view: breaker %+v, balance %+v", st, bal)
	}
	if !strings.Contains(logs.String(), "NEGATIVE_BALANCE") {
		t.Fatalf("no alert:\n%s", logs.String())
	}
	f, err := pl.NewFollower(1)
	if err != nil {
		t.Fatal(err)
	}
	for f.NextSeq() <= pl.DurableSeq() {
		if _, err := f.Next(context.Background(), 100); err != nil {
			t.Fatal(err)
		}
	}
	live := pl.recoveryHash(t)
	if f.StateHash() != live {
		t.Fatal("the follower differs from the live state")
	}
	pl.Close()
	if got := fullReplayHash(t, dir); got != live || pl.Processor().StateHash() != live {
		t.Fatal("replay differs from the live state")
	}
}

// TestSpec6_PeriodicCheckTrips: each fault is found by the periodic check
// within an interval on either replica and halts its market (or the core)
// with its reason through a journaled trip; the other market keeps trading.
func TestSpec6_PeriodicCheckTrips(t *testing.T) {
	for _, rep := range []CheckReplica{CheckOnView, CheckOnFollower} {
		for _, tc := range []struct {
			fault  core.Command
			market core.MarketID
			reason core.BreakerReason
		}{
			{core.Command{Flags: uint8(core.FaultLevelDrift), Market: 1, Side: core.Buy, Amount: 1}, 1, core.ReasonOrderbookDesync},
			{core.Command{Flags: uint8(core.FaultStrayFrozen), User: 1, Asset: 1, Amount: 1}, 0, core.ReasonInvariantBalance},
			{core.Command{Flags: uint8(core.FaultNegativeBalance), User: 1, Asset: 1, Amount: 20_000}, 0, core.ReasonNegativeBalance},
		} {
			dir := t.TempDir()
			pl := protStart(t, dir)
			runAll(t, pl, protSetup())
			var mu sync.Mutex
			var checks []time.Duration
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- pl.RunChecker(ctx, CheckerConfig{Interval: 20 * time.Millisecond, Replica: rep,
					OnCheck: func(d time.Duration, _ core.Seq, _ []core.Violation) {
						mu.Lock()
						checks = append(checks, d)
						mu.Unlock()
					}})
			}()
			c := tc.fault
			c.Kind = core.KindFault
			submit(t, pl, c)
			deadline := time.Now().Add(10 * time.Second)
			for {
				var mv core.MarketView
				var st core.BreakerState
				if err := pl.Read(func(p *core.Processor) error { mv, _ = p.Market(1); st = p.CoreBreaker(); return nil }); err != nil {
					t.Fatal(err)
				}
				if (tc.market == 1 && mv.HaltReason == tc.reason) || (tc.market == 0 && st.Reason == tc.reason) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("replica %d fault %+v: not halted: market %+v core %+v", rep, tc.fault, mv, st)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if tc.market == 1 {
				if r := submit(t, pl, core.Command{Kind: core.KindPlaceOrder, User: 1, Market: 2, Side: core.Sell,
					Type: core.Limit, TIF: core.GTC, Price: 700, Qty: 1}); r.Code != core.OK {
					t.Fatalf("market 2: %v", r.Code)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			n := len(checks)
			mu.Unlock()
			if n == 0 {
				t.Fatal("OnCheck never called")
			}
			pl.Close()
			// The halt is journaled: a replay of the WAL reproduces it.
			if got := fullReplayHash(t, dir); got != pl.Processor().StateHash() {
				t.Fatal("replay differs")
			}
		}
	}
}

// TestRetentionReleasesFollower: the WAL is kept back to the slowest
// follower, but never more than MaxRetained behind the durable seq; a
// follower past it is released with a CRITICAL alert and counted.
func TestRetentionReleasesFollower(t *testing.T) {
	var logs walLogBuf
	r := NewRetention(100, textLog(&logs))
	if got := r.Limit(500); got != 500 {
		t.Fatalf("no follower: %d", got)
	}
	sink, pub := core.Seq(0), core.Seq(0)
	r.Register("sink", func() core.Seq { return sink })
	r.Register("publisher", func() core.Seq { return pub })
	for _, tc := range []struct{ sink, pub, durable, want core.Seq }{
		{0, 0, 100, 0},    // not known yet: keep everything
		{0, 0, 107, 7},    // both released
		{30, 50, 120, 30}, // the slowest wins
		{30, 50, 140, 40}, // the sink released, the publisher within the bound
		{90, 95, 150, 90},
	} {
		sink, pub = tc.sink, tc.pub
		if got := r.Limit(tc.durable); got != tc.want {
			t.Errorf("%+v: limit %d", tc, got)
		}
	}
	fs := r.Followers()
	if fs[0].Name != "sink" || fs[0].Released != 2 || fs[1].Released != 1 {
		t.Fatalf("followers %+v", fs)
	}
	if !strings.Contains(logs.String(), "CRITICAL") || !strings.Contains(logs.String(), "follower=sink") {
		t.Fatalf("no alert:\n%s", logs.String())
	}
}

// TestRetentionHold: a held follower (a standby's, for the primary it may
// become) keeps the WAL as far back as MaxRetained allows, without ever
// being released or alerted on.
func TestRetentionHold(t *testing.T) {
	var logs walLogBuf
	r := NewRetention(100, textLog(&logs))
	durable := core.Seq(0)
	r.Hold("failover", func() core.Seq { return durable })
	for _, tc := range []struct{ durable, want core.Seq }{{50, 0}, {100, 0}, {107, 7}, {1000, 900}} {
		durable = tc.durable
		if got := r.Limit(durable); got != tc.want {
			t.Errorf("durable %d: limit %d, want %d", tc.durable, got, tc.want)
		}
	}
	if fs := r.Followers(); len(fs) != 1 || fs[0].Released != 0 || strings.Contains(logs.String(), "CRITICAL") {
		t.Fatalf("a held follower released or alerted: %+v\n%s", fs, logs.String())
	}
}

// TestCheckerNeedsReplica: the view replica is required for CheckOnView,
// the state follower for CheckOnState.
func TestCheckerNeedsReplica(t *testing.T) {
	pl, err := Start(Config{Dir: t.TempDir(), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if err := pl.RunChecker(context.Background(), CheckerConfig{Interval: time.Second}); !errors.Is(err, ErrNoReplica) {
		t.Fatal(err)
	}
	// CheckOnState needs the state follower, which NoSnapshots turns off.
	ns, err := Start(Config{Dir: t.TempDir(), Logger: quietLog(), NoSnapshots: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := ns.RunChecker(context.Background(), CheckerConfig{Interval: time.Second, Replica: CheckOnState}); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("CheckOnState without a state follower: %v", err)
	}
}

func textLog(w *walLogBuf) *slog.Logger { return slog.New(logging.NewHandler(w, true)) }
