// Package bookshape generates the order flow of a public matching-engine
// benchmark's shape (issue 25): one market, about two million messages built
// around a million new limit orders, dense order ids, and the lifecycle a
// real venue sees — most orders cancelled soon after they rest, some
// modified (repriced one tick toward the other side, so they can cross), a
// few cancels and modifies arriving after their order is gone.
//
// It is a pure function of its Config (the seed included): the same Config
// gives the same messages on every machine, and it imports nothing of this
// module, so core's tests and cmd/bench can both use it. Prices are integer
// ticks; quantities are whole lots.
//
// The model, per new order i (one per unit of time):
//
//	mid(i)    a coarse random walk (knots every 50k orders, linear between;
//	          ~2% of the start price over the run, tens of thousands of ticks
//	          in WideSwing) plus a jitter of about a tick around it; in
//	          FlashCrash it collapses to 40% of itself and recovers
//	price     passive on its own side of the mid, at a depth drawn from a
//	          power law (alpha 2.23, with a hump ~8 ticks out) capped at
//	          MaxDepth, so prices span a band of ~2*MaxDepth ticks; a few are
//	          priced through the mid (aggressive)
//	lifetime  exponential, its mean growing with the square of the depth
//	          (quotes at the touch are renewed within tens of orders, deep
//	          ones stand for thousands): a GTC order is cancelled at
//	          i+lifetime and, about one in five, modified before that
//
// With seed 23 and the default million orders, about 6% of new orders trade
// in Normal (15% in WideSwing, 12% in FlashCrash, whose trends sweep the
// book); the book holds ~1k orders on ~440 levels (Normal).
//
// Cancels and modifies are merged with the new orders by time (stable), so
// ids stay dense 1..Orders in message order: the core, which numbers accepted
// orders from 1, gives the k-th new order id k.
package bookshape

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Kind of a message.
type Kind uint8

const (
	New    Kind = 1 // a limit order: Side, IOC, Price, Qty (1..100); ID = its dense id
	Cancel Kind = 2 // cancel order ID (stale when it is no longer resting)
	Modify Kind = 3 // order ID to Price with a new absolute total quantity Qty
)

// Side values equal core.Side's (Buy 1, Sell 2), so adapters copy them.
const (
	Buy  uint8 = 1
	Sell uint8 = 2
)

// Msg is one message, 24 bytes: two million fit in 48 MB.
type Msg struct {
	Kind  Kind
	Side  uint8 // Buy or Sell (also on cancels and modifies: the order's side)
	IOC   bool  // New only: immediate-or-cancel (else GTC)
	Qty   uint32
	ID    uint32 // order id, dense from 1 in the order of the New messages
	Price int64  // ticks, >= 1 (New, Modify)
}

// Scenario is the shape of the mid-price path.
type Scenario uint8

const (
	Normal     Scenario = iota // a routine session: the mid drifts ~2% of its start
	WideSwing                  // the mid walks tens of thousands of ticks
	FlashCrash                 // a normal drift, then a collapse to 40% and a recovery
)

// Scenarios lists every scenario, in report order.
var Scenarios = []Scenario{Normal, WideSwing, FlashCrash}

func (s Scenario) String() string {
	switch s {
	case Normal:
		return "normal"
	case WideSwing:
		return "wide-swing"
	case FlashCrash:
		return "flash-crash"
	}
	return "unknown"
}

