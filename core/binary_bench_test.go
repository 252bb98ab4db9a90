package core

// binary_bench_test.go measures the processor on binary markets with the
// shape of BenchmarkProcessorMixed (10k funded users, two books of ~1k
// resting orders each): 60% GTC limits near the spread on random outcomes
// and sides (sells of shares the user holds), 30% cancels, 8% marketable
// IOCs, 2% refusals (oversell, bad price); the fills are a mix of mint,
// transfer and burn. It also measures settling a market of 1M positions in
// MaxSettleSlice slices.

import (
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"
)

const (
	bbUsers      = 10_000
	bbTargetLive = 1_000
	bbQuote      = AssetID(1)
	bbTick       = Price(100) // payout 10_000
	bbPayout     = Units(10_000)
)

var bbW struct {
	once sync.Once
	w    *benchWorkload
}

func binaryWorkloadOnce() *benchWorkload {
	bbW.once.Do(func() { bbW.w = buildBinaryWorkload(77, benchStreamLen) })
	return bbW.w
}

type bbGen struct {
	r      *rand.Rand
	p      *Processor
	seq    Seq
	live   []binGenOrder
	liveAt map[OrderID]int
	liveIn [3]int
}

func (g *bbGen) apply(c Command) []Event {
	g.seq++
	c.Seq, c.Time = g.seq, int64(g.seq)*1000
	ev := g.p.Apply(&c)
	g.observe(ev)
	return ev
}

func (g *bbGen) observe(ev []Event) {
	for i := range ev {
		e := &ev[i]
		switch e.Kind {
		case EvOrderAccepted:
			g.liveAt[e.OrderID] = len(g.live)
			g.live = append(g.live, binGenOrder{id: e.OrderID, user: e.User, market: e.Market})
			g.liveIn[e.Market]++
		case EvOrderFilled, EvOrderCancelled, EvOrderExpired:
			if j, ok := g.liveAt[e.OrderID]; ok {
				g.liveIn[g.live[j].market]--
				last := len(g.live) - 1
				g.live[j] = g.live[last]
				g.liveAt[g.live[j].id] = j
				g.live = g.live[:last]
				delete(g.liveAt, e.OrderID)
			}
		}
	}
}

func bbUser(i int) UserID { return UserID(1000 + i) }

// next builds the next stream command.
func (g *bbGen) next(c *Command) {
	x := g.r.IntN(100)
	if x >= 60 && x < 90 && len(g.live) == 0 {
		x = 0
	}
	m := MarketID(1 + g.r.IntN(2))
	u := bbUser(g.r.IntN(bbUsers))
	out := Outcome(1 + g.r.IntN(2))
	side := Side(1 + g.r.IntN(2))
	qty := Units(1 + g.r.IntN(20))
	if side == Sell {
		v, _ := g.p.Position(u, m)
		free := v.YesVolume - v.YesPending
		if out == OutcomeNo {
			free = v.NoVolume - v.NoPending
		}
		if free < qty && x < 98 {
			side = Buy // no short selling: buy instead
		}
	}
	*c = Command{Kind: KindPlaceOrder, User: u, Market: m, Side: side, Type: Limit, TIF: GTC, Qty: qty, Flags: uint8(out)}
	off := Price(1 + g.r.IntN(30))
	cross := false
	switch {
	case x < 60:
		pct := 8
		if g.liveIn[m] > bbTargetLive {
			pct = 30
		} else if g.liveIn[m] < bbTargetLive*3/4 {
			pct = 2
		}
		cross = g.r.IntN(100) < pct
	case x < 90:
		o := &g.live[g.r.IntN(len(g.live))]
		*c = Command{Kind: KindCancelOrder, User: o.user, OrderID: o.id, Market: o.market}
		return
	case x < 98:
		c.TIF = IOC
		cross = true
	case x < 99:
		c.Price = bbTick/2 + 50*bbTick // off the tick: INVALID_PRICE
		return
	default:
		c.Side, c.Qty = Sell, 1_000_000 // more than anyone holds: INSUFFICIENT_SHARES
	}
	// own price: passive, off ticks behind 50; or crossing: up to 2 ticks
	// through the best opposite price in the order's own terms
	px := 50 - off
	if c.Side == Sell {
		px = 50 + off
	}
	if cross {
		v, _ := g.p.Binary(m)
		bid, ask := v.YesBid, v.YesAsk
		if out == OutcomeNo {
			bid, ask = v.NoBid, v.NoAsk
		}
		k := Price(g.r.IntN(3))
		if c.Side == Buy && ask > 0 {
			px = ask/bbTick + k
		} else if c.Side == Sell && bid > 0 {
			px = bid/bbTick - k
		}
	}
	c.Price = min(max(px, 1), 99) * bbTick
}

