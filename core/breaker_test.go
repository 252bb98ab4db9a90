package core

// This file proves spec 004 §5 (circuit breaker: trip, the status machine,
// operator resolution) and §6 (per-command checks that roll a command back,
// the full check finding each injected fault) on the processor alone, with
// a small driver that does what the journal does on a rollback: rebuild the
// state from a base snapshot plus the commands since, then Discard.

import (
	"bytes"
	"testing"
)

// drv sequences commands like the pipeline and handles a panicking Apply
// like it: the state is rebuilt from base + log (earlier discards
// re-applied as discards) and the command is discarded.
type drv struct {
	t        *testing.T
	cfg      Config
	p        *Processor
	base     []byte
	log      []Command
	discards map[Seq]Rollback
	seq      Seq
}

func newDrv(t *testing.T) *drv {
	cfg := Config{AllowFaults: true}
	d := &drv{t: t, cfg: cfg, p: New(cfg), discards: map[Seq]Rollback{}}
	d.base = d.p.AppendSnapshot(nil)
	d.do(Command{Kind: KindConfigAsset, Asset: 1, BaseScale: 0})
	d.do(Command{Kind: KindConfigAsset, Asset: 2, BaseScale: 0})
	for _, m := range []MarketID{1, 2} {
		d.ok(Command{Kind: KindConfigMarket, Market: m, Cfg: MarketCfg{Base: 1, Quote: 2, Tick: 1, Lot: 1, MinQty: 1,
			MaxQty: 1000, MakerFee: 10_000, TakerFee: 20_000}})
	}
	return d
}

// tryApply applies c, reporting a panic as its Rollback.
func tryApply(p *Processor, c *Command) (evs []Event, rb Rollback, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			rb, ok = AsRollback(r), false
		}
	}()
	return p.Apply(c), Rollback{}, true
}

func (d *drv) do(c Command) []Event {
	d.t.Helper()
	d.seq++
	c.Seq, c.Time = d.seq, int64(d.seq)*1000
	evs, rb, ok := tryApply(d.p, &c)
	if !ok {
		d.discards[c.Seq] = rb
		p, err := Restore(d.cfg, d.base)
		if err != nil {
			d.t.Fatal(err)
		}
		for i := range d.log {
			if r, dis := d.discards[d.log[i].Seq]; dis {
				p.Discard(&d.log[i], r)
			} else {
				p.Apply(&d.log[i])
			}
		}
		d.p = p
		evs = p.Discard(&c, rb)
	}
	d.log = append(d.log, c)
	return append([]Event(nil), evs...)
}

// ok applies c and fails unless it returned OK.
func (d *drv) ok(c Command) []Event {
	d.t.Helper()
	evs := d.do(c)
	if r := result(evs); r.Code != OK {
		d.t.Fatalf("%v: %v", c.Kind, r.Code)
	}
	return evs
}

// code applies c and fails unless it returned want.
func (d *drv) code(c Command, want Code) []Event {
	d.t.Helper()
	evs := d.do(c)
	if r := result(evs); r.Code != want {
		d.t.Fatalf("%v: %v, want %v", c.Kind, r.Code, want)
	}
	return evs
}

func mkKey(s string) Key { k, _ := KeyFrom(s); return k }

// fund gives user 1 base units and quote units.
func (d *drv) fund(user UserID, base, quote Units) {
	d.t.Helper()
	d.ok(Command{Kind: KindSpotDeposit, User: user, Asset: 1, Amount: base, Key: mkKey("b" + string(rune('0'+user)))})
	d.ok(Command{Kind: KindSpotDeposit, User: user, Asset: 2, Amount: quote, Key: mkKey("q" + string(rune('0'+user)))})
}

func sell(user UserID, m MarketID, price Price, qty Units) Command {
	return Command{Kind: KindPlaceOrder, User: user, Market: m, Side: Sell, Type: Limit, TIF: GTC, Price: price, Qty: qty}
}

func buy(user UserID, m MarketID, price Price, qty Units) Command {
	return Command{Kind: KindPlaceOrder, User: user, Market: m, Side: Buy, Type: Limit, TIF: GTC, Price: price, Qty: qty}
}

