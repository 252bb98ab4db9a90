package core

import (
	"testing"
)

// This file proves the transfer service's commands (spec 003): user
// creation with an audited initial credit, the hold at creation (no
// overdraw by concurrent transfers or orders), requestId idempotency, the
// state machine (every allowed and refused transition), the cancel window's
// edges, execution exactly once in (executeAt, id) order, the limits, and
// that snapshots carry all of it (same state hash, same future).

const (
	usd     AssetID = 1
	hold    int64   = 10 * 60 * 1e9 // 10 minutes in ns
	t0      int64   = 1_700_000_000 * 1e9
	aliceID UserID  = 101
)

// p2pDrv applies commands at explicit times and checks the full invariant
// check after each one.
type p2pDrv struct {
	t   *testing.T
	p   *Processor
	seq Seq
	now int64
	log []Command
}

func newP2P(t *testing.T) *p2pDrv {
	d := &p2pDrv{t: t, p: New(Config{}), now: t0}
	d.must(Command{Kind: KindConfigAsset, Asset: usd, BaseScale: 2}, OK)
	d.must(Command{Kind: KindConfigAsset, Asset: 2, BaseScale: 0}, OK)
	d.must(Command{Kind: KindConfigMarket, Market: 1, Cfg: MarketCfg{Base: 2, Quote: usd, Tick: 1, Lot: 1, MinQty: 1,
		MaxQty: 1000}}, OK)
	return d
}

func (d *p2pDrv) apply(c Command) []Event {
	d.t.Helper()
	d.seq++
	c.Seq, c.Time = d.seq, d.now
	evs := append([]Event(nil), d.p.Apply(&c)...)
	d.log = append(d.log, c)
	if vs := d.p.CheckInvariants(); len(vs) != 0 {
		d.t.Fatalf("seq %d %v: violations %+v", c.Seq, c.Kind, vs)
	}
	return evs
}

func (d *p2pDrv) must(c Command, want Code) []Event {
	d.t.Helper()
	evs := d.apply(c)
	if r := result(evs); r.Code != want {
		d.t.Fatalf("%v: %v, want %v", c.Kind, r.Code, want)
	}
	return evs
}

func (d *p2pDrv) user(id UserID, handle string, initial Units) UserID {
	d.t.Helper()
	evs := d.must(Command{Kind: KindP2PCreateUser, User: id, Text: handle, Asset: usd, Amount: initial}, OK)
	for _, e := range evs {
		if e.Kind == EvP2PUser {
			return e.User
		}
	}
	d.t.Fatal("no EvP2PUser")
	return 0
}

func xfer(from, to UserID, amt Units, req string) Command {
	c := Command{Kind: KindP2PTransfer, User: from, OrderID: OrderID(to), Asset: usd, Amount: amt, Qty: Units(hold)}
	if req != "" {
		c.Key = mkKey(req)
	}
	return c
}

// create makes a transfer and returns its id.
func (d *p2pDrv) create(c Command) uint64 {
	d.t.Helper()
	return uint64(result(d.must(c, OK)).OrderID)
}

func (d *p2pDrv) bal(u UserID) Balance { return d.p.BalanceOf(u, usd) }

func (d *p2pDrv) status(id uint64) P2PStatus {
	t, ok := d.p.P2PTransferByID(id)
	if !ok {
		d.t.Fatalf("transfer %d not found", id)
	}
	return t.Status
}

