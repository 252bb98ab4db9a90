// Package binaryshape generates the binary YES/NO market workload (issue
// 22) with the shape of core's BenchmarkProcessorMixed: Users funded users
// (10k), two binary markets whose books hold about TargetLive (1k) resting
// orders each, and a steady stream of
//
//	60%  GTC limits on a random outcome and side, passive 1..30 ticks behind
//	     50, or (8% of them, 30% when a book is over its target, 2% under
//	     three quarters of it) crossing up to 2 ticks through the opposite best
//	30%  cancels of a random live order
//	 8%  IOC limits crossing up to 2 ticks through the opposite best
//	 1%  limits off the tick (refused: INVALID_PRICE)
//	 1%  sells of more shares than anyone holds (refused: INSUFFICIENT_SHARES)
//
// A sell is only drawn for shares the user holds free (else it becomes a
// buy), so the fills are a mix of all four kinds: mint (BUY YES x BUY NO),
// transfer of YES and of NO, and burn (SELL YES x SELL NO). Before the
// stream every user holds 400 YES and 400 NO shares of each market (mints
// at 50/50), so sells are possible from the first command.
//
// The stream is generated against a processor (every cancel names a live
// order, crossing prices read the live book), so it is a pure function of
// its Config: the same Config gives the same snapshot, commands and end
// state on every machine. Replayed from Snap it repeats exactly.
// core's BenchmarkProcessorBinary and `bench processor --shape binary` both
// use it. It imports core and may not be imported by non-test core code.
package binaryshape

import (
	"errors"
	"math/rand/v2"
	"strconv"

	"github.com/ubscore/ubscore/core"
)

// Defaults of Config (core's benchmark: seed 77, 2^18 commands).
const (
	DefaultSeed       = 77
	DefaultCommands   = 1 << 18
	DefaultUsers      = 10_000
	DefaultTargetLive = 1_000
)

// The markets: ids 1 and 2, quote asset 1 (4 decimals), payout 10_000
// quote units per share (1.0000), so a tick is 100 units and prices are
// 1..99 ticks; fees 0.1% maker, 0.2% taker.
const (
	Quote   core.AssetID = 1
	Tick    core.Price   = 100
	Payout  core.Units   = 10_000
	Markets              = 2
	// Funds is each user's quote deposit: far more than its orders hold.
	Funds core.Units = 1_000_000_000
	// Oversell is the quantity of the refused oversized sells.
	Oversell core.Units = 1_000_000
	// BadPrice is the price of the refused off-tick limits.
	BadPrice = Tick/2 + 50*Tick
)

// Config selects a workload; zero fields take the defaults, except Seed.
type Config struct {
	Seed       uint64
	Commands   int // stream length (DefaultCommands)
	Users      int // funded users, an even number >= 2 (DefaultUsers)
	TargetLive int // resting orders per book the stream keeps (DefaultTargetLive)
}

func (c Config) withDefaults() Config {
	if c.Commands == 0 {
		c.Commands = DefaultCommands
	}
	if c.Users == 0 {
		c.Users = DefaultUsers
	}
	if c.TargetLive == 0 {
		c.TargetLive = DefaultTargetLive
	}
	return c
}

// Mix counts what the stream does, as generated.
type Mix struct {
	Places   int // GTC limits (passive or crossing)
	IOCs     int
	Cancels  int
	BadPrice int // off-tick limits (refused)
	Oversell int // oversized sells (refused)
	Rejected int // commands whose result code was not OK (the two above included)
	Trades   int
	Fills    [5]int // trades by core.FillKind (index 0 unused)
}

// Workload is a snapshot and the stream that follows it.
type Workload struct {
	Cfg          Config
	Snap         []byte         // the state before the stream
	Cmds         []core.Command // the stream; Seq and Time follow the snapshot's
	EndHash      string         // the state hash after the stream
	StartResting int            // resting orders at the start of the stream
	EndResting   int            // and at its end
	Mix          Mix
}

// User is the id of user i (0 <= i < Users).
func User(i int) core.UserID { return core.UserID(1000 + i) }

type liveOrder struct {
	id     core.OrderID
	user   core.UserID
	market core.MarketID
}

type gen struct {
	cfg    Config
	r      *rand.Rand
	p      *core.Processor
	seq    core.Seq
	live   []liveOrder
	liveAt map[core.OrderID]int
	liveIn [Markets + 1]int
}