func hasEvent(evs []Event, k EventKind, pred func(*Event) bool) bool {
	for i := range evs {
		if evs[i].Kind == k && (pred == nil || pred(&evs[i])) {
			return true
		}
	}
	return false
}

func (d *drv) status(m MarketID) MarketStatus {
	v, _ := d.p.Market(m)
	return v.Status
}

// TestSpec5_MarketStatusMachine pins the one state machine's edges and what
// each status lets through.
func TestSpec5_MarketStatusMachine(t *testing.T) {
	all := []MarketStatus{MarketActive, MarketHalted, MarketSuspended, MarketDraft, MarketResolved, MarketSettled, MarketVoided}
	want := map[[2]MarketStatus]bool{
		{MarketActive, MarketHalted}: true, {MarketSuspended, MarketHalted}: true,
		{MarketHalted, MarketActive}: true, {MarketHalted, MarketSuspended}: true, {MarketSuspended, MarketActive}: true,
		// binary lifecycle (issue 22)
		{MarketActive, MarketSuspended}: true, {MarketActive, MarketResolved}: true, {MarketActive, MarketVoided}: true,
		{MarketSuspended, MarketResolved}: true, {MarketSuspended, MarketVoided}: true,
		{MarketDraft, MarketActive}: true, {MarketDraft, MarketVoided}: true, {MarketDraft, MarketHalted}: true,
		{MarketResolved, MarketSettled}: true, {MarketResolved, MarketHalted}: true,
		{MarketSettled, MarketHalted}: true, {MarketVoided, MarketHalted}: true,
		{MarketHalted, MarketResolved}: true, {MarketHalted, MarketSettled}: true, {MarketHalted, MarketVoided}: true,
		{MarketHalted, MarketDraft}: true, // a halted DRAFT market returns to DRAFT (issue 40 review)
	}
	for _, a := range all {
		for _, b := range all {
			if canMove(a, b) != want[[2]MarketStatus{a, b}] {
				t.Errorf("canMove(%v, %v) = %v", a, b, canMove(a, b))
			}
		}
	}
	if canMove(MarketStatus(9), MarketActive) || validStatus(MarketStatus(7)) {
		t.Error("an unknown status moves or is valid")
	}
	for _, tc := range []struct {
		s              MarketStatus
		orders, cancel Code
	}{
		{MarketActive, OK, OK}, {MarketSuspended, CodeMarketSuspended, OK}, {MarketHalted, CodeMarketHalted, CodeMarketHalted},
	} {
		if tc.s.allowsOrders() != tc.orders || tc.s.allowsCancels() != tc.cancel {
			t.Errorf("%v: orders %v cancels %v", tc.s, tc.s.allowsOrders(), tc.s.allowsCancels())
		}
	}
	if len(BreakerReasons()) != 10 || ReasonManualHalt.String() != "MANUAL_HALT" || ReasonInvariantShares.String() != "INVARIANT_SHARES" {
		t.Errorf("reasons %v", BreakerReasons())
	}
}