func buildBinaryWorkload(seed uint64, n int) *benchWorkload {
	g := &bbGen{r: rand.New(rand.NewPCG(seed, 3)), p: New(Config{}), liveAt: map[OrderID]int{}}
	g.apply(Command{Kind: KindConfigAsset, Asset: bbQuote, BaseScale: 4})
	for m := MarketID(1); m <= 2; m++ {
		g.apply(Command{Kind: KindConfigBinary, Market: m, Cfg: MarketCfg{Quote: bbQuote, Lot: 1, MinQty: 1,
			MaxQty: 1_000_000, MakerFee: 1_000, TakerFee: 2_000}})
		g.apply(Command{Kind: KindActivate, Market: m})
	}
	for i := 0; i < bbUsers; i++ {
		g.apply(Command{Kind: KindSpotDeposit, User: bbUser(i), Asset: bbQuote, Amount: 1_000_000_000,
			Key: mkKey("f" + itoa(i))})
	}
	// every user holds YES and NO shares in both markets: two rounds of mints at 50/50
	for m := MarketID(1); m <= 2; m++ {
		for round := 0; round < 2; round++ {
			for i := 0; i < bbUsers; i += 2 {
				a, b := bbUser(i), bbUser(i+1)
				if round == 1 {
					a, b = b, a
				}
				g.apply(Command{Kind: KindPlaceOrder, User: a, Market: m, Side: Buy, Type: Limit, TIF: GTC,
					Price: 50 * bbTick, Qty: 200, Flags: uint8(OutcomeYes)})
				g.apply(Command{Kind: KindPlaceOrder, User: b, Market: m, Side: Buy, Type: Limit, TIF: GTC,
					Price: 50 * bbTick, Qty: 200, Flags: uint8(OutcomeNo)})
			}
		}
	}
	// the books: ~1k resting orders each, both outcomes on both sides
	for i := 0; len(g.live) < 2*bbTargetLive; i++ {
		var c Command
		g.next(&c)
		if c.Kind == KindPlaceOrder && c.TIF == GTC {
			off := Price(1 + g.r.IntN(30))
			px := 50 - off
			if c.Side == Sell {
				px = 50 + off
			}
			c.Price = max(px, 1) * bbTick
			if r := g.apply(c); r[len(r)-1].Code != OK {
				continue
			}
		}
	}
	p := g.p
	w := &benchWorkload{snap: p.AppendSnapshot(nil), cmds: make([]Command, n), startRes: p.orderIdx.len()}
	for i := range w.cmds {
		g.next(&w.cmds[i])
		g.seq++
		w.cmds[i].Seq, w.cmds[i].Time = g.seq, int64(g.seq)*1000
		ev := p.Apply(&w.cmds[i])
		for j := range ev {
			if ev[j].Kind == EvTrade {
				w.trades++
			}
		}
		if ev[len(ev)-1].Code != OK {
			w.rejected++
		}
		g.observe(ev)
	}
	w.endHash, w.endRes = p.StateHash(), p.orderIdx.len()
	return w
}

// TestBinaryBenchStream checks the binary benchmark's premise: it replays
// from its snapshot to the same state, keeps ~1k orders per book, has all
// three fill families, few refusals, and allocates nothing per command.
func TestBinaryBenchStream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 256k-command binary benchmark stream")
	}
	w := binaryWorkloadOnce()
	p := mustRestore(t, w.snap)
	var kinds [5]int
	for i := range w.cmds {
		ev := p.Apply(&w.cmds[i])
		for j := range ev {
			if ev[j].Kind == EvTrade {
				kinds[ev[j].Flags]++
			}
		}
	}
	if h := p.StateHash(); h != w.endHash {
		t.Fatalf("replayed stream ends at %s, generation at %s", h, w.endHash)
	}
	if v := p.CheckInvariants(); len(v) != 0 {
		t.Fatalf("invariants: %+v", v)
	}
	t.Logf("resting %d -> %d, %.2f trades/command (transfer YES %d, NO %d, mint %d, burn %d), %.2f%% rejected",
		w.startRes, w.endRes, float64(w.trades)/float64(len(w.cmds)), kinds[1], kinds[2], kinds[3], kinds[4],
		100*float64(w.rejected)/float64(len(w.cmds)))
	if w.endRes < 1_000 || w.endRes > 4_000 {
		t.Errorf("the books drifted: %d -> %d resting orders", w.startRes, w.endRes)
	}
	for k := 1; k <= 4; k++ {
		if kinds[k] < len(w.cmds)/100 {
			t.Errorf("fill kind %v: only %d", FillKind(k), kinds[k])
		}
	}
	if w.rejected > len(w.cmds)/20 {
		t.Errorf("%d of %d rejected", w.rejected, len(w.cmds))
	}
	skipAllocsUnderRace(t)
	q := mustRestore(t, w.snap)
	for i := 0; i < 20_000; i++ { // warm: the event buffer and pool at their working size
		q.Apply(&w.cmds[i])
	}
	i := 20_000
	before := mallocs()
	for ; i < 120_000; i++ {
		q.Apply(&w.cmds[i])
	}
	if a := mallocs() - before; a > 100 {
		t.Errorf("%d allocations in 100k binary commands", a)
	}
}

