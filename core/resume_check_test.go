package core

// resume_check_test.go proves ResumeCheck names what a breaker resolution
// would find: a drifted level total (judged only without a rebuild), an
// order that holds less than its remainder can cost (judged with a rebuild
// too: resumeMarket then refuses and changes nothing), and nothing once the
// book is clean.

import (
	"strconv"
	"strings"
	"testing"
)

func TestResumeCheckNamesTheFailingCheck(t *testing.T) {
	d := newDrv(t)
	d.fund(1, 100, 10_000)
	d.fund(2, 100, 10_000)
	d.ok(sell(1, 1, 100, 5))
	d.ok(sell(1, 1, 100, 3))
	r := result(d.ok(buy(2, 1, 90, 2)))
	if reason, found := d.p.ResumeCheck(1, false); reason != ReasonNone || found != "" {
		t.Fatalf("clean book: %v %q", reason, found)
	}
	d.ok(Command{Kind: KindFault, Flags: uint8(FaultLevelDrift), Market: 1, Side: Sell, Amount: 7})
	d.ok(Command{Kind: KindTick, Flags: TickFullCheck})
	reason, found := d.p.ResumeCheck(1, false)
	if reason != ReasonOrderbookDesync || !strings.Contains(found, "ask level 100: its total says 15 in 2 orders, its orders hold 8 in 2") {
		t.Fatalf("drifted level: %v %q", reason, found)
	}
	if reason, found := d.p.ResumeCheck(1, true); reason != ReasonNone {
		t.Fatalf("with a rebuild the totals are not judged: %v %q", reason, found)
	}
	// The bid now holds one unit less than its remainder can cost.
	oi, _ := d.p.orderIdx.get(uint64(r.OrderID))
	d.p.pool.slots[oi].frozen--
	reason, found = d.p.ResumeCheck(1, true)
	if reason != ReasonOrderbookDesync ||
		!strings.Contains(found, "order "+strconv.FormatUint(uint64(r.OrderID), 10)+" holds less than its remainder can cost") {
		t.Fatalf("an order holding too little: %v %q", reason, found)
	}
	d.code(Command{Kind: KindResumeMarket, Market: 1, Flags: ResumeRebuild | uint8(MarketActive)}, CodeInvariantViolation)
	if d.status(1) != MarketHalted {
		t.Fatal("a refused rebuild lifted the halt")
	}
	if lv := d.p.markets[1].asks.levels; len(lv) != 1 || lv[0].qty != 15 {
		t.Fatalf("a refused rebuild changed the book: %+v", lv)
	}
	if reason, _ := d.p.ResumeCheck(9, true); reason != ReasonNone {
		t.Fatal("no such market")
	}
}