// TestSpec5_TripSuspendResume: a trip halts one market (queries served,
// orders and cancels refused, the other market trades); a resolution to
// SUSPENDED lets cancels through but no orders or modifies; SUSPENDED ->
// ACTIVE; the reason and the operator are on the events.
func TestSpec5_TripSuspendResume(t *testing.T) {
	d := newDrv(t)
	d.fund(1, 100, 10_000)
	d.fund(2, 100, 10_000)
	r := result(d.ok(sell(1, 1, 100, 5)))
	evs := d.ok(Command{Kind: KindBreakerTrip, Market: 1, Flags: uint8(ReasonOrderbookDesync), Text: `{"x":1}`})
	if !hasEvent(evs, EvMarketHalted, func(e *Event) bool {
		return e.Market == 1 && e.Detail == uint8(ReasonOrderbookDesync) && e.Code == CodeInvariantViolation
	}) || d.status(1) != MarketHalted {
		t.Fatalf("trip: %+v", evs)
	}
	if v, _ := d.p.Market(1); v.HaltReason != ReasonOrderbookDesync || v.HaltedAt == 0 {
		t.Fatalf("market view %+v", v)
	}
	d.code(sell(1, 1, 101, 1), CodeMarketHalted)
	d.code(Command{Kind: KindCancelOrder, User: 1, OrderID: r.OrderID}, CodeMarketHalted)
	d.ok(sell(2, 2, 100, 1)) // the other market trades
	// A second trip keeps the first reason and emits nothing.
	if evs := d.ok(Command{Kind: KindBreakerTrip, Market: 1, Flags: uint8(ReasonClearingError)}); len(evs) != 1 {
		t.Fatalf("second trip: %+v", evs)
	}
	d.code(Command{Kind: KindBreakerTrip, Market: 1, Flags: 0}, CodeInvalidCommand)
	d.code(Command{Kind: KindBreakerTrip, Market: 9, Flags: uint8(ReasonManualHalt)}, CodeInvalidMarket)
	d.code(Command{Kind: KindResumeMarket, Market: 1, Flags: uint8(MarketHalted)}, CodeInvalidStatus)
	evs = d.ok(Command{Kind: KindResumeMarket, Market: 1, Flags: uint8(MarketSuspended), User: 1000, Text: "checked"})
	if !hasEvent(evs, EvMarketResumed, func(e *Event) bool { return e.Detail == uint8(MarketSuspended) && e.User == 1000 }) ||
		d.status(1) != MarketSuspended {
		t.Fatalf("resolve to SUSPENDED: %+v", evs)
	}
	d.code(sell(1, 1, 101, 1), CodeMarketSuspended)
	d.code(Command{Kind: KindModifyOrder, User: 1, OrderID: r.OrderID, Qty: 4}, CodeMarketSuspended)
	d.ok(Command{Kind: KindCancelOrder, User: 1, OrderID: r.OrderID})
	d.code(Command{Kind: KindResumeMarket, Market: 1, Flags: uint8(MarketSuspended)}, CodeNotHalted)
	d.code(Command{Kind: KindResumeMarket, Market: 1, Flags: ResumeRebuild}, CodeInvalidCommand)
	d.ok(Command{Kind: KindResumeMarket, Market: 1})
	d.code(Command{Kind: KindResumeMarket, Market: 1}, CodeNotHalted)
	d.ok(sell(1, 1, 101, 1))
	evs = d.ok(Command{Kind: KindHaltMarket, Market: 1, User: 1000})
	if !hasEvent(evs, EvMarketHalted, func(e *Event) bool {
		return e.Detail == uint8(ReasonManualHalt) && e.Code == OK && e.User == 1000
	}) {
		t.Fatalf("manual halt: %+v", evs)
	}
}

