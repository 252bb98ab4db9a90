package core

// bookshape_bench_test.go measures the full processor against the bare FIFO
// book (barebook_test.go) on the public-benchmark-shaped flow of package
// bookshape (issue 25): the same messages, in the same run, with 8k accounts
// and with one account per order (1M), in three scenarios. The processor
// does everything it does in production — validation, freezing, fees,
// settlement, events, the per-command checks — and the book does only
// matching, so their ratio is what the risk and bookkeeping cost.

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/bench/bookshape"
)

// The shape market: prices in ticks and quantities in lots, so a notional
// is price*qty quote Units; fees are charged (0.1% maker, 0.2% taker).
const (
	shapeMarket MarketID = 1
	shapeBase   AssetID  = 1
	shapeQuote  AssetID  = 2
	shapeChunk           = 1024 // commands converted (untimed) per batch applied (timed)
)

var shapeCfg = MarketCfg{Base: shapeBase, Quote: shapeQuote, BaseScale: 0, Tick: 1, Lot: 1, MinQty: 1,
	MaxQty: 1_000_000, MakerFee: 1_000, TakerFee: 2_000}

// shapeOwner is the account of order id on side: with accounts >= the
// order count every order has its own account (user id = order id), else
// buyers and sellers are two disjoint halves of the accounts, so no order
// ever meets one of its own user (no self-trade prevention, which the bare
// book does not have).
func shapeOwner(side uint8, id uint32, accounts int) UserID {
	if accounts >= 1_000_000 {
		return UserID(id)
	}
	half := uint32(accounts / 2)
	u := 1 + id%half
	if side == bookshape.Sell {
		u += half
	}
	return UserID(u)
}

// shapeSetup configures the market and funds the accounts: every user
// gets both assets, far more than its orders can hold.
func shapeSetup(orders, accounts int) *Processor {
	p := New(Config{})
	seq := Seq(0)
	apply := func(c Command) {
		seq++
		c.Seq = seq
		if ev := p.Apply(&c); ev[len(ev)-1].Code != OK {
			panic(fmt.Sprintf("shape setup: %v rejected: %v", c.Kind, ev[len(ev)-1].Code))
		}
	}
	apply(Command{Kind: KindConfigAsset, Asset: shapeBase})
	apply(Command{Kind: KindConfigAsset, Asset: shapeQuote})
	apply(Command{Kind: KindConfigMarket, Market: shapeMarket, Cfg: shapeCfg})
	users := accounts
	if accounts >= 1_000_000 {
		users = orders
	}
	for u := 1; u <= users; u++ {
		for _, a := range [...]AssetID{shapeBase, shapeQuote} {
			var k Key
			copy(k[:], strconv.AppendUint([]byte{'d', '0' + byte(a), '-'}, uint64(u), 10))
			apply(Command{Kind: KindSpotDeposit, User: UserID(u), Asset: a, Amount: 1 << 40, Key: k})
		}
	}
	return p
}

// shapeCommand turns message m into command c (the adapter: untimed).
func shapeCommand(m *bookshape.Msg, accounts int, seq Seq, c *Command) {
	*c = Command{Seq: seq, Market: shapeMarket, User: shapeOwner(m.Side, m.ID, accounts)}
	switch m.Kind {
	case bookshape.New:
		c.Kind, c.Side, c.Type, c.TIF, c.Price, c.Qty = KindPlaceOrder, Side(m.Side), Limit, GTC, Price(m.Price), Units(m.Qty)
		if m.IOC {
			c.TIF = IOC
		}
	case bookshape.Cancel:
		c.Kind, c.OrderID = KindCancelOrder, OrderID(m.ID)
	case bookshape.Modify:
		c.Kind, c.OrderID, c.Price, c.Qty = KindModifyOrder, OrderID(m.ID), Price(m.Price), Units(m.Qty)
	}
}