func (g *gen) apply(c core.Command) []core.Event {
	g.seq++
	c.Seq, c.Time = g.seq, int64(g.seq)*1000
	ev := g.p.Apply(&c)
	g.observe(ev)
	return ev
}

// observe tracks the live orders from a command's events.
func (g *gen) observe(ev []core.Event) {
	for i := range ev {
		e := &ev[i]
		switch e.Kind {
		case core.EvOrderAccepted:
			g.liveAt[e.OrderID] = len(g.live)
			g.live = append(g.live, liveOrder{id: e.OrderID, user: e.User, market: e.Market})
			g.liveIn[e.Market]++
		case core.EvOrderFilled, core.EvOrderCancelled, core.EvOrderExpired:
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

// class is what the generator meant a command to be.
type class uint8

const (
	classPlace class = iota
	classCancel
	classIOC
	classBadPrice
	classOversell
)

// next builds the next stream command into c.
func (g *gen) next(c *core.Command) class {
	x := g.r.IntN(100)
	if x >= 60 && x < 90 && len(g.live) == 0 {
		x = 0
	}
	m := core.MarketID(1 + g.r.IntN(Markets))
	u := User(g.r.IntN(g.cfg.Users))
	out := core.Outcome(1 + g.r.IntN(2))
	side := core.Side(1 + g.r.IntN(2))
	qty := core.Units(1 + g.r.IntN(20))
	if side == core.Sell {
		v, _ := g.p.Position(u, m)
		free := v.YesVolume - v.YesPending
		if out == core.OutcomeNo {
			free = v.NoVolume - v.NoPending
		}
		if free < qty && x < 98 {
			side = core.Buy // no short selling: buy instead
		}
	}
	*c = core.Command{Kind: core.KindPlaceOrder, User: u, Market: m, Side: side, Type: core.Limit, TIF: core.GTC,
		Qty: qty, Flags: uint8(out)}
	off := core.Price(1 + g.r.IntN(30))
	cross := false
	cl := classPlace
	switch {
	case x < 60:
		pct := 8
		if g.liveIn[m] > g.cfg.TargetLive {
			pct = 30
		} else if g.liveIn[m] < g.cfg.TargetLive*3/4 {
			pct = 2
		}
		cross = g.r.IntN(100) < pct
	case x < 90:
		o := &g.live[g.r.IntN(len(g.live))]
		*c = core.Command{Kind: core.KindCancelOrder, User: o.user, OrderID: o.id, Market: o.market}
		return classCancel
	case x < 98:
		c.TIF = core.IOC
		cross = true
		cl = classIOC
	case x < 99:
		c.Price = BadPrice // off the tick: INVALID_PRICE
		return classBadPrice
	default:
		c.Side, c.Qty = core.Sell, Oversell // more than anyone holds: INSUFFICIENT_SHARES
		cl = classOversell
	}
	// own price: passive, off ticks behind 50; or crossing: up to 2 ticks
	// through the best opposite price in the order's own terms
	px := 50 - off
	if c.Side == core.Sell {
		px = 50 + off
	}
	if cross {
		v, _ := g.p.Binary(m)
		bid, ask := v.YesBid, v.YesAsk
		if out == core.OutcomeNo {
			bid, ask = v.NoBid, v.NoAsk
		}
		k := core.Price(g.r.IntN(3))
		if c.Side == core.Buy && ask > 0 {
			px = ask/Tick + k
		} else if c.Side == core.Sell && bid > 0 {
			px = bid/Tick - k
		}
	}
	c.Price = min(max(px, 1), 99) * Tick
	return cl
}

// Generate builds cfg's workload.
func Generate(cfg Config) (*Workload, error) {
	cfg = cfg.withDefaults()
	if cfg.Commands < 1 || cfg.Users < 2 || cfg.Users%2 != 0 || cfg.TargetLive < 1 {
		return nil, errors.New("binaryshape: want commands >= 1, an even number of users >= 2, target live >= 1")
	}
	if cfg.Users >= core.MaxUsers-1000 {
		return nil, errors.New("binaryshape: too many users")
	}
	g := &gen{cfg: cfg, r: rand.New(rand.NewPCG(cfg.Seed, 3)), p: core.New(core.Config{}), liveAt: map[core.OrderID]int{}}
	setup := func(c core.Command) error {
		if ev := g.apply(c); ev[len(ev)-1].Code != core.OK {
			return errors.New("binaryshape: setup " + c.Kind.String() + " refused: " + ev[len(ev)-1].Code.String())
		}
		return nil
	}
	if err := setup(core.Command{Kind: core.KindConfigAsset, Asset: Quote, BaseScale: 4}); err != nil {
		return nil, err
	}
	for m := core.MarketID(1); m <= Markets; m++ {
		if err := errors.Join(
			setup(core.Command{Kind: core.KindConfigBinary, Market: m, Cfg: core.MarketCfg{Quote: Quote, Lot: 1, MinQty: 1,
				MaxQty: 1_000_000, MakerFee: 1_000, TakerFee: 2_000}}),
			setup(core.Command{Kind: core.KindActivate, Market: m})); err != nil {
			return nil, err
		}
	}
	for i := 0; i < cfg.Users; i++ {
		k, _ := core.KeyFrom("f" + strconv.Itoa(i))
		if err := setup(core.Command{Kind: core.KindSpotDeposit, User: User(i), Asset: Quote, Amount: Funds, Key: k}); err != nil {
			return nil, err
		}
	}
	// every user holds YES and NO shares in both markets: two rounds of mints at 50/50
	for m := core.MarketID(1); m <= Markets; m++ {
		for round := 0; round < 2; round++ {
			for i := 0; i < cfg.Users; i += 2 {
				a, b := User(i), User(i+1)
				if round == 1 {
					a, b = b, a
				}
				if err := errors.Join(
					setup(core.Command{Kind: core.KindPlaceOrder, User: a, Market: m, Side: core.Buy, Type: core.Limit,
						TIF: core.GTC, Price: 50 * Tick, Qty: 200, Flags: uint8(core.OutcomeYes)}),
					setup(core.Command{Kind: core.KindPlaceOrder, User: b, Market: m, Side: core.Buy, Type: core.Limit,
						TIF: core.GTC, Price: 50 * Tick, Qty: 200, Flags: uint8(core.OutcomeNo)})); err != nil {
					return nil, err
				}
			}
		}
	}
	// the books: ~TargetLive resting orders each, both outcomes on both sides
	for i := 0; len(g.live) < Markets*cfg.TargetLive; i++ {
		if i > 100*Markets*cfg.TargetLive {
			return nil, errors.New("binaryshape: the books do not fill (too few users for the target?)")
		}
		var c core.Command
		g.next(&c)
		if c.Kind == core.KindPlaceOrder && c.TIF == core.GTC {
			off := core.Price(1 + g.r.IntN(30))
			px := 50 - off
			if c.Side == core.Sell {
				px = 50 + off
			}
			c.Price = max(px, 1) * Tick
			g.apply(c) // a refusal (an oversized sell) rests nothing
		}
	}
	p := g.p
	w := &Workload{Cfg: cfg, Snap: p.AppendSnapshot(nil), Cmds: make([]core.Command, cfg.Commands),
		StartResting: p.RestingOrders()}
	for i := range w.Cmds {
		c := &w.Cmds[i]
		switch g.next(c) {
		case classPlace:
			w.Mix.Places++
		case classCancel:
			w.Mix.Cancels++
		case classIOC:
			w.Mix.IOCs++
		case classBadPrice:
			w.Mix.BadPrice++
		case classOversell:
			w.Mix.Oversell++
		}
		g.seq++
		c.Seq, c.Time = g.seq, int64(g.seq)*1000
		ev := p.Apply(c)
		for j := range ev {
			if ev[j].Kind == core.EvTrade {
				w.Mix.Trades++
				if k := ev[j].Flags; k < uint8(len(w.Mix.Fills)) {
					w.Mix.Fills[k]++
				}
			}
		}
		if ev[len(ev)-1].Code != core.OK {
			w.Mix.Rejected++
		}
		g.observe(ev)
	}
	w.EndHash, w.EndResting = p.StateHash(), p.RestingOrders()
	return w, nil
}

// Start returns a processor in the workload's starting state.
func (w *Workload) Start() (*core.Processor, error) { return core.Restore(core.Config{}, w.Snap) }