// TestSpec5_ResolveNeedsCleanBookCancelAll: a drifted level total is found
// by the full check and halts its market; a resolution is refused while it
// is broken; cancel-all in bounded slices empties the book and returns every
// frozen fund (walking the orders, not the broken totals); the resolution
// with a rebuild then passes and trading resumes.
func TestSpec5_ResolveNeedsCleanBookCancelAll(t *testing.T) {
	d := newDrv(t)
	d.fund(1, 100, 10_000)
	d.fund(2, 100, 10_000)
	d.ok(sell(1, 1, 100, 5))
	d.ok(sell(1, 1, 100, 3))
	d.ok(buy(2, 1, 90, 2))
	d.ok(Command{Kind: KindFault, Flags: uint8(FaultLevelDrift), Market: 1, Side: Sell, Amount: 7})
	open, _ := d.p.UnhaltedViolations()
	if len(open) != 1 || open[0].Market != 1 || open[0].Reason != ReasonOrderbookDesync {
		t.Fatalf("full check after drift: %+v", open)
	}
	d.ok(Command{Kind: KindTick, Flags: TickFullCheck})
	if d.status(1) != MarketHalted {
		t.Fatal("the full check did not halt the market")
	}
	d.code(Command{Kind: KindResumeMarket, Market: 1}, CodeInvariantViolation)
	d.code(Command{Kind: KindCancelAll, Market: 1, Qty: 0}, CodeInvalidQuantity)
	d.code(Command{Kind: KindCancelAll, Market: 2, Qty: 1}, CodeNotHalted)
	cancelled := 0
	for i := 0; ; i++ {
		evs := d.ok(Command{Kind: KindCancelAll, Market: 1, Qty: 2})
		n := int(result(evs).Qty)
		for _, e := range evs {
			if e.Kind == EvOrderCancelled && e.Code != CodeCancelledByOperator {
				t.Fatalf("cancel reason %v", e.Code)
			}
		}
		cancelled += n
		if n < 2 {
			break
		}
		if i > 5 {
			t.Fatal("cancel-all does not end")
		}
	}
	if cancelled != 3 {
		t.Fatalf("cancelled %d orders, want 3", cancelled)
	}
	for _, u := range []UserID{1, 2} {
		for a := AssetID(1); a <= 2; a++ {
			if b := d.p.BalanceOf(u, a); b.Frozen != 0 {
				t.Fatalf("user %d asset %d still frozen %+v", u, a, b)
			}
		}
	}
	d.ok(Command{Kind: KindResumeMarket, Market: 1, Flags: ResumeRebuild | uint8(MarketActive), User: 1000})
	if v := d.p.CheckInvariants(); len(v) != 0 || d.status(1) != MarketActive {
		t.Fatalf("after resolution: %+v %v", v, d.status(1))
	}
	d.ok(sell(1, 1, 100, 1))
}

// TestSpec5_CoreHaltRepairResolve: frozen funds no order holds are a
// balance-level violation that halts the core; while halted, trading and
// cancels are refused, a first-seen deposit or withdraw is refused with
// CORE_HALTED and recorded (its retry gets the same answer), a refund is
// refused but not recorded, adjustments repair the state, and the core
// resolution is refused until the full check passes.
func TestSpec5_CoreHaltRepairResolve(t *testing.T) {
	d := newDrv(t)
	d.fund(1, 100, 10_000)
	r := result(d.ok(sell(1, 1, 100, 5)))
	d.ok(Command{Kind: KindSpotWithdraw, User: 1, Asset: 1, Amount: 1, Key: mkKey("w1")})
	d.ok(Command{Kind: KindFault, Flags: uint8(FaultStrayFrozen), User: 1, Asset: 1, Amount: 10})
	d.ok(Command{Kind: KindTick, Flags: TickFullCheck})
	if st := d.p.CoreBreaker(); st.Reason != ReasonInvariantBalance || !d.p.Halted() {
		t.Fatalf("core breaker %+v", st)
	}
	d.code(sell(1, 1, 101, 1), CodeCoreHalted)
	d.code(Command{Kind: KindCancelOrder, User: 1, OrderID: r.OrderID}, CodeCoreHalted)
	d.code(Command{Kind: KindResumeMarket, Market: 1}, CodeCoreHalted)
	dep := Command{Kind: KindSpotDeposit, User: 1, Asset: 2, Amount: 5, Key: mkKey("d-halted")}
	d.code(dep, CodeCoreHalted)
	if evs := d.code(dep, CodeCoreHalted); !hasEvent(evs, EvTransfer, func(e *Event) bool { return e.Flags == 1 }) {
		t.Fatalf("the retried deposit was not answered from its record: %+v", evs)
	}
	d.code(Command{Kind: KindSpotRefund, User: 1, Asset: 1, Amount: 1, Key: mkKey("w1")}, CodeCoreHalted)
	if _, ok := d.p.SpotOp(KindSpotRefund, mkKey("w1")); ok {
		t.Fatal("a refused refund was recorded: its retry could never succeed")
	}
	d.code(Command{Kind: KindResumeCore, User: 1000}, CodeInvariantViolation)
	d.code(Command{Kind: KindAdjust, User: 1, Asset: 1, Amount: -16, Flags: AdjustFrozen, Key: mkKey("fix-f0")}, CodeInsufficientBalance)
	d.ok(Command{Kind: KindAdjust, User: 1, Asset: 1, Amount: -10, Flags: AdjustFrozen, Key: mkKey("fix-f")})
	d.code(Command{Kind: KindAdjust, User: 1, Asset: 1, Amount: -10, Key: mkKey("fix-f")}, CodeReqIDConflict)
	d.ok(Command{Kind: KindAdjust, User: 1, Asset: 1, Amount: 10, Key: mkKey("fix-a")})
	evs := d.ok(Command{Kind: KindResumeCore, User: 1000, Text: "released the stray frozen funds"})
	if !hasEvent(evs, EvCoreResumed, func(e *Event) bool { return e.User == 1000 }) || d.p.Halted() {
		t.Fatalf("core resolution: %+v", evs)
	}
	d.code(Command{Kind: KindResumeCore}, CodeNotHalted)
	d.ok(Command{Kind: KindSpotRefund, User: 1, Asset: 1, Amount: 1, Key: mkKey("w1")})
	d.ok(sell(1, 1, 101, 1))
	if v := d.p.CheckInvariants(); len(v) != 0 {
		t.Fatalf("after repair: %+v", v)
	}
}