func TestP2PCreateUser(t *testing.T) {
	d := newP2P(t)
	for _, c := range []struct {
		cmd  Command
		want Code
	}{
		{Command{Kind: KindP2PCreateUser, Text: "ab", Asset: usd}, CodeInvalidHandle},
		{Command{Kind: KindP2PCreateUser, Text: "bad handle", Asset: usd}, CodeInvalidHandle},
		{Command{Kind: KindP2PCreateUser, Text: string(make([]byte, 51)), Asset: usd}, CodeInvalidHandle},
		{Command{Kind: KindP2PCreateUser, Text: "alice", Asset: usd, Amount: -1}, CodeInvalidBalance},
		{Command{Kind: KindP2PCreateUser, Text: "alice", Asset: 9}, CodeInvalidAsset},
		{Command{Kind: KindP2PCreateUser, Text: "alice", Asset: usd, User: P2PUserBase}, CodeInvalidUser},
	} {
		d.must(c.cmd, c.want)
	}
	if d.p.P2PStats().Users != 0 || d.p.AssetTotal(usd) != 0 {
		t.Fatal("a refused create changed state")
	}
	a := d.user(aliceID, "alice_01-X", 100_000)
	if a != aliceID || d.bal(a) != (Balance{Avail: 100_000}) || d.p.AdjustedTotal(usd) != 100_000 {
		t.Fatalf("alice: id %d balance %+v adjusted %d", a, d.bal(a), d.p.AdjustedTotal(usd))
	}
	d.must(Command{Kind: KindP2PCreateUser, Text: "alice_01-X", Asset: usd}, CodeUserAlreadyExists)
	d.must(Command{Kind: KindP2PCreateUser, User: aliceID, Text: "alice2", Asset: usd}, CodeUserAlreadyExists)
	// Allocation: from the reserved range, skipping an account another command made there.
	d.must(Command{Kind: KindSpotDeposit, User: P2PUserBase, Asset: usd, Amount: 5, Key: mkKey("dep")}, OK)
	b := d.user(0, "bob", 0)
	c := d.user(0, "carol", 1)
	if b != P2PUserBase+1 || c != P2PUserBase+2 {
		t.Fatalf("allocated %d, %d; want %d, %d", b, c, P2PUserBase+1, P2PUserBase+2)
	}
	// An existing numeric account may take a handle; its balance is kept.
	d.must(Command{Kind: KindSpotDeposit, User: 7, Asset: usd, Amount: 50, Key: mkKey("dep7")}, OK)
	d.user(7, "seven", 25)
	if d.bal(7).Avail != 75 {
		t.Fatalf("user 7: %+v", d.bal(7))
	}
	if u, ok := d.p.P2PUserByHandle("seven"); !ok || u.ID != 7 || u.Initial != 25 || u.CreatedAt != t0 {
		t.Fatalf("P2PUserByHandle: %+v %v", u, ok)
	}
	if d.p.AdjustedTotal(usd) != 100_000+1+25 {
		t.Fatalf("AdjustedTotal %d", d.p.AdjustedTotal(usd))
	}
}

func TestP2PTransferChecksInOrder(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 1000)
	b := d.user(0, "bob", 0)
	for _, c := range []struct {
		cmd  Command
		want Code
	}{
		{xfer(a, b, 0, ""), CodeInvalidAmount},
		{xfer(a, b, -5, ""), CodeInvalidAmount},
		{xfer(a, a, 5, ""), CodeSelfTransfer},
		{xfer(999, b, 5, ""), CodeSenderNotFound},
		{xfer(999, 998, 5, ""), CodeSenderNotFound}, // sender first
		{xfer(a, 998, 5, ""), CodeRecipientNotFound},
		{xfer(a, b, 1001, ""), CodeInsufficientBalance},
	} {
		d.must(c.cmd, c.want)
	}
	if d.bal(a) != (Balance{Avail: 1000}) || d.p.P2PStats().Transfers != 0 {
		t.Fatal("a refused transfer changed state")
	}
	// Held at once: two transfers can never overdraw together, nor can an order.
	id := d.create(xfer(a, b, 700, ""))
	if d.bal(a) != (Balance{Avail: 300, Frozen: 700}) || d.status(id) != P2PPending {
		t.Fatalf("after create: %+v %v", d.bal(a), d.status(id))
	}
	d.must(xfer(a, b, 301, ""), CodeInsufficientBalance)
	d.must(Command{Kind: KindPlaceOrder, User: a, Market: 1, Side: Buy, Type: Limit, TIF: GTC, Price: 301, Qty: 1},
		CodeInsufficientBalance)
	d.create(xfer(a, b, 300, ""))
	d.must(xfer(a, b, 1, ""), CodeInsufficientBalance)
	// A frozen sender cannot create.
	d.must(Command{Kind: KindSetAccountStatus, User: b, Status: Frozen}, OK)
	d.must(xfer(b, a, 1, ""), CodeAccountFrozen)
}