// shapeBuf holds the commands of one chunk (one buffer for the process:
// 200 KB would not stay on the stack, and allocating it per call would count
// against the processor).
var shapeBuf [shapeChunk]Command

// shapeRun applies msgs to p (whose next seq is from), converting them in
// chunks, and returns the time spent inside Apply. each, if not nil, sees
// every message's events.
func shapeRun(p *Processor, msgs []bookshape.Msg, accounts int, from Seq, each func(*bookshape.Msg, []Event)) time.Duration {
	buf := &shapeBuf
	var spent time.Duration
	seq := from
	for off := 0; off < len(msgs); off += shapeChunk {
		part := msgs[off:min(off+shapeChunk, len(msgs))]
		for i := range part {
			shapeCommand(&part[i], accounts, seq+Seq(i), &buf[i])
		}
		t0 := shapeClock()
		for i := range part {
			ev := p.Apply(&buf[i])
			if each != nil {
				each(&part[i], ev)
			}
		}
		spent += shapeClock() - t0
		seq += Seq(len(part))
	}
	return spent
}

// shapeWorkload is one scenario's messages and its funded starting state.
type shapeWorkload struct {
	msgs []bookshape.Msg
	snap []byte // state after setup
	from Seq    // seq of the first message
}

var shapeCache struct {
	sync.Mutex
	msgs map[bookshape.Config][]bookshape.Msg
	w    map[[2]int]*shapeWorkload
}

func shapeMsgs(cfg bookshape.Config) []bookshape.Msg {
	shapeCache.Lock()
	defer shapeCache.Unlock()
	if shapeCache.msgs == nil {
		shapeCache.msgs = map[bookshape.Config][]bookshape.Msg{}
	}
	m, ok := shapeCache.msgs[cfg]
	if !ok {
		m = bookshape.Generate(cfg)
		shapeCache.msgs[cfg] = m
	}
	return m
}

func shapeLoad(sc bookshape.Scenario, orders, accounts int) *shapeWorkload {
	msgs := shapeMsgs(bookshape.Config{Seed: 23, Orders: orders, Scenario: sc})
	p := shapeSetup(orders, accounts)
	return &shapeWorkload{msgs: msgs, snap: p.AppendSnapshot(nil), from: p.LastSeq() + 1}
}

// TestBareBookMatchesProcessor checks the benchmark's premise: on the same
// messages the bare book and the processor make the same trades (maker,
// taker, price, quantity, in order), every new order is accepted with the
// id the flow gave it, and the flow trades and cancels as its shape says.
func TestBareBookMatchesProcessor(t *testing.T) {
	for _, sc := range bookshape.Scenarios {
		for _, accounts := range []int{8_000, 1_000_000} {
			t.Run(fmt.Sprintf("%v/%d", sc, accounts), func(t *testing.T) {
				orders := 50_000
				if accounts >= 1_000_000 {
					orders = 20_000 // one account each: the setup is the cost
				}
				w := shapeLoad(sc, orders, accounts)
				bb := newBareBook(orders)
				bb.recording = true
				for i := range w.msgs {
					bb.apply(&w.msgs[i])
				}
				p := mustRestore(t, w.snap)
				var got []bareTrade
				rejects, takers := 0, 0
				shapeRun(p, w.msgs, accounts, w.from, func(m *bookshape.Msg, ev []Event) {
					res := &ev[len(ev)-1]
					if res.Code != OK {
						if m.Kind == bookshape.New {
							t.Fatalf("order %d rejected: %v", m.ID, res.Code)
						}
						rejects++
					}
					if m.Kind == bookshape.New && res.OrderID != OrderID(m.ID) {
						t.Fatalf("order %d got id %d", m.ID, res.OrderID)
					}
					traded := false
					for j := range ev {
						if e := &ev[j]; e.Kind == EvTrade {
							got = append(got, bareTrade{uint32(e.OrderID), uint32(e.OtherOrderID), int64(e.Price), int64(e.Qty)})
							traded = true
						}
					}
					if traded && m.Kind == bookshape.New {
						takers++
					}
				})
				if len(got) != len(bb.record) {
					t.Fatalf("processor made %d trades, bare book %d", len(got), len(bb.record))
				}
				for i := range got {
					if got[i] != bb.record[i] {
						t.Fatalf("trade %d: processor %+v, bare book %+v", i, got[i], bb.record[i])
					}
				}
				if rejects != bb.rejects {
					t.Fatalf("processor rejected %d cancels/modifies, bare book %d", rejects, bb.rejects)
				}
				if v := p.CheckInvariants(); len(v) != 0 {
					t.Fatalf("invariants: %+v", v)
				}
				c := bookshape.Count(w.msgs)
				t.Logf("%d msgs: %d new (%d IOC), %d cancels, %d modifies; %d trades, %.1f%% of new orders trade, %d stale",
					len(w.msgs), c.New, c.IOC, c.Cancel, c.Modify, len(got), 100*float64(takers)/float64(c.New), rejects)
				if share := float64(takers) / float64(c.New); share < 0.02 || share > 0.30 {
					t.Errorf("%.1f%% of new orders trade, want 2..30%% (normal ~6%%)", 100*share)
				}
			})
		}
	}
}