// TestSpec6_FullCheckFindsEachFault: each injected fault passes the
// per-command checks and is found by the full check with its reason and
// scope (market or core); a fault is refused unless enabled.
func TestSpec6_FullCheckFindsEachFault(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  Command
		market MarketID
		reason BreakerReason
	}{
		{"level drift", Command{Flags: uint8(FaultLevelDrift), Market: 1, Side: Sell, Amount: 1}, 1, ReasonOrderbookDesync},
		{"stray frozen", Command{Flags: uint8(FaultStrayFrozen), User: 2, Asset: 2, Amount: 3}, 0, ReasonInvariantBalance},
		{"negative balance", Command{Flags: uint8(FaultNegativeBalance), User: 2, Asset: 2, Amount: 20_000}, 0, ReasonNegativeBalance},
	} {
		d := newDrv(t)
		d.fund(1, 100, 10_000)
		d.fund(2, 100, 10_000)
		d.ok(sell(1, 1, 100, 5))
		c := tc.fault
		c.Kind = KindFault
		d.ok(c)
		open, _ := d.p.UnhaltedViolations()
		found := false
		for _, v := range open {
			if v.Market == tc.market && v.Reason == tc.reason {
				found = true
			}
			if v.Market != tc.market {
				t.Errorf("%s: violation outside the corrupted scope: %+v", tc.name, v)
			}
		}
		if !found {
			t.Errorf("%s: full check found %+v, want market %d reason %v", tc.name, open, tc.market, tc.reason)
		}
		if v, _ := d.p.Market(2); v.Status != MarketActive {
			t.Errorf("%s: market 2 %v", tc.name, v.Status)
		}
		p := New(Config{})
		c.Seq = 1
		if r := result(p.Apply(&c)); r.Code != CodeUnknownCommand {
			t.Errorf("%s: fault without AllowFaults: %v", tc.name, r.Code)
		}
	}
}