func TestP2PRequestIDIdempotent(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 1000)
	b := d.user(0, "bob", 0)
	id := d.create(xfer(a, b, 100, "req-1"))
	before, n := d.bal(a), d.p.P2PStats()
	evs := d.must(xfer(a, b, 100, "req-1"), OK)
	if uint64(result(evs).OrderID) != id || !hasEvent(evs, EvP2PTransfer, func(e *Event) bool { return e.Flags == 1 }) {
		t.Fatalf("repeat: %+v", evs)
	}
	for _, e := range evs {
		if e.Kind == EvBalance {
			t.Fatal("a repeat moved a balance")
		}
	}
	if d.bal(a) != before || d.p.P2PStats() != n {
		t.Fatal("a repeated requestId changed state")
	}
	d.must(xfer(a, b, 101, "req-1"), CodeReqIDConflict)
	// The requestId is per sender: bob's req-1 is another transfer.
	d.user(0, "carol", 0)
	d.must(Command{Kind: KindP2PCreateUser, Text: "dave", Asset: usd, Amount: 10}, OK)
	dave, _ := d.p.P2PUserByHandle("dave")
	if id2 := d.create(xfer(dave.ID, b, 10, "req-1")); id2 == id {
		t.Fatal("another sender's requestId returned alice's transfer")
	}
	// Still answered after the transfer completed.
	d.now += hold
	d.must(Command{Kind: KindP2PTick}, OK)
	if r := result(d.must(xfer(a, b, 100, "req-1"), OK)); uint64(r.OrderID) != id || d.bal(a).Avail != 900 {
		t.Fatalf("repeat after completion: %+v %+v", r, d.bal(a))
	}
}

func TestP2PCancelWindowEdges(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 1000)
	b := d.user(0, "bob", 0)
	created := d.now
	x := d.create(xfer(a, b, 100, ""))
	y := d.create(xfer(a, b, 200, ""))
	if tr, _ := d.p.P2PTransferByID(x); tr.ExecuteAt != created+hold {
		t.Fatalf("executeAt %d, want %d", tr.ExecuteAt, created+hold)
	}
	// 1 ms before executeAt: the tick executes nothing, the cancel wins.
	d.now = created + hold - 1e6
	if r := result(d.must(Command{Kind: KindP2PTick}, OK)); r.Qty != 0 {
		t.Fatalf("tick before executeAt executed %d", r.Qty)
	}
	d.must(Command{Kind: KindP2PCancel, User: a, OrderID: OrderID(x)}, OK)
	if d.status(x) != P2PCancelled || d.bal(a) != (Balance{Avail: 800, Frozen: 200}) {
		t.Fatalf("after cancel: %v %+v", d.status(x), d.bal(a))
	}
	// At executeAt, before any tick: the window is closed.
	d.now = created + hold
	d.must(Command{Kind: KindP2PCancel, User: a, OrderID: OrderID(y)}, CodeCancelWindowExpired)
	if d.status(y) != P2PPending {
		t.Fatal("a refused cancel changed the transfer")
	}
	// The tick at executeAt executes it, exactly once.
	if r := result(d.must(Command{Kind: KindP2PTick}, OK)); r.Qty != 1 {
		t.Fatalf("tick at executeAt executed %d", r.Qty)
	}
	if d.status(y) != P2PCompleted || d.bal(a) != (Balance{Avail: 800}) || d.bal(b) != (Balance{Avail: 200}) {
		t.Fatalf("after execution: %v %+v %+v", d.status(y), d.bal(a), d.bal(b))
	}
	d.now += 1e9
	if r := result(d.must(Command{Kind: KindP2PTick}, OK)); r.Qty != 0 {
		t.Fatal("executed twice")
	}
	if tr, _ := d.p.P2PTransferByID(y); tr.DoneAt != created+hold {
		t.Fatalf("completedAt %d", tr.DoneAt)
	}
	// After it: CANNOT_CANCEL_TRANSFER (the status decides first).
	d.must(Command{Kind: KindP2PCancel, User: a, OrderID: OrderID(y)}, CodeCannotCancelTransfer)
}