// BenchmarkProcessorBookShape runs each scenario's ~2.1M messages through
// the processor and through the bare book, one op being one whole run of
// each. They take turns by segments of shapeSegment messages (each timed
// alone), so a neighbour's load on this shared machine falls on both alike,
// and the time is the benchmark thread's own (shapeClock: CPU time on
// Linux), so time spent descheduled counts for neither. Metrics:
// proc-msgs/s and book-msgs/s (messages per second inside Apply / inside
// the book), ratio (processor over book), proc-allocs/msg (every allocation
// during the processor's turns, heap growth included).
func BenchmarkProcessorBookShape(b *testing.B) {
	for _, sc := range bookshape.Scenarios {
		for _, accounts := range []int{8_000, 1_000_000} {
			name := fmt.Sprintf("%v/accounts=%dk", sc, accounts/1000)
			b.Run(name, func(b *testing.B) { benchShape(b, sc, accounts) })
		}
	}
}

// shapeSegment is how many messages each side runs per turn: ~10 ms of
// work, far longer than either needs to warm its caches again.
const shapeSegment = 1 << 16

func benchShape(b *testing.B, sc bookshape.Scenario, accounts int) {
	w := shapeLoad(sc, bookshape.DefaultOrders, accounts)
	bb := newBareBook(bookshape.DefaultOrders)
	var procT, bookT time.Duration
	var allocs uint64
	var ms runtime.MemStats
	runtime.LockOSThread() // shapeClock reads this thread's clock
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		p := mustRestore(b, w.snap)
		bb.reset()
		runtime.GC()
		b.StartTimer()
		for off := 0; off < len(w.msgs); off += shapeSegment {
			seg := w.msgs[off:min(off+shapeSegment, len(w.msgs))]
			b.StopTimer()
			runtime.ReadMemStats(&ms)
			a0 := ms.Mallocs
			b.StartTimer()
			procT += shapeRun(p, seg, accounts, w.from+Seq(off), nil)
			b.StopTimer()
			runtime.ReadMemStats(&ms)
			allocs += ms.Mallocs - a0
			b.StartTimer()
			t0 := shapeClock()
			for i := range seg {
				bb.apply(&seg[i])
			}
			bookT += shapeClock() - t0
		}
	}
	msgs := float64(b.N) * float64(len(w.msgs))
	proc, book := msgs/procT.Seconds(), msgs/bookT.Seconds()
	b.ReportMetric(proc, "proc-msgs/s")
	b.ReportMetric(book, "book-msgs/s")
	b.ReportMetric(proc/book, "ratio")
	b.ReportMetric(float64(allocs)/msgs, "proc-allocs/msg")
}