// TestSpec6_NegativeBalanceRollsBack: a command that would leave a balance
// negative is not applied: it is rejected with INVARIANT_VIOLATION on the
// state as it was before it, and the core halts (NEGATIVE_BALANCE).
func TestSpec6_NegativeBalanceRollsBack(t *testing.T) {
	d := newDrv(t)
	d.fund(1, 100, 10_000)
	d.fund(2, 100, 10_000)
	d.ok(Command{Kind: KindFault, Flags: uint8(FaultNegativeBalance), User: 2, Asset: 2, Amount: 10_050})
	before := d.p.AppendSnapshot(nil)
	bal := d.p.BalanceOf(2, 2)
	// User 2's quote is -50: a credit of 10 leaves it negative.
	evs := d.code(Command{Kind: KindSpotDeposit, User: 2, Asset: 2, Amount: 10, Key: mkKey("d2")}, CodeInvariantViolation)
	if !hasEvent(evs, EvInvariantViolation, func(e *Event) bool { return e.Detail == ViolNegativeBalance && e.Asset == 2 }) ||
		!hasEvent(evs, EvCoreHalted, func(e *Event) bool { return e.Detail == uint8(ReasonNegativeBalance) }) ||
		hasEvent(evs, EvBalance, nil) || hasEvent(evs, EvTransfer, nil) {
		t.Fatalf("events %+v", evs)
	}
	if d.p.BalanceOf(2, 2) != bal {
		t.Fatalf("balance %+v, was %+v: the command stayed applied", d.p.BalanceOf(2, 2), bal)
	}
	if _, ok := d.p.SpotOp(KindSpotDeposit, mkKey("d2")); ok {
		t.Fatal("the rolled-back deposit is recorded")
	}
	// Apart from the halt, the state is the one before the command.
	p, _ := Restore(Config{}, before)
	c := Command{Kind: KindBreakerTrip, Seq: p.LastSeq() + 1, Time: int64(p.LastSeq()+1) * 1000, Flags: uint8(ReasonNegativeBalance)}
	p.Apply(&c)
	if p.coreHaltSeq, p.lastTime = d.p.coreHaltSeq, d.p.lastTime; !bytes.Equal(p.AppendSnapshot(nil), d.p.AppendSnapshot(nil)) {
		t.Fatal("the rebuilt state differs from the state before the command plus the halt")
	}
}

// TestSpec6_DriftedLevelRollsBackOnEmpty: a level whose total drifted is
// never dropped silently: the command that empties it is rolled back and
// the market halts (ORDERBOOK_DESYNC), its order kept for inspection.
func TestSpec6_DriftedLevelRollsBackOnEmpty(t *testing.T) {
	d := newDrv(t)
	d.fund(1, 100, 10_000)
	r := result(d.ok(sell(1, 1, 100, 5)))
	d.ok(Command{Kind: KindFault, Flags: uint8(FaultLevelDrift), Market: 1, Side: Sell, Amount: 2})
	evs := d.code(Command{Kind: KindCancelOrder, User: 1, OrderID: r.OrderID}, CodeInvariantViolation)
	if !hasEvent(evs, EvMarketHalted, func(e *Event) bool { return e.Market == 1 && e.Detail == uint8(ReasonOrderbookDesync) }) {
		t.Fatalf("events %+v", evs)
	}
	if _, ok := d.p.Order(r.OrderID); !ok || d.status(1) != MarketHalted {
		t.Fatal("the order is gone or the market is not halted")
	}
}

