package core

// binary_gen_test.go is the seeded generator of binary-market commands that
// the property test interleaves with the spot generator's stream (gen_test.go):
// the same users trade binary markets quoted in the spot markets' USDT, so
// funds frozen in one kind of market matter to the other. Each binary market
// lives a random number of commands, then is resolved YES or NO or voided
// and settled in random slices, and the next one is created at the next
// market id: a long stream goes through every lifecycle state many times.
// Its model (live orders) lives in slices; it reads positions from the
// processor it feeds (deterministic: the processor is).

import "math/rand/v2"

const (
	binGenFirstMarket MarketID = 10
	binGenLastMarket  MarketID = 250 // below MaxMarkets, away from the spot generator's unknown ids (3, 256)
	binGenPayout      Units    = 1_000_000
	binGenTick        Price    = Price(binGenPayout / 100)
)

type binGenOrder struct {
	id     OrderID
	user   UserID
	market MarketID
}

type binGen struct {
	r     *rand.Rand
	p     *Processor // the processor the stream feeds (positions are read from it)
	users []UserID

	market   MarketID // the current market (0: none yet)
	phase    int      // 0 none, 1 draft, 2 trading, 3 settling, 4 settled (archive next)
	reuse    bool     // configure the archived market's id again
	left     int      // commands until the current phase moves on
	mid      Price    // YES reference price (ticks x binGenTick)
	live     []binGenOrder
	liveAt   map[OrderID]int
	markets  int // markets created
	settled  int // markets fully settled
	rejected int
	// mustReject is set when the last command was built so that the core
	// has to refuse it whatever the state.
	mustReject bool
}

func newBinGen(seed uint64, p *Processor, users []UserID) *binGen {
	return &binGen{r: rand.New(rand.NewPCG(seed^0xb1a7, seed)), p: p, users: users, liveAt: map[OrderID]int{},
		mid: 50 * binGenTick}
}

// next fills c with the next binary command (Seq and Time left to the caller).
func (g *binGen) next(c *Command) {
	*c = Command{}
	g.mustReject = false
	switch g.phase {
	case 4: // settled: release the slot; every other market id is then used again
		*c = Command{Kind: KindArchive, Market: g.market}
		g.phase, g.reuse = 0, g.r.IntN(2) == 0
	case 0:
		switch {
		case g.market == 0:
			g.market = binGenFirstMarket
		case g.reuse:
		case g.market < binGenLastMarket:
			g.market++
		}
		g.markets++
		fees := [][2]Rate{{1_000, 2_000}, {0, 0}, {3_000, 1_000}}[g.r.IntN(3)]
		*c = Command{Kind: KindConfigBinary, Market: g.market, Cfg: MarketCfg{Quote: genUSDT, Lot: 1, MinQty: 1,
			MaxQty: 1_000_000, MakerFee: fees[0], TakerFee: fees[1]}}
		g.phase, g.left = 1, 1+g.r.IntN(3)
	case 1:
		if g.left--; g.left > 0 {
			g.place(c) // refused: MARKET_NOT_OPEN
			return
		}
		*c = Command{Kind: KindActivate, Market: g.market}
		g.phase, g.left = 2, 1_000+g.r.IntN(8_000)
	case 2:
		if g.left--; g.left <= 0 {
			g.end(c)
			return
		}
		g.trade(c)
	default:
		*c = Command{Kind: KindSettle, Market: g.market, Qty: Units(1 + g.r.IntN(8))}
		if g.r.IntN(50) == 0 {
			g.place(c) // refused: MARKET_CLOSED
		}
	}
}

// end resolves or voids the current market.
func (g *binGen) end(c *Command) {
	switch g.r.IntN(3) {
	case 0:
		*c = Command{Kind: KindResolve, Market: g.market, Flags: uint8(OutcomeYes)}
	case 1:
		*c = Command{Kind: KindResolve, Market: g.market, Flags: uint8(OutcomeNo)}
	default:
		*c = Command{Kind: KindVoid, Market: g.market}
	}
	g.phase = 3
}