// ParseScenario is the inverse of String.
func ParseScenario(name string) (Scenario, bool) {
	for _, s := range Scenarios {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

// Shape constants of the flow (the benchmark's calibration, rounded).
const (
	DefaultOrders = 1_000_000 // new orders per run (~2.1M messages)
	MaxOrders     = 1 << 31   // ids must fit a uint32
	MaxDepth      = 15_000    // ticks from the mid: prices span a ~30k-tick band
	MaxQty        = 100       // quantities are uniform in 1..MaxQty
	StartMid      = 33_504    // ticks (normal); WideSwing and FlashCrash start higher
	iocShare      = 0.10      // of new orders
	modifyShare   = 0.19      // of GTC orders: modified once before their cancel
	cancelShare   = 1.00      // of GTC orders: cancelled at the end of their lifetime
	dupCancel     = 0.02      // of cancels: sent again after the order is gone
	staleModify   = 0.05      // of modifies: arrive after the order's cancel
	repriceShare  = 0.80      // of modifies: one tick toward the other side
	aggrGTC       = 0.025     // of GTC orders: priced through the mid
	aggrIOC       = 0.25      // of IOC orders: priced through the mid
	alpha         = 2.23      // power-law exponent of the depth profile
	humpShare     = 0.25      // of orders: near the depth hump instead
	humpCenter    = 8.0       // ticks from the mid
	meanLife      = 20.0      // new-order arrivals: the mean lifetime of an order one tick from the mid ...
	swingLife     = 5.0       // ... in WideSwing, where quotes are renewed faster
	maxMeanLife   = 200_000.0 // the mean lifetime grows with the square of the depth up to this
)

// Config selects a workload. Orders 0 means DefaultOrders.
type Config struct {
	Seed     uint64
	Orders   int
	Scenario Scenario
}

// timed is a message with its place on the timeline: new order i at i<<20,
// its later messages at i<<20 + offsets, ties broken by generation order.
type timed struct {
	at  int64
	gen uint32
	msg Msg
}

// Generate returns the messages of cfg in arrival order.
func Generate(cfg Config) []Msg {
	n := cfg.Orders
	if n <= 0 {
		n = DefaultOrders
	}
	if n >= MaxOrders {
		panic("bookshape: too many orders for uint32 ids")
	}
	r := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Scenario)+0x6b6f6f62))
	w := newWalk(cfg.Scenario, n, r)
	out := make([]timed, 0, n*21/10+16)
	add := func(at int64, m Msg) {
		out = append(out, timed{at: at, gen: uint32(len(out)), msg: m})
	}
	const unit = 1 << 20 // time units per new-order arrival
	for i := 0; i < n; i++ {
		mid := w.step()
		side := Buy
		if r.IntN(2) == 1 {
			side = Sell
		}
		ioc := r.Float64() < iocShare
		depth := drawDepth(r)
		aggr := aggrGTC
		if ioc {
			aggr = aggrIOC
		}
		off := depth // distance on the order's own side of the mid
		if r.Float64() < aggr {
			off = -(1 + r.Int64N(3)) // 1..3 ticks through the mid
		}
		price := mid - off
		if side == Sell {
			price = mid + off
		}
		id := uint32(i + 1)
		at := int64(i) * unit
		add(at, Msg{Kind: New, Side: side, IOC: ioc, Qty: uint32(1 + r.IntN(MaxQty)), ID: id, Price: max(price, 1)})
		if ioc {
			continue
		}
		qty := out[len(out)-1].msg.Qty
		life := min(w.life*float64(depth*depth), maxMeanLife) * r.ExpFloat64()
		end := at + 1 + int64(life*unit)
		if r.Float64() < modifyShare {
			np := price
			if r.Float64() < repriceShare {
				np = price + 1 // toward the asks
				if side == Sell {
					np = price - 1
				}
			}
			mod := Msg{Kind: Modify, Side: side, ID: id, Price: max(np, 1), Qty: qty + 1}
			if r.Float64() < staleModify {
				add(end+1+r.Int64N(unit), mod) // after its cancel: stale
			} else {
				add(at+1+int64(float64(end-at-1)*(0.1+0.8*r.Float64())), mod)
			}
		}
		if r.Float64() < cancelShare {
			add(end, Msg{Kind: Cancel, Side: side, ID: id})
			if r.Float64() < dupCancel {
				add(end+1+r.Int64N(unit), Msg{Kind: Cancel, Side: side, ID: id})
			}
		}
	}
	slices.SortFunc(out, func(a, b timed) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return int(a.gen) - int(b.gen)
	})
	msgs := make([]Msg, len(out))
	for i := range out {
		msgs[i] = out[i].msg
	}
	return msgs
}