func TestP2PStateMachine(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 1000)
	b := d.user(0, "bob", 0)
	c := d.user(0, "carol", 0)
	done := d.create(xfer(a, b, 10, ""))   // -> COMPLETED
	canc := d.create(xfer(a, b, 20, ""))   // -> CANCELLED by the sender
	admin := d.create(xfer(a, b, 30, ""))  // -> CANCELLED by an operator
	frozen := d.create(xfer(a, c, 40, "")) // -> DEBIT_FAILED: recipient FROZEN
	disabl := d.create(xfer(a, b, 50, "")) // -> DEBIT_FAILED: sender DISABLED at execution
	d.must(Command{Kind: KindP2PCancel, User: 0, OrderID: 999}, CodeTransferNotFound)
	d.must(Command{Kind: KindP2PCancel, User: b, OrderID: OrderID(canc)}, CodeNotTransferSender)
	d.must(Command{Kind: KindP2PCancel, User: a, OrderID: OrderID(canc)}, OK)
	d.must(Command{Kind: KindP2PCancel, User: b, OrderID: OrderID(admin), Flags: P2PCancelAdmin}, OK)
	d.must(Command{Kind: KindSetAccountStatus, User: c, Status: Frozen}, OK)
	// Execute the first four with alice active, then disable her for the fifth.
	d.now += hold
	evs := d.must(Command{Kind: KindP2PTick}, OK)
	if result(evs).Qty != 3 {
		t.Fatalf("tick executed %d, want 3", result(evs).Qty)
	}
	if d.status(done) != P2PCompleted || d.status(frozen) != P2PDebitFailed || d.status(disabl) != P2PCompleted {
		t.Fatalf("statuses %v %v %v", d.status(done), d.status(frozen), d.status(disabl))
	}
	if tr, _ := d.p.P2PTransferByID(frozen); tr.Reason != CodeAccountFrozen {
		t.Fatalf("reason %v", tr.Reason)
	}
	// The failed one released its hold and moved nothing.
	if d.bal(a) != (Balance{Avail: 1000 - 10 - 50}) || d.bal(c) != (Balance{}) || d.bal(b).Avail != 60 {
		t.Fatalf("balances %+v %+v %+v", d.bal(a), d.bal(b), d.bal(c))
	}
	// COMPLETED events carry the balances after.
	if !hasEvent(evs, EvP2PTransfer, func(e *Event) bool {
		return e.OrderID == OrderID(done) && e.Fee == 1000-10 && e.Fee2 == 10 // alice's total still holds 40 and 50
	}) {
		t.Fatalf("COMPLETED event without the balances after: %+v", evs)
	}
	// Sender DISABLED at execution.
	late := d.create(xfer(a, b, 5, ""))
	d.must(Command{Kind: KindSetAccountStatus, User: a, Status: Disabled}, OK)
	d.now += hold
	d.must(Command{Kind: KindP2PTick}, OK)
	if tr, _ := d.p.P2PTransferByID(late); tr.Status != P2PDebitFailed || tr.Reason != CodeAccountDisabled {
		t.Fatalf("late: %+v", tr)
	}
	// Every terminal status refuses a cancel, even by an operator.
	for _, id := range []uint64{done, canc, admin, frozen, late} {
		d.must(Command{Kind: KindP2PCancel, User: a, OrderID: OrderID(id), Flags: P2PCancelAdmin}, CodeCannotCancelTransfer)
	}
}

func TestP2PExecutionOrderAndTickBound(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 1000)
	b := d.user(0, "bob", 0)
	long := xfer(a, b, 1, "")
	long.Qty = Units(2 * hold)
	first := d.create(long) // created first, due last
	var ids []uint64
	for i := 0; i < 5; i++ {
		ids = append(ids, d.create(xfer(a, b, Units(i+2), "")))
	}
	defer func(n int) { p2pExecPerTick = n }(p2pExecPerTick)
	p2pExecPerTick = 2
	d.now += 2 * hold
	var order []uint64
	for range 3 {
		for _, e := range d.must(Command{Kind: KindP2PTick}, OK) {
			if e.Kind == EvP2PTransfer {
				order = append(order, uint64(e.OrderID))
			}
		}
	}
	want := append(ids, first)
	if len(order) != len(want) {
		t.Fatalf("executed %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("executed %v, want %v (by executeAt, then id)", order, want)
		}
	}
}