// TestSnapshotKeepsDriftedAggregates: the level totals and counts, order
// counts and asset totals are in the snapshot and the state hash, so a drift
// survives a restart exactly (for the check to find) and changes the hash.
func TestSnapshotKeepsDriftedAggregates(t *testing.T) {
	d := newDrv(t)
	d.fund(1, 100, 10_000)
	d.ok(sell(1, 1, 100, 5))
	d.ok(buy(1, 1, 90, 5))
	clean := d.p.StateHash()
	for _, c := range []Command{
		{Kind: KindFault, Flags: uint8(FaultLevelDrift), Market: 1, Side: Sell, Amount: 1},
		{Kind: KindFault, Flags: uint8(FaultLevelDrift), Market: 1, Side: Buy, Amount: 1},
	} {
		d.ok(c)
	}
	if d.p.StateHash() == clean {
		t.Fatal("a drifted level total does not change the state hash")
	}
	q, err := Restore(Config{}, d.p.AppendSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	if q.StateHash() != d.p.StateHash() {
		t.Fatal("restore changed the state")
	}
	if v := q.CheckInvariants(); len(v) != 1 || v[0].Market != 1 || v[0].Reason != ReasonOrderbookDesync {
		t.Fatalf("restored drift not found: %+v", v)
	}
	bids, asks, _ := q.Depth(1, 5, nil, nil)
	if bids[0].Qty != 6 || asks[0].Qty != 6 {
		t.Fatalf("restored depth %+v %+v: healed", bids, asks)
	}
}

// TestForgetOps: a forgotten req_id's records are gone (a new operation
// with it applies), adjustment refs are kept, and compaction keeps the
// snapshot canonical.
func TestForgetOps(t *testing.T) {
	d := newDrv(t)
	d.ok(Command{Kind: KindAdjust, User: 1, Asset: 2, Amount: 5_000_000, Key: mkKey("adj")})
	for i := 0; i < 3000; i++ {
		k := mkKey("r" + itoa(i))
		d.ok(Command{Kind: KindSpotWithdraw, User: 1, Asset: 2, Amount: 1, Key: k})
		d.ok(Command{Kind: KindSpotRefund, User: 1, Asset: 2, Amount: 1, Key: k})
	}
	for i := 0; i < 2500; i++ {
		evs := d.ok(Command{Kind: KindForgetOps, Key: mkKey("r" + itoa(i))})
		if !hasEvent(evs, EvOpsForgotten, func(e *Event) bool { return e.Qty == 2 }) {
			t.Fatalf("forget %d: %+v", i, evs)
		}
	}
	if evs := d.ok(Command{Kind: KindForgetOps, Key: mkKey("adj")}); len(evs) != 1 {
		t.Fatalf("an adjustment ref was forgotten: %+v", evs)
	}
	if d.p.liveOps() != 1001 || len(d.p.opLog) >= 2*1001 || d.p.opsDead*2 >= len(d.p.opLog) {
		t.Fatalf("dead %d live %d log %d: not compacted", d.p.opsDead, d.p.liveOps(), len(d.p.opLog))
	}
	if _, ok := d.p.SpotOp(KindSpotWithdraw, mkKey("r10")); ok {
		t.Fatal("forgotten op still answered")
	}
	if c, ok := d.p.SpotOp(KindSpotRefund, mkKey("r2999")); !ok || c != OK {
		t.Fatal("kept op lost by compaction")
	}
	q := mustRestore(t, d.p.AppendSnapshot(nil))
	if q.StateHash() != d.p.StateHash() || q.AdjustedTotal(2) != 5_000_000 {
		t.Fatal("restore of a compacted ops set differs")
	}
	d.ok(Command{Kind: KindSpotWithdraw, User: 1, Asset: 2, Amount: 1, Key: mkKey("r10")}) // applies anew
	if b := d.p.BalanceOf(1, 2); b.Avail != 5_000_000-1 {
		t.Fatalf("balance %+v", b)
	}
}

// TestOpsLimitRefusalsRecorded: at the soft limit a first-seen deposit or
// withdraw is refused with TOO_MANY_OPS and the refusal is recorded (a
// retry gets it again: the transfer compensates instead of retrying
// forever), while refunds and adjustments still fit; at the hard limit
// nothing fits and nothing is recorded. A new user beyond MaxUsers is a
// recorded TOO_MANY_USERS likewise (covered by the same recording path).
func TestOpsLimitRefusalsRecorded(t *testing.T) {
	soft, hard := opsSoftLimit, opsHardLimit
	t.Cleanup(func() { opsSoftLimit, opsHardLimit = soft, hard })
	opsSoftLimit, opsHardLimit = 4, 6
	d := newDrv(t)
	d.ok(Command{Kind: KindSpotDeposit, User: 1, Asset: 2, Amount: 100, Key: mkKey("a")})
	d.ok(Command{Kind: KindSpotWithdraw, User: 1, Asset: 2, Amount: 1, Key: mkKey("b")})
	d.ok(Command{Kind: KindSpotDeposit, User: 1, Asset: 2, Amount: 1, Key: mkKey("c")})
	d.ok(Command{Kind: KindSpotDeposit, User: 1, Asset: 2, Amount: 1, Key: mkKey("d")}) // 4 live
	full := Command{Kind: KindSpotDeposit, User: 1, Asset: 2, Amount: 1, Key: mkKey("e")}
	d.code(full, CodeTooManyOps)
	if evs := d.code(full, CodeTooManyOps); !hasEvent(evs, EvTransfer, func(e *Event) bool { return e.Flags == 1 }) {
		t.Fatal("the TOO_MANY_OPS refusal was not recorded")
	}
	d.ok(Command{Kind: KindSpotRefund, User: 1, Asset: 2, Amount: 1, Key: mkKey("b")}) // 6 live: the reserve is full
	d.code(Command{Kind: KindAdjust, User: 1, Asset: 2, Amount: 1, Key: mkKey("f")}, CodeTooManyOps)
	if _, ok := d.p.SpotOp(KindAdjust, mkKey("f")); ok {
		t.Fatal("a refusal past the hard limit was recorded")
	}
	d.ok(Command{Kind: KindForgetOps, Key: mkKey("c")})
	d.ok(Command{Kind: KindAdjust, User: 1, Asset: 2, Amount: 1, Key: mkKey("f")})
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// TestSpec6_PerTradeCheckRollsBackTheOrder: spec 004 §6.2's per-trade check
// (both sides' balances non-negative after each fill): a fill that leaves
// the taker's balance negative rolls the whole order back (the maker's
// order rests untouched, no trade is reported) and halts the core.
func TestSpec6_PerTradeCheckRollsBackTheOrder(t *testing.T) {
	d := newDrv(t)
	d.fund(1, 100, 10_000)
	d.fund(2, 1, 10_000)
	maker := result(d.ok(sell(1, 1, 100, 5)))
	d.ok(Command{Kind: KindFault, Flags: uint8(FaultNegativeBalance), User: 2, Asset: 1, Amount: 101}) // user 2: -100 base
	tradesBefore := d.p.nextTradeID
	evs := d.code(buy(2, 1, 100, 5), CodeInvariantViolation)
	if hasEvent(evs, EvTrade, nil) || d.p.nextTradeID != tradesBefore || !d.p.Halted() ||
		d.p.CoreBreaker().Reason != ReasonNegativeBalance {
		t.Fatalf("events %+v, breaker %+v", evs, d.p.CoreBreaker())
	}
	if o, ok := d.p.Order(maker.OrderID); !ok || o.Filled != 0 {
		t.Fatalf("maker order %+v %v", o, ok)
	}
}

// TestHaltedDraftReturnsToDraft: a binary market halted before it was
// activated goes back to DRAFT when the halt is resolved, whatever target
// the operator asks (a halt must never open a market nobody activated);
// the halt's memory survives a snapshot and is gone once it returns, so a
// later halt of the activated market resolves to trading.
func TestHaltedDraftReturnsToDraft(t *testing.T) {
	d := newDrv(t)
	d.ok(Command{Kind: KindConfigBinary, Market: 9, Amount: 100, Cfg: MarketCfg{Quote: 2, Lot: 1, MinQty: 1, MaxQty: 1000}})
	d.ok(Command{Kind: KindHaltMarket, Market: 9, User: 7})
	if s := d.status(9); s != MarketHalted {
		t.Fatalf("after the halt: %v", s)
	}
	snap := d.p.AppendSnapshot(nil)
	p, err := Restore(d.cfg, snap)
	if err != nil {
		t.Fatalf("restore a halted DRAFT market: %v", err)
	}
	if !bytes.Equal(p.AppendSnapshot(nil), snap) {
		t.Fatal("a halted DRAFT market's snapshot does not round-trip")
	}
	d.ok(Command{Kind: KindResumeMarket, Market: 9, Flags: uint8(MarketActive), User: 7})
	if s := d.status(9); s != MarketDraft {
		t.Fatalf("a halted DRAFT market resumed to %v, want DRAFT", s)
	}
	d.code(bplace(1, 9, Buy, OutcomeYes, 50, 1), CodeMarketNotOpen)
	d.ok(Command{Kind: KindActivate, Market: 9})
	d.ok(Command{Kind: KindHaltMarket, Market: 9, User: 7})
	d.ok(Command{Kind: KindResumeMarket, Market: 9, Flags: uint8(MarketActive), User: 7})
	if s := d.status(9); s != MarketActive {
		t.Fatalf("the activated market resumed to %v, want ACTIVE", s)
	}
}