// drawDepth is a new order's distance from the mid in ticks, >= 1: a power
// law (P(d > x) ~ x^(1-alpha)) with a Gaussian hump near humpCenter, capped
// at MaxDepth.
func drawDepth(r *rand.Rand) int64 {
	if r.Float64() < humpShare {
		return max(1, int64(math.Round(humpCenter+3*r.NormFloat64())))
	}
	u := 1 - r.Float64() // (0, 1]
	d := math.Pow(u, -1/(alpha-1))
	if d >= MaxDepth {
		return MaxDepth
	}
	return int64(d)
}

// walk is the mid-price path, one step per new order, in ticks: a fine
// random walk of ~0.67 ticks a step (2% of StartMid over DefaultOrders
// steps: the normal session), plus, for WideSwing, a coarse walk that moves
// by thousands of ticks between knots macroStep orders apart (linear in
// between, so the mid trends rather than jitters), and, for FlashCrash, a
// deterministic collapse and recovery (crashFactor).
type walk struct {
	s        Scenario
	n, i     int
	start    float64
	fine     float64 // the fine walk's displacement
	from, to float64 // the coarse walk's current segment (WideSwing)
	r        *rand.Rand
	life     float64 // the mean lifetime of an order one tick from the mid
}

const (
	fineSD      = 0.14            // ticks per step: the mid's jitter ...
	fineRevert  = 0.01            // ... pulled back to the coarse path (about one tick either side of it)
	macroStep   = 50_000          // orders between the coarse walk's knots
	normalSwing = 0.02 * StartMid // ticks: the coarse walk's typical excursion over DefaultOrders (Normal, FlashCrash)
	wideSwing   = 30_000.0        // ticks: the same for WideSwing
	swingStart  = 60_000          // ticks: where WideSwing and FlashCrash start
)

func newWalk(s Scenario, n int, r *rand.Rand) *walk {
	w := &walk{s: s, n: n, r: r, start: StartMid, life: meanLife}
	if s != Normal {
		w.start = swingStart
	}
	if s == WideSwing {
		w.life = swingLife
	}
	return w
}

// step advances the walk and returns the mid for the next order.
func (w *walk) step() int64 {
	w.fine += -fineRevert*w.fine + fineSD*w.r.NormFloat64()
	mid := w.start + w.fine
	k := w.i % macroStep
	if k == 0 {
		swing := normalSwing
		if w.s == WideSwing {
			swing = wideSwing
		}
		w.from = w.to
		w.to += swing / math.Sqrt(DefaultOrders/macroStep) * w.r.NormFloat64()
		if lo := -w.start * 3 / 4; w.to < lo { // reflect: the mid stays above a quarter of its start
			w.to = 2*lo - w.to
		}
	}
	mid += w.from + (w.to-w.from)*float64(k)/macroStep
	if w.s == FlashCrash {
		mid *= crashFactor(float64(w.i) / float64(w.n))
	}
	w.i++
	return int64(math.Round(mid))
}

// crashFactor scales the mid during a flash crash at run fraction f: 1
// before 40% of the run, down to 0.4 by 44%, held until 50%, back to 1 by 70%.
func crashFactor(f float64) float64 {
	switch {
	case f < 0.40:
		return 1
	case f < 0.44:
		return 1 - 0.6*(f-0.40)/0.04
	case f < 0.50:
		return 0.4
	case f < 0.70:
		return 0.4 + 0.6*(f-0.50)/0.20
	}
	return 1
}

// Counts summarizes a message stream.
type Counts struct {
	New, IOC, Cancel, Modify int
	MinPrice, MaxPrice       int64
}

// Count tallies msgs.
func Count(msgs []Msg) Counts {
	c := Counts{MinPrice: math.MaxInt64}
	for i := range msgs {
		m := &msgs[i]
		switch m.Kind {
		case New:
			c.New++
			if m.IOC {
				c.IOC++
			}
		case Cancel:
			c.Cancel++
		case Modify:
			c.Modify++
		}
		if m.Kind != Cancel {
			c.MinPrice, c.MaxPrice = min(c.MinPrice, m.Price), max(c.MaxPrice, m.Price)
		}
	}
	return c
}
