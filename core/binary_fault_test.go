package core

// This file proves that each binary-market invariant of spec 004 trips the
// market's breaker with its own reason: a fault command (KindFault, one per
// invariant) corrupts the state past every check; the full check (a
// sequenced full-check tick) finds it and halts the market with the
// reason; where the O(1) per-command check covers the invariant, the next
// command touching the market is rolled back and halts it the same way;
// an operator's resolution is refused while the invariant stays broken.

import "testing"

const binM MarketID = 9

// newBinaryDrv is a driver with binary market 9 (quote asset 2, payout
// 100) where users 1 and 2 minted 100 shares, user 1 rests a BUY YES.
func newBinaryDrv(t *testing.T) *drv {
	d := newDrv(t)
	d.fund(1, 1, 1_000_000)
	d.fund(2, 1, 1_000_000)
	d.ok(Command{Kind: KindConfigBinary, Market: binM, Amount: 100, Cfg: MarketCfg{Quote: 2, Lot: 1, MinQty: 1,
		MaxQty: 1000, MakerFee: 1_000, TakerFee: 2_000}})
	d.ok(Command{Kind: KindActivate, Market: binM})
	d.ok(bplace(1, binM, Buy, OutcomeYes, 60, 100))
	d.ok(bplace(2, binM, Buy, OutcomeNo, 40, 100))
	d.ok(bplace(1, binM, Buy, OutcomeYes, 30, 10))
	if v := d.p.CheckInvariants(); len(v) != 0 {
		t.Fatalf("setup: %+v", v)
	}
	return d
}

func bplace(user UserID, m MarketID, side Side, out Outcome, price Price, qty Units) Command {
	return Command{Kind: KindPlaceOrder, User: user, Market: m, Side: side, Type: Limit, TIF: GTC, Price: price,
		Qty: qty, Flags: uint8(out)}
}

func TestBinaryFaultsTripBreaker(t *testing.T) {
	cases := []struct {
		name   string
		fault  Fault
		reason BreakerReason
		cheap  bool // the O(1) per-command check finds it too
	}{
		{"shares", FaultBinaryShares, ReasonInvariantShares, true},
		{"reserve", FaultBinaryReserve, ReasonInvariantReserve, true},
		{"cost_sum", FaultBinaryCostSum, ReasonInvariantCostSum, true},
		{"oversold", FaultBinaryOversold, ReasonInvariantOversold, false},
	}
	for _, tc := range cases {
		t.Run(tc.name+"/full_check", func(t *testing.T) {
			d := newBinaryDrv(t)
			d.ok(Command{Kind: KindFault, Flags: uint8(tc.fault), Market: binM, User: 1, Amount: 5})
			vs := d.p.CheckInvariants()
			if len(vs) == 0 || vs[0].Market != binM || vs[0].Reason != tc.reason {
				t.Fatalf("full check found %+v, want %v first", vs, tc.reason)
			}
			evs := d.ok(Command{Kind: KindTick, Flags: TickFullCheck})
			if !hasEvent(evs, EvMarketHalted, func(e *Event) bool {
				return e.Market == binM && BreakerReason(e.Detail) == tc.reason
			}) {
				t.Fatalf("tick did not halt market %d with %v: %+v", binM, tc.reason, evs)
			}
			if s := d.status(binM); s != MarketHalted {
				t.Fatalf("status %v", s)
			}
			d.code(bplace(2, binM, Buy, OutcomeNo, 50, 1), CodeMarketHalted)
			// the operator's resolution is refused while the invariant is broken
			d.code(Command{Kind: KindResumeMarket, Market: binM, Flags: uint8(MarketActive)}, CodeInvariantViolation)
			if d.p.Halted() {
				t.Fatal("a market-level violation halted the core")
			}
		})
		if !tc.cheap {
			continue
		}
		t.Run(tc.name+"/next_command", func(t *testing.T) {
			d := newBinaryDrv(t)
			d.ok(Command{Kind: KindFault, Flags: uint8(tc.fault), Market: binM, User: 1, Amount: 5})
			evs := d.code(bplace(2, binM, Buy, OutcomeNo, 50, 1), CodeInvariantViolation)
			if !hasEvent(evs, EvMarketHalted, func(e *Event) bool {
				return e.Market == binM && BreakerReason(e.Detail) == tc.reason
			}) {
				t.Fatalf("the command was not rolled back with %v: %+v", tc.reason, evs)
			}
			if _, ok := d.p.Order(5); ok {
				t.Fatal("the rolled-back order rests")
			}
		})
	}
}