func (g *binGen) trade(c *Command) {
	switch x := g.r.IntN(1000); {
	case x < 620:
		g.place(c)
	case x < 900:
		if len(g.live) == 0 {
			g.place(c)
			return
		}
		o := g.live[g.r.IntN(len(g.live))]
		*c = Command{Kind: KindCancelOrder, User: o.user, OrderID: o.id, Market: o.market}
	case x < 930:
		g.invalid(c)
	case x < 932:
		*c = Command{Kind: KindSuspendMarket, Market: g.market}
	case x < 960:
		*c = Command{Kind: KindResumeMarket, Market: g.market}
	case x < 965:
		*c = Command{Kind: KindModifyOrder, User: g.users[0], OrderID: 1, Price: binGenTick} // refused
	default:
		*c = Command{Kind: KindTick, Flags: TickFullCheck}
	}
}

// place is a limit order near the reference price; a SELL mostly of shares
// the user holds (sometimes more: INSUFFICIENT_SHARES).
func (g *binGen) place(c *Command) {
	u := g.users[g.r.IntN(len(g.users))]
	out := Outcome(1 + g.r.IntN(2))
	side := Side(1 + g.r.IntN(2))
	qty := Units(1 + g.r.IntN(200))
	if side == Sell {
		if v, ok := g.p.Position(u, g.market); ok {
			free := v.YesVolume - v.YesPending
			if out == OutcomeNo {
				free = v.NoVolume - v.NoPending
			}
			if free > 0 && g.r.IntN(20) != 0 {
				qty = 1 + Units(g.r.Int64N(int64(free)))
			}
		}
	}
	// own price around the outcome's reference, a few ticks either way
	ref := g.mid
	if out == OutcomeNo {
		ref = Price(binGenPayout) - g.mid
	}
	off := Price(g.r.IntN(9)-4) * binGenTick
	if side == Buy {
		off = -off
	}
	price := min(max(ref+off, binGenTick), Price(binGenPayout)-binGenTick)
	tif := GTC
	switch x := g.r.IntN(100); {
	case x < 10:
		tif = IOC
	case x < 15:
		tif = FOK
	case x < 25:
		tif = PostOnly
	}
	*c = Command{Kind: KindPlaceOrder, User: u, Market: g.market, Side: side, Type: Limit, TIF: tif,
		Price: price, Qty: qty, Flags: uint8(out), STP: STP(g.r.IntN(2))}
	if g.r.IntN(10) == 0 {
		c.Key = mkKey("b" + string(rune('a'+g.r.IntN(26))))
	}
}

// invalid builds a binary command the core must refuse whatever the state.
func (g *binGen) invalid(c *Command) {
	g.place(c)
	g.mustReject = true
	switch g.r.IntN(6) {
	case 0:
		c.Flags = []uint8{0, 3, 255}[g.r.IntN(3)]
	case 1:
		c.Price = binGenTick/2 + Price(g.r.IntN(3))*binGenTick
	case 2:
		c.Price = []Price{0, Price(binGenPayout), -binGenTick}[g.r.IntN(3)]
	case 3:
		c.Type, c.TIF, c.Price = Market, 0, 0
	case 4:
		*c = Command{Kind: KindSettle, Market: g.market, Qty: 1} // not settling
	default:
		*c = Command{Kind: KindResolve, Market: g.market, Flags: 3}
	}
}

// observe feeds back the events of the last binary command.
func (g *binGen) observe(evs []Event) {
	for i := range evs {
		e := &evs[i]
		switch e.Kind {
		case EvOrderAccepted:
			if e.Market >= binGenFirstMarket {
				g.liveAt[e.OrderID] = len(g.live)
				g.live = append(g.live, binGenOrder{id: e.OrderID, user: e.User, market: e.Market})
			}
		case EvOrderFilled, EvOrderCancelled, EvOrderExpired:
			g.closed(e.OrderID)
		case EvTrade:
			if e.Market == g.market && g.r.IntN(4) == 0 {
				g.mid = min(max(e.Price, 20*binGenTick), 80*binGenTick)
			}
		case EvMarketSettled:
			if e.Market == g.market {
				g.phase = 4
				g.settled++
			}
		case EvResult:
			if e.Code != OK {
				g.rejected++
			}
		}
	}
}

func (g *binGen) closed(id OrderID) {
	j, ok := g.liveAt[id]
	if !ok {
		return
	}
	last := len(g.live) - 1
	if j != last {
		g.live[j] = g.live[last]
		g.liveAt[g.live[j].id] = j
	}
	g.live = g.live[:last]
	delete(g.liveAt, id)
}
