package core_test

// bookshape_bench_test.go measures the full processor against a bare FIFO
// book (bookshape.Book) on the public-benchmark-shaped flow of package
// bookshape (issue 25): the same messages, in the same run, with 8k
// accounts and with one account per order (1M), in three scenarios. The
// processor does everything it does in production — validation, freezing,
// fees, settlement, events, the per-command checks — and the book only
// matching, so their ratio is what the risk checks and bookkeeping cost.
// The adapter and the run are package bench's (bench/shape.go), shared with
// `bench processor --shape book`.

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/bench/bookshape"
	"github.com/ubscore/ubscore/core"
)

var shapeCache struct {
	sync.Mutex
	w map[bench.ShapeConfig]*bench.ShapeWorkload
}

func shapeLoad(tb testing.TB, cfg bench.ShapeConfig) *bench.ShapeWorkload {
	shapeCache.Lock()
	defer shapeCache.Unlock()
	if w, ok := shapeCache.w[cfg]; ok {
		return w
	}
	w, err := bench.NewShapeWorkload(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if shapeCache.w == nil {
		shapeCache.w = map[bench.ShapeConfig]*bench.ShapeWorkload{}
	}
	shapeCache.w[cfg] = w
	return w
}

// TestBareBookMatchesProcessor checks the benchmark's premise: on the same
// messages the bare book and the processor make the same trades (maker,
// taker, price, quantity, in order) and refuse the same stale cancels and
// modifies, every new order is accepted with the id the flow gave it, the
// invariants hold at the end, and the flow trades as its shape says.
func TestBareBookMatchesProcessor(t *testing.T) {
	for _, sc := range bookshape.Scenarios {
		for _, accounts := range []int{8_000, bench.ShapeOneEach} {
			t.Run(fmt.Sprintf("%v/%d", sc, accounts), func(t *testing.T) {
				orders := 50_000
				if accounts >= bench.ShapeOneEach {
					orders = 20_000 // one account each: the setup is the cost
				}
				w := shapeLoad(t, bench.ShapeConfig{Scenario: sc, Orders: orders, Accounts: accounts, Seed: bench.ShapeSeed})
				bb := bookshape.NewBook(orders)
				bb.Recording = true
				for i := range w.Msgs {
					bb.Apply(&w.Msgs[i])
				}
				p, err := w.Start()
				if err != nil {
					t.Fatal(err)
				}
				var got []bookshape.Trade
				rejects, takers := 0, 0
				w.Apply(p, 0, w.Msgs, func(m *bookshape.Msg, ev []core.Event) {
					res := &ev[len(ev)-1]
					if res.Code != core.OK {
						if m.Kind == bookshape.New {
							t.Fatalf("order %d rejected: %v", m.ID, res.Code)
						}
						rejects++
					}
					if m.Kind == bookshape.New && res.OrderID != core.OrderID(m.ID) {
						t.Fatalf("order %d got id %d", m.ID, res.OrderID)
					}
					traded := false
					for j := range ev {
						if e := &ev[j]; e.Kind == core.EvTrade {
							got = append(got, bookshape.Trade{Maker: uint32(e.OrderID), Taker: uint32(e.OtherOrderID),
								Price: int64(e.Price), Qty: int64(e.Qty)})
							traded = true
						}
					}
					if traded && m.Kind == bookshape.New {
						takers++
					}
				})
				if len(got) != len(bb.Record) {
					t.Fatalf("processor made %d trades, bare book %d", len(got), len(bb.Record))
				}
				for i := range got {
					if got[i] != bb.Record[i] {
						t.Fatalf("trade %d: processor %+v, bare book %+v", i, got[i], bb.Record[i])
					}
				}
				if rejects != bb.Rejects {
					t.Fatalf("processor refused %d cancels/modifies, bare book %d", rejects, bb.Rejects)
				}
				if v := p.CheckInvariants(); len(v) != 0 {
					t.Fatalf("invariants: %+v", v)
				}
				c := bookshape.Count(w.Msgs)
				share := float64(takers) / float64(c.New)
				t.Logf("%d msgs: %d new (%d IOC), %d cancels, %d modifies; %d trades, %.1f%% of new orders trade, %d stale",
					len(w.Msgs), c.New, c.IOC, c.Cancel, c.Modify, len(got), 100*share, rejects)
				if share < 0.02 || share > 0.30 {
					t.Errorf("%.1f%% of new orders trade, want 2..30%% (normal ~6%%)", 100*share)
				}
			})
		}
	}
}

// BenchmarkProcessorBookShape runs each scenario's ~2.1M messages through
// the processor and through the bare book, one op being one whole run of
// each (bench.RunShape: they take turns by segments of 64k messages, each
// timed on the thread's CPU clock, so a neighbour's load on this shared
// machine falls on both alike and time spent descheduled counts for
// neither). Metrics: proc-msgs/s and book-msgs/s, ratio (processor over
// book), proc-allocs/msg (every allocation during the processor's turns,
// heap growth of a fresh processor included) and steady-allocs/msg (the
// same after each run's first 65,536 messages: only a new peak of the book
// grows a table).
func BenchmarkProcessorBookShape(b *testing.B) {
	for _, sc := range bookshape.Scenarios {
		for _, accounts := range []int{8_000, bench.ShapeOneEach} {
			b.Run(fmt.Sprintf("%v/accounts=%dk", sc, accounts/1000), func(b *testing.B) {
				w := shapeLoad(b, bench.ShapeConfig{Scenario: sc, Accounts: accounts, Seed: bench.ShapeSeed})
				var sum bench.ShapeResult
				b.ResetTimer()
				for n := 0; n < b.N; n++ {
					r, err := bench.RunShape(w, 1)
					if err != nil {
						b.Fatal(err)
					}
					sum.ProcSeconds += r.ProcSeconds
					sum.BookSeconds += r.BookSeconds
					sum.ProcAllocs += r.ProcAllocs
					sum.SteadyAllocs += r.SteadyAllocs
				}
				msgs := float64(b.N) * float64(len(w.Msgs))
				proc, book := msgs/sum.ProcSeconds, msgs/sum.BookSeconds
				b.ReportMetric(proc, "proc-msgs/s")
				b.ReportMetric(book, "book-msgs/s")
				b.ReportMetric(proc/book, "ratio")
				b.ReportMetric(float64(sum.ProcAllocs)/msgs, "proc-allocs/msg")
				b.ReportMetric(float64(sum.SteadyAllocs)/(msgs-float64(b.N)*(1<<16)), "steady-allocs/msg")
			})
		}
	}
}