func TestP2PLimits(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 1000)
	b := d.user(0, "bob", 1000)
	defer func(u int32, all, tot int) { p2pPerUserLimit, p2pPendingLimit, p2pTransferLimit = u, all, tot }(
		p2pPerUserLimit, p2pPendingLimit, p2pTransferLimit)
	p2pPerUserLimit, p2pPendingLimit, p2pTransferLimit = 2, 3, 5
	d.create(xfer(a, b, 1, ""))
	x := d.create(xfer(a, b, 1, ""))
	d.must(xfer(a, b, 1, ""), CodeTooManyPendingTransfers)
	d.create(xfer(b, a, 1, ""))
	d.must(xfer(b, a, 1, ""), CodePendingTransfersFull)
	d.must(Command{Kind: KindP2PCancel, User: a, OrderID: OrderID(x)}, OK) // frees a slot
	d.create(xfer(a, b, 1, ""))
	d.now += hold
	d.must(Command{Kind: KindP2PTick}, OK)
	d.create(xfer(a, b, 1, ""))
	d.must(xfer(a, b, 1, ""), CodeTooManyTransfers)
}

func TestP2PHistory(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 1000)
	b := d.user(0, "bob", 1000)
	c := d.user(0, "carol", 0)
	var mine []uint64
	for i := 0; i < 7; i++ {
		from, to := a, b
		if i%2 == 1 {
			from, to = b, a
		}
		mine = append(mine, d.create(xfer(from, to, 1, "")))
		d.create(xfer(b, c, 1, "")) // not alice's
	}
	page, total, _ := d.p.P2PHistory(a, 2, 3, nil)
	if total != 7 || len(page) != 3 || page[0].ID != mine[4] || page[2].ID != mine[2] {
		t.Fatalf("page: total %d %+v", total, page)
	}
	if page, _, _ = d.p.P2PHistory(a, 6, 3, nil); len(page) != 1 || page[0].ID != mine[0] {
		t.Fatalf("last page %+v", page)
	}
	if page, _, _ = d.p.P2PHistory(a, 7, 3, nil); len(page) != 0 {
		t.Fatal("past the end")
	}
}

// TestP2PSnapshotRoundTrip: a restored processor has the same state hash and
// the same future (the same events for the same commands), pending heap and
// requestIds included.
func TestP2PSnapshotRoundTrip(t *testing.T) {
	d := newP2P(t)
	a := d.user(aliceID, "alice", 1000)
	b := d.user(0, "bob", 500)
	d.create(xfer(a, b, 100, "r1"))
	done := d.create(xfer(b, a, 50, ""))
	d.now += hold / 2
	d.create(xfer(a, b, 7, "r2"))
	x := d.create(xfer(b, a, 3, ""))
	d.must(Command{Kind: KindP2PCancel, User: b, OrderID: OrderID(x)}, OK)
	_ = done
	q, err := Restore(Config{}, d.p.AppendSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	if q.StateHash() != d.p.StateHash() || q.AdjustedTotal(usd) != 1500 {
		t.Fatal("restored state differs")
	}
	future := []Command{xfer(a, b, 100, "r1"), {Kind: KindP2PTick}, xfer(a, b, 1, ""), {Kind: KindP2PTick},
		{Kind: KindP2PCreateUser, Text: "carol", Asset: usd}}
	for i, c := range future {
		d.now += hold / 2
		want := d.apply(c)
		c.Seq, c.Time = d.seq, d.now
		got := q.Apply(&c)
		if len(got) != len(want) {
			t.Fatalf("step %d: %d events, want %d", i, len(got), len(want))
		}
		for j := range got {
			if got[j] != want[j] {
				t.Fatalf("step %d event %d: %+v, want %+v", i, j, got[j], want[j])
			}
		}
	}
	if q.StateHash() != d.p.StateHash() {
		t.Fatal("futures diverged")
	}
	// A version-2 snapshot (no p2p section) still restores.
	p2 := New(Config{})
	snap := p2.AppendSnapshot(nil)
	var w wbuf
	p2.appendP2P(&w)
	v2 := append([]byte{2}, snap[1:len(snap)-len(w.b)]...) // version 2: without the p2p section
	if _, err := Restore(Config{}, v2); err != nil {
		t.Fatalf("version 2: %v", err)
	}
}
