package core

// allocs_test.go proves that the hot path allocates nothing once warm: each
// command kind measured alone with testing.AllocsPerRun, and every command of
// a mixed stream measured one by one (exact malloc counts, so amortized
// growth cannot hide behind AllocsPerRun's rounding down).

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"
)

// raceEnabled reports whether the test binary was built with -race, whose
// instrumentation makes allocation counts meaningless.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

func skipAllocsUnderRace(t *testing.T) {
	if raceEnabled() {
		t.Skip("allocation counts are not meaningful under -race")
	}
}

// allocsProcessor is a warm processor: funded users, two books of resting
// orders, and half of a mixed stream already applied. It returns the rest
// of the stream.
func allocsProcessor(t *testing.T) (*Processor, []Command) {
	w := buildWorkload(5, genProfile{users: 2_000, bench: true, targetLive: 500, seedOrders: 500}, 60_000)
	p := mustRestore(t, w.snap)
	half := len(w.cmds) / 2
	for i := range w.cmds[:half] {
		p.Apply(&w.cmds[i])
	}
	return p, w.cmds[half:]
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// cmdClass names what a command did, from its events.
func cmdClass(c *Command, ev []Event) string {
	if ev[len(ev)-1].Code != OK {
		return c.Kind.String() + "/rejected"
	}
	if c.Kind != KindPlaceOrder {
		return c.Kind.String()
	}
	traded, rested := false, false
	for i := range ev {
		traded = traded || ev[i].Kind == EvTrade
		rested = rested || ev[i].Kind == EvOrderAccepted
	}
	switch {
	case traded && rested:
		return "place/traded+rested"
	case traded:
		return "place/traded"
	case rested:
		return "place/rested"
	}
	return "place/expired"
}

// TestAllocsMixedStream measures the exact allocations of each command of
// the warm half of a mixed stream.
func TestAllocsMixedStream(t *testing.T) {
	skipAllocsUnderRace(t)
	// A command that allocates does so on every run (the processor is
	// deterministic); an allocation seen once is another goroutine's (the
	// test binary's timers, the runtime) counted in the same window. So a
	// command fails only if it allocates in two runs from the same state.
	first := mixedStreamAllocs(t, false)
	if len(first) == 0 {
		return
	}
	again := mixedStreamAllocs(t, true)
	for i, n := range first {
		if m, ok := again[i]; ok {
			t.Errorf("command %d allocated %d objects, then %d on a second run", i, n, m)
		}
	}
}

// mixedStreamAllocs applies the mixed stream to a fresh warm processor and
// returns, by command index, the commands that allocated (and logs the
// tally per class if report).
func mixedStreamAllocs(t *testing.T, report bool) map[int]uint64 {
	p, cmds := allocsProcessor(t)
	if testing.Short() {
		cmds = cmds[:10_000]
	}
	// No collection during the window and one P (as testing.AllocsPerRun
	// does), so only the commands' own mallocs count, not the runtime's
	// background goroutines'.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	type tally struct{ cmds, allocs uint64 }
	byClass := map[string]*tally{}
	var order []string
	allocated := map[int]uint64{}
	for i := range cmds {
		before := mallocs()
		ev := p.Apply(&cmds[i])
		n := mallocs() - before
		cl := cmdClass(&cmds[i], ev)
		if byClass[cl] == nil {
			byClass[cl] = &tally{}
			order = append(order, cl)
		}
		byClass[cl].cmds++
		byClass[cl].allocs += n
		if n > 0 {
			allocated[i] = n
			t.Logf("command %d (%s) allocated %d objects: %+v", i, cl, n, cmds[i])
		}
	}
	if report {
		for _, cl := range order {
			t.Logf("%-22s %6d commands, %d allocations", cl, byClass[cl].cmds, byClass[cl].allocs)
		}
	}
	return allocated
}

// allocsDriver applies hand-built commands to a warm processor. Like the
// pipeline's ring slots, the command is copied into one long-lived slot, so
// what is measured is the processor (see TestApplyDoesNotRetainCommand).
type allocsDriver struct {
	t    *testing.T
	p    *Processor
	slot *Command
}

func (d *allocsDriver) do(c Command) Event {
	c.Seq = d.p.LastSeq() + 1
	c.Time = int64(c.Seq)
	*d.slot = c
	ev := d.p.Apply(d.slot)
	return ev[len(ev)-1]
}

func (d *allocsDriver) must(c Command, want OrderStatus) Event {
	r := d.do(c)
	if r.Code != OK || (want != 0 && r.Status != want) {
		d.t.Fatalf("%v: %v %v, want OK %v", c.Kind, r.Code, r.Status, want)
	}
	return r
}

// TestAllocsPerCommand measures one command kind at a time with
// testing.AllocsPerRun on a warm processor: a place that rests, a cancel, a
// place that trades, modifies, a repeated and a fresh deposit.
func TestAllocsPerCommand(t *testing.T) {
	skipAllocsUnderRace(t)
	p, _ := allocsProcessor(t)
	d := &allocsDriver{t: t, p: p, slot: new(Command)}
	// Market 3: like market 1, empty, so each trade below is exactly one fill.
	d.must(Command{Kind: KindConfigMarket, Market: 3, Cfg: genMarketCfgs[1]}, 0)
	const runs = 200
	cfg := genMarketCfgs[1]
	price := genStartMid[1]
	user := func(i int) UserID { return UserID(1000 + 7*(i%1_000)) }
	var ids []OrderID
	placeAsks := func(n int) {
		ids = ids[:0]
		for i := 0; i < n; i++ {
			r := d.must(Command{Kind: KindPlaceOrder, User: user(i), Market: 3, Side: Sell, Type: Limit, TIF: GTC,
				Price: price, Qty: cfg.MinQty}, StatusNew)
			ids = append(ids, r.OrderID)
		}
	}
	cancelAll := func() {
		for i, id := range ids {
			d.must(Command{Kind: KindCancelOrder, User: user(i), OrderID: id}, StatusCancelled)
		}
	}
	// Warm up every path once at full size, so the maps, the order pool, the
	// level slices and the event buffer reach their steady capacity.
	placeAsks(2*runs + 2)
	cancelAll()

	check := func(name string, f func()) {
		t.Helper()
		if a := testing.AllocsPerRun(runs, f); a != 0 {
			t.Errorf("%s: %v allocations per command", name, a)
		}
	}
	i := 0
	check("place that rests", func() {
		r := d.must(Command{Kind: KindPlaceOrder, User: user(i), Market: 3, Side: Sell, Type: Limit, TIF: GTC,
			Price: price + Price(i%16)*cfg.Tick, Qty: cfg.MinQty}, StatusNew)
		ids = append(ids[:i], r.OrderID)
		i++
	})
	i = 0
	check("cancel", func() {
		d.must(Command{Kind: KindCancelOrder, User: user(i), OrderID: ids[i]}, StatusCancelled)
		i++
	})
	placeAsks(runs + 1)
	i = 0
	check("place that trades (fills one resting order)", func() {
		d.must(Command{Kind: KindPlaceOrder, User: user(i + 500), Market: 3, Side: Buy, Type: Limit, TIF: IOC,
			Price: price, Qty: cfg.MinQty}, StatusFilled)
		i++
	})
	// One big resting order, modified back and forth.
	r := d.must(Command{Kind: KindPlaceOrder, User: user(1), Market: 3, Side: Sell, Type: Limit, TIF: GTC,
		Price: price, Qty: cfg.MinQty * 1_000}, StatusNew)
	i = 0
	check("modify: shrink (keeps priority)", func() {
		d.must(Command{Kind: KindModifyOrder, User: user(1), OrderID: r.OrderID, Qty: cfg.MinQty * Units(999-i)}, 0)
		i++
	})
	i = 0
	check("modify: reprice (re-enters)", func() {
		d.must(Command{Kind: KindModifyOrder, User: user(1), OrderID: r.OrderID, Price: price + Price(1+i%2)*cfg.Tick}, 0)
		i++
	})
	dep := Command{Kind: KindSpotDeposit, User: user(3), Asset: genUSDT, Amount: 1, Key: genKeyN("alloc-dep-", 0)}
	d.must(dep, 0)
	check("deposit repeated (same req_id)", func() { d.must(dep, 0) })

	// A fresh deposit adds its req_id to the processed set, which grows by
	// design (bounded by MaxProcessedOps): its map and log reallocate now and
	// then. AllocsPerRun rounds that down to 0; the exact amortized count is
	// logged and bounded.
	keys := make([]Key, 20_001)
	for k := range keys {
		keys[k] = genKeyN("alloc-fresh-", k)
	}
	i = 0
	fresh := func() {
		d.must(Command{Kind: KindSpotDeposit, User: user(i), Asset: genUSDT, Amount: 1, Key: keys[i]}, 0)
		i++
	}
	check("deposit with a fresh req_id (AllocsPerRun)", fresh)
	n := len(keys) - i - 1
	before := mallocs()
	for k := 0; k < n; k++ {
		fresh()
	}
	per := float64(mallocs()-before) / float64(n)
	t.Logf("fresh deposits: %.4f allocations per deposit (amortized growth of the processed-ops set)", per)
	if per > 0.01 {
		t.Errorf("fresh deposits: %.4f allocations per deposit, want amortized < 0.01", per)
	}
}

func genKeyN(prefix string, n int) Key {
	k, ok := KeyFrom(fmt.Sprintf("%s%d", prefix, n))
	if !ok {
		panic("bad key")
	}
	return k
}

// TestApplyDoesNotRetainCommand: a driver that keeps the command on its
// stack (a decode loop, a test) must not pay a heap allocation per command.
// Apply stores its argument in Processor.cur (processor.go, begin), a field
// nothing reads, so escape analysis moves every caller's Command to the heap
// ("leaking param: c"): 1 allocation of 184 bytes per command.
func TestApplyDoesNotRetainCommand(t *testing.T) {
	skipAllocsUnderRace(t)
	p := New(Config{})
	a := testing.AllocsPerRun(100, func() {
		c := Command{Seq: p.LastSeq() + 1, Kind: KindTick}
		p.Apply(&c)
	})
	if a != 0 {
		t.Errorf("Apply of a stack-held command: %v allocations per command (Apply retains its argument)", a)
	}
}