// TestBinaryFaultRefusals: faults need a binary market, a position and an
// amount the reserve holds.
func TestBinaryFaultRefusals(t *testing.T) {
	d := newBinaryDrv(t)
	d.code(Command{Kind: KindFault, Flags: uint8(FaultBinaryShares), Market: 1, User: 1, Amount: 5}, CodeNotBinary)
	d.code(Command{Kind: KindFault, Flags: uint8(FaultBinaryShares), Market: binM, User: 7, Amount: 5}, CodeAccountNotFound)
	d.code(Command{Kind: KindFault, Flags: uint8(FaultBinaryReserve), Market: binM, Amount: 1 << 40}, CodeInvalidAmount)
	p := New(Config{})
	c := Command{Kind: KindFault, Seq: 1, Flags: uint8(FaultBinaryShares), Market: binM, User: 1, Amount: 5}
	if r := result(p.Apply(&c)); r.Code != CodeUnknownCommand {
		t.Fatalf("faults off: %v", r.Code)
	}
}

// binarySeedSnapshot is a state with binary markets in every phase (for
// the decoders' fuzz seeds): market 9 trading with positions and resting
// orders of both outcomes, market 10 resolved and part-settled, market 11
// voided and settled; each with a question (market 10's not ASCII).
func binarySeedSnapshot(t testing.TB) []byte {
	return binarySeedState(t, seedQuestions).AppendSnapshot(nil)
}

var seedQuestions = map[MarketID]string{9: "Will it rain in Lisbon on 1 May 2027?",
	10: "BTC ≥ 100 000 € à la clôture du 31/12 ?", 11: "Q"}

// binarySeedState applies the seed's commands, market m configured with
// question q[m] (none: the state testdata/snapshot_v3.bin holds).
func binarySeedState(t testing.TB, q map[MarketID]string) *Processor {
	p := New(Config{})
	seq := Seq(0)
	do := func(c Command) {
		seq++
		c.Seq, c.Time = seq, int64(seq)
		p.Apply(&c)
	}
	do(Command{Kind: KindConfigAsset, Asset: 2, BaseScale: 2})
	for u := UserID(1); u <= 3; u++ {
		do(Command{Kind: KindSpotDeposit, User: u, Asset: 2, Amount: 1_000_000, Key: mkKey("s" + itoa(int(u)))})
	}
	for m := MarketID(9); m <= 11; m++ {
		do(Command{Kind: KindConfigBinary, Market: m, Cfg: MarketCfg{Quote: 2, Lot: 1, MinQty: 1, MaxQty: 1000,
			MakerFee: 1_000, TakerFee: 2_000}, Price: 1 << 62, Text: q[m]})
		do(Command{Kind: KindActivate, Market: m})
		do(bplace(1, m, Buy, OutcomeYes, 60, 100))
		do(bplace(2, m, Buy, OutcomeNo, 40, 100))
		do(bplace(3, m, Buy, OutcomeNo, 30, 10))
		do(bplace(1, m, Sell, OutcomeYes, 75, 20))
		do(bplace(2, m, Sell, OutcomeNo, 45, 5))
	}
	do(Command{Kind: KindResolve, Market: 10, Flags: uint8(OutcomeNo)})
	do(Command{Kind: KindSettle, Market: 10, Qty: 1})
	do(Command{Kind: KindVoid, Market: 11})
	do(Command{Kind: KindSettle, Market: 11, Qty: 10})
	if v := p.CheckInvariants(); len(v) != 0 {
		t.Fatalf("binary seed state: %+v", v)
	}
	for m := MarketID(9); m <= 11; m++ {
		if v, _ := p.Binary(m); v.Question != q[m] {
			t.Fatalf("binary seed market %d: question %q, want %q", m, v.Question, q[m])
		}
	}
	return p
}

// TestBinarySnapshotRoundTrip: the binary seed state restores to the same
// bytes and hash, and a truncated or bit-flipped copy never panics.
func TestBinarySnapshotRoundTrip(t *testing.T) {
	snap := binarySeedSnapshot(t)
	q, err := Restore(Config{}, snap)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.AppendSnapshot(nil); string(got) != string(snap) {
		t.Fatal("the restored binary state serializes differently")
	}
	if v := q.CheckInvariants(); len(v) != 0 {
		t.Fatalf("restored: %+v", v)
	}
	for i := 0; i < len(snap); i++ {
		if _, err := Restore(Config{}, snap[:i]); err == nil {
			t.Fatalf("a snapshot cut at %d of %d restores", i, len(snap))
		}
		b := append([]byte(nil), snap...)
		b[i] ^= 0x41
		if q, err := Restore(Config{}, b); err == nil {
			q.CheckInvariants()
		}
	}
}