// BenchmarkProcessorBinary applies the binary stream; one op is one command.
func BenchmarkProcessorBinary(b *testing.B) {
	w := binaryWorkloadOnce()
	p := mustRestore(b, w.snap)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for n := 0; n < b.N; n++ {
		if i == len(w.cmds) {
			b.StopTimer()
			p, i = mustRestore(b, w.snap), 0
			b.StartTimer()
		}
		p.Apply(&w.cmds[i])
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
}

var settleW struct {
	once sync.Once
	snap []byte
	seq  Seq
}

// settleSnapshot is a state with one binary market of 1M positions
// (500k mints between 1M users), resolved YES, its orders gone.
func settleSnapshot(tb testing.TB) ([]byte, Seq) {
	settleW.once.Do(func() {
		p := New(Config{})
		var seq Seq
		apply := func(c Command) {
			seq++
			c.Seq, c.Time = seq, int64(seq)
			if ev := p.Apply(&c); ev[len(ev)-1].Code != OK {
				tb.Fatalf("setup %v: %v", c.Kind, ev[len(ev)-1].Code)
			}
		}
		apply(Command{Kind: KindConfigAsset, Asset: 1, BaseScale: 2})
		apply(Command{Kind: KindConfigBinary, Market: 1, Cfg: MarketCfg{Quote: 1, Lot: 1, MinQty: 1, MaxQty: 1000,
			MakerFee: 1_000, TakerFee: 2_000}})
		apply(Command{Kind: KindActivate, Market: 1})
		const n = 1_000_000
		for u := UserID(1); u <= n; u++ {
			apply(Command{Kind: KindSpotDeposit, User: u, Asset: 1, Amount: 100_000, Key: mkKey("d" + itoa(int(u)))})
		}
		for u := UserID(1); u <= n; u += 2 {
			apply(Command{Kind: KindPlaceOrder, User: u, Market: 1, Side: Buy, Type: Limit, TIF: GTC, Price: 60,
				Qty: 10, Flags: uint8(OutcomeYes)})
			apply(Command{Kind: KindPlaceOrder, User: u + 1, Market: 1, Side: Buy, Type: Limit, TIF: GTC, Price: 40,
				Qty: 10, Flags: uint8(OutcomeNo)})
		}
		apply(Command{Kind: KindResolve, Market: 1, Flags: uint8(OutcomeYes)})
		settleW.snap, settleW.seq = p.AppendSnapshot(nil), seq
	})
	return settleW.snap, settleW.seq
}

// BenchmarkSettle1MPositions settles a market of 1M positions in slices of
// MaxSettleSlice; one op is the whole settlement. It reports the time per
// slice (the longest the processor is busy with one command) and in total.
func BenchmarkSettle1MPositions(b *testing.B) {
	snap, seq := settleSnapshot(b)
	var slices int
	var worst float64
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		p := mustRestore(b, snap)
		s := seq
		b.StartTimer()
		for done := false; !done; {
			s++
			c := Command{Kind: KindSettle, Seq: s, Time: int64(s), Market: 1, Qty: MaxSettleSlice}
			t0 := time.Now()
			ev := p.Apply(&c)
			if d := float64(time.Since(t0).Nanoseconds()); d > worst {
				worst = d
			}
			slices++
			done = ev[len(ev)-2].Kind == EvMarketSettled
			if ev[len(ev)-1].Code != OK {
				b.Fatalf("settle: %v", ev[len(ev)-1].Code)
			}
		}
		if v, _ := p.Binary(1); v.Status != MarketSettled || v.Reserve != 0 {
			b.Fatalf("not settled: %+v", v)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(slices), "ns/slice")
	b.ReportMetric(worst, "worst-ns/slice")
	b.ReportMetric(float64(slices)/float64(b.N), "slices")
}

// BenchmarkBinaryVsMixed runs the binary and the mixed streams in
// alternating chunks of 8k commands and reports the median over the chunk
// pairs of binary throughput / mixed throughput ("ratio"): on a shared,
// loaded machine the two see the same load, which separate benchmark runs
// do not. One op is one chunk pair.
func BenchmarkBinaryVsMixed(b *testing.B) {
	const chunk = 8_192
	mw, bw := benchWorkloadOnce(), binaryWorkloadOnce()
	mp, bp := mustRestore(b, mw.snap), mustRestore(b, bw.snap)
	mi, bi := 0, 0
	var ratios []float64
	run := func(p **Processor, w *benchWorkload, i *int) time.Duration {
		if *i+chunk > len(w.cmds) {
			*p, *i = mustRestore(b, w.snap), 0
		}
		t0 := time.Now()
		for k := 0; k < chunk; k++ {
			(*p).Apply(&w.cmds[*i])
			*i++
		}
		return time.Since(t0)
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		dm := run(&mp, mw, &mi)
		db := run(&bp, bw, &bi)
		ratios = append(ratios, float64(dm)/float64(db))
	}
	b.StopTimer()
	sort.Float64s(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
}
