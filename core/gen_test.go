package core

// gen_test.go is the shared, seeded generator of realistic random command
// streams for the property, fuzz, allocation and benchmark tests. Given a seed
// and the events its own commands produced (fed back through observe), it
// yields the same stream every time: its model of the world (resting orders,
// balances, halts, recent transfers) lives in slices, and maps are only ever
// looked up by key, so nothing depends on map iteration order.

import (
	"math"
	"math/rand/v2"
	"strconv"
)

// The assets and markets of every generated stream: two markets of two assets
// each, sharing the quote asset so that funds frozen in one book matter to the other.
const (
	genBTC    AssetID = 1 // scale 8
	genUSDT   AssetID = 2 // scale 6
	genXYZ    AssetID = 3 // scale 3
	genAssets         = 3

	genUnknownUser UserID = 999_999_999 // never funded, never given an account
)

var genScales = [genAssets + 1]uint8{0, 8, 6, 3}

var genMarketCfgs = [3]MarketCfg{
	// MaxQty near MaxInt64 so that quantities (and their sums on one price
	// level) near the int64 limit are reachable: see gen.invalid, the whale.
	1: {Base: genBTC, Quote: genUSDT, BaseScale: 8, Tick: 10_000, Lot: 10_000, MinQty: 10_000,
		MaxQty: math.MaxInt64 / 10_000 * 10_000, MakerFee: 1_000, TakerFee: 2_000},
	// maker fee above taker fee, so the worst-case freeze uses the maker rate;
	// MinQty of five lots, so QUANTITY_TOO_SMALL is reachable with a valid lot.
	2: {Base: genXYZ, Quote: genUSDT, BaseScale: 3, Tick: 100, Lot: 10, MinQty: 50,
		MaxQty: 10_000_000, MakerFee: 3_000, TakerFee: 1_000},
}

var (
	genStartMid = [3]Price{0, 50_000 * 1_000_000, 20 * 1_000_000} // 50,000 USDT; 20 USDT
	genStep     = [3]Price{0, 100 * 10_000, 10 * 100}             // price grid of the generator: 100 and 10 ticks
	genMeanLots = [3]float64{0, 300, 400}
	// the whale's extra USDT: two GTC buys of MaxInt64/2 BTC units at one tick
	// cost 2 x 4.6e14 quote units plus fees
	genWhaleUSDT Units = 2_000_000_000 * 1_000_000
	// what each user is funded with at setup: 5 BTC, 1M USDT, 100k XYZ
	genFund = [genAssets + 1]Units{0, 5 * 100_000_000, 1_000_000 * 1_000_000, 100_000 * 1_000}
)

// genProfile selects a command mix.
type genProfile struct {
	users      int  // trading users
	bench      bool // the benchmark mix: GTC near the spread, cancels, marketable orders, nothing else
	targetLive int  // resting orders per book the mix steers towards
	seedOrders int  // resting orders per book placed right after setup
}

var (
	propertyProfile = genProfile{users: 40, targetLive: 200}
	benchProfile    = genProfile{users: 10_000, bench: true, targetLive: 1_000, seedOrders: 1_000}
)

type genUser struct {
	id     UserID
	status AccountStatus
	avail  [genAssets + 1]Units // available balance as reported by BALANCE events
}

// genOrder is the generator's view of a resting order.
type genOrder struct {
	id     OrderID
	user   UserID
	market MarketID
	side   Side
	price  Price
	total  Units // total quantity as last placed or modified
	rem    Units // remaining quantity
	key    Key
}

type genOp struct {
	kind   Kind
	user   UserID
	asset  AssetID
	amount Units
	key    Key
}

type gen struct {
	r    *rand.Rand
	prof genProfile

	seq     Seq
	time    int64
	pending []Command // setup commands not yet handed out
	last    Command   // the last command handed out (observe needs it)

	// mustReject is set when the last command was built so that the core
	// has to reject it whatever the state (bad enum, unknown market, ...).
	mustReject bool

	users     []genUser
	userAt    map[UserID]int
	live      []genOrder
	liveAt    map[OrderID]int
	liveIn    [3]int
	dead      []OrderID // recently closed order ids, for stale cancels
	mid       [3]Price  // reference price: the last trade, on the generator's grid
	halted    [3]bool
	haltLeft  int     // commands until the operator resumes a halted market
	ops       []genOp // recent transfers, for repeats and conflicts
	withdrawn []genOp // successful withdrawals not yet refunded
	nextKey   uint64
	p2pLast   uint64   // the highest transfer id seen (p2p_gen_test.go)
	p2pFrom   []UserID // each transfer's sender, by id-1
}

func newGen(seed uint64, prof genProfile) *gen {
	g := &gen{
		r:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		prof:   prof,
		time:   1_700_000_000_000_000_000,
		userAt: make(map[UserID]int, prof.users),
		liveAt: make(map[OrderID]int),
		mid:    genStartMid,
	}
	for i := 0; i < prof.users; i++ {
		id := UserID(1000 + 7*i)
		g.userAt[id] = len(g.users)
		g.users = append(g.users, genUser{id: id})
	}
	g.setup()
	return g
}

// setup queues the configuration, the funding of every user and, for the
// benchmark, a book of resting orders on each market.
func (g *gen) setup() {
	for a := AssetID(1); a <= genAssets; a++ {
		g.pending = append(g.pending, Command{Kind: KindConfigAsset, Asset: a, BaseScale: genScales[a]})
	}
	for m := MarketID(1); m <= 2; m++ {
		g.pending = append(g.pending, Command{Kind: KindConfigMarket, Market: m, Cfg: genMarketCfgs[m]})
	}
	for _, u := range g.users {
		for a := AssetID(1); a <= genAssets; a++ {
			g.pending = append(g.pending, Command{Kind: KindSpotDeposit, User: u.id, Asset: a,
				Amount: genFund[a], Key: g.newKey("f")})
		}
	}
	if !g.prof.bench { // every user also has a handle in the transfer service (p2p_gen_test.go)
		for _, u := range g.users {
			g.pending = append(g.pending, Command{Kind: KindP2PCreateUser, User: u.id, Text: "g" + strconv.FormatUint(uint64(u.id), 10),
				Asset: genUSDT, Amount: 1_000})
		}
	}
	// The whale (the first user) can afford orders of ~MaxInt64 base units at the lowest price.
	g.pending = append(g.pending, Command{Kind: KindSpotDeposit, User: g.users[0].id, Asset: genUSDT,
		Amount: genWhaleUSDT, Key: g.newKey("f")})
	for i := 0; i < g.prof.seedOrders; i++ {
		for m := MarketID(1); m <= 2; m++ {
			u := g.users[(i*2+int(m))%len(g.users)].id
			side := Side(1 + i%2)
			off := Price(1 + g.r.IntN(25))
			price := g.mid[m] - off*genStep[m]
			if side == Sell {
				price = g.mid[m] + off*genStep[m]
			}
			g.pending = append(g.pending, Command{Kind: KindPlaceOrder, User: u, Market: m, Side: side,
				Type: Limit, TIF: GTC, Price: price, Qty: g.qty(m, 1)})
		}
	}
}

// setupLen is how many commands setup queued.
func (g *gen) setupLen() int { return len(g.pending) }

// next fills c with the next command, Seq and Time assigned.
func (g *gen) next(c *Command) {
	*c = Command{}
	g.mustReject = false
	switch {
	case len(g.pending) > 0:
		*c = g.pending[0]
		g.pending = g.pending[1:]
	case g.prof.bench:
		g.benchCmd(c)
	default:
		g.propertyCmd(c)
	}
	g.seq++
	c.Seq = g.seq
	switch x := g.r.IntN(1000); {
	case x == 0 && !g.prof.bench:
		g.time -= int64(g.r.IntN(1_000_000)) // the sequencer's clock stepped back: the core clamps
	case x < 50:
		// same nanosecond as the previous command
	default:
		g.time += 1 + int64(g.r.IntN(2_000))
	}
	c.Time = g.time
	g.last = *c
}

func (g *gen) propertyCmd(c *Command) {
	if g.haltLeft > 0 {
		if g.haltLeft--; g.haltLeft == 0 {
			for m := MarketID(1); m <= 2; m++ {
				if g.halted[m] {
					*c = Command{Kind: KindResumeMarket, Market: m}
					return
				}
			}
		}
	}
	switch x := g.r.IntN(1000); {
	case x < 100:
		g.invalid(c)
	case x < 900:
		// Cancels scale with the book, so it hovers around targetLive per
		// market instead of random-walking to empty or to thousands.
		share := 0.28 * float64(len(g.live)) / float64(2*g.prof.targetLive)
		if g.r.Float64() < min(max(share, 0.02), 0.7) {
			g.cancel(c)
		} else {
			g.place(c)
		}
	case x < 935:
		g.modify(c)
	case x < 965:
		g.transfer(c)
	case x < 975:
		g.p2p(c)
	case x < 983:
		g.status(c)
	case x < 985:
		g.halt(c)
	case x < 997:
		*c = Command{Kind: KindTick}
		if g.r.IntN(2) == 0 {
			c.Flags = TickFullCheck
		}
	default:
		*c = Command{Kind: KindSnapshot}
	}
}

// benchCmd is the benchmark mix: 60% GTC limits near the spread, 30% cancels,
// 10% marketable orders (IOC limits and MARKET by base and by quote).
func (g *gen) benchCmd(c *Command) {
	x := g.r.IntN(100)
	if x >= 60 && x < 90 && len(g.live) == 0 {
		x = 0
	}
	m := MarketID(1 + g.r.IntN(2))
	u := &g.users[g.r.IntN(len(g.users))]
	side := Side(1 + g.r.IntN(2))
	*c = Command{Kind: KindPlaceOrder, User: u.id, Market: m, Side: side, Type: Limit, TIF: GTC}
	switch {
	case x < 60:
		// Steer the book size: above target, more of the new orders cross.
		cross := 8
		if g.liveIn[m] > g.prof.targetLive {
			cross = 30
		} else if g.liveIn[m] < g.prof.targetLive*3/4 {
			cross = 2
		}
		c.Price = g.limitPrice(m, side, g.r.IntN(100) < cross)
		c.Qty = g.qty(m, 1)
	case x < 90:
		o := &g.live[g.r.IntN(len(g.live))]
		*c = Command{Kind: KindCancelOrder, User: o.user, OrderID: o.id, Market: o.market}
	default:
		switch y := g.r.IntN(4); {
		case y < 2:
			c.TIF = IOC
			c.Price = g.limitPrice(m, side, true)
			c.Qty = g.qty(m, 2)
		case y < 3:
			c.Type, c.TIF = Market, 0
			c.Qty = g.qty(m, 1)
		default:
			c.Type, c.TIF, c.Side = Market, 0, Buy
			c.QuoteQty = Units(1 + g.r.IntN(int(genFund[genUSDT]/1_000)))
		}
	}
}

func (g *gen) pickUser() *genUser { return &g.users[g.r.IntN(len(g.users))] }

func (g *gen) chance(perMille int) bool { return g.r.IntN(1000) < perMille }

// newKey returns a fresh key; one in twenty uses all 32 bytes.
func (g *gen) newKey(prefix string) Key {
	g.nextKey++
	s := prefix + strconv.FormatUint(g.nextKey, 10)
	if g.r.IntN(20) == 0 {
		for len(s) < len(Key{}) {
			s += "x"
		}
	}
	k, _ := KeyFrom(s)
	return k
}

// limitPrice is a price on the generator's grid around the reference price:
// passive (0..40 steps behind it) or aggressive (up to 5 steps through it).
func (g *gen) limitPrice(m MarketID, side Side, aggressive bool) Price {
	off := Price(g.r.IntN(41))
	if aggressive {
		off = -Price(g.r.IntN(6))
	}
	if side == Buy {
		off = -off
	}
	p := g.mid[m] + off*genStep[m]
	if p <= 0 {
		p = genStep[m]
	}
	return p
}

// qty is a realistic order quantity: the minimum plus an exponential number of lots.
func (g *gen) qty(m MarketID, scale float64) Units {
	cfg := &genMarketCfgs[m]
	q := cfg.MinQty + Units(g.r.ExpFloat64()*genMeanLots[m]*scale)*cfg.Lot
	return min(q, cfg.MaxQty)
}

// fit shrinks q (most of the time) to what u can afford, so most orders are accepted.
func (g *gen) fit(u *genUser, m MarketID, side Side, price Price, q Units) Units {
	if g.r.IntN(10) == 0 {
		return q
	}
	cfg := &genMarketCfgs[m]
	if side == Sell {
		if a := u.avail[cfg.Base]; a < q {
			q = a / cfg.Lot * cfg.Lot
		}
		return max(q, cfg.MinQty)
	}
	lotCost, _ := notional(price, cfg.Lot, cfg.BaseScale)
	lotCost += lotCost*Units(max(cfg.MakerFee, cfg.TakerFee))/Units(RateDenominator) + 1
	if lots := u.avail[cfg.Quote] / lotCost; lots*cfg.Lot < q {
		q = lots * cfg.Lot
	}
	return max(q, cfg.MinQty)
}

func (g *gen) place(c *Command) {
	u := g.pickUser()
	m := MarketID(1 + g.r.IntN(2))
	side := Side(1 + g.r.IntN(2))
	*c = Command{Kind: KindPlaceOrder, User: u.id, Market: m, Side: side, Type: Limit}
	if g.r.IntN(5) == 0 {
		c.STP = STPExpireTaker
	}
	if g.r.IntN(10) < 3 {
		c.Key = g.newKey("c")
		if g.r.IntN(30) == 0 {
			if o := g.liveOf(u.id); o != nil && !o.key.IsZero() {
				c.Key = o.key // DUPLICATE_CLIENT_ORDER_ID
			}
		}
	}
	cross := 150
	if g.liveIn[m] > g.prof.targetLive {
		cross = 400
	}
	switch x := g.r.IntN(100); {
	case x < 62:
		c.TIF = GTC
	case x < 74:
		c.TIF = IOC
		cross *= 3
	case x < 80:
		c.TIF = FOK
		cross *= 3
	case x < 90:
		c.TIF = PostOnly
	case x < 96:
		c.Type = Market
		if g.r.IntN(4) == 0 {
			c.TIF = IOC // the only TIF a MARKET order may carry
		}
		c.Qty = g.fit(u, m, side, g.mid[m]*11/10, g.qty(m, 0.5))
		return
	default:
		c.Type, c.Side = Market, Buy
		c.QuoteQty = Units(1 + g.r.Int64N(max(1, int64(u.avail[genUSDT])/4)))
		return
	}
	c.Price = g.limitPrice(m, side, g.chance(cross))
	c.Qty = g.fit(u, m, side, c.Price, g.qty(m, 1))
}

// liveOf returns some resting order of user, or nil.
func (g *gen) liveOf(user UserID) *genOrder {
	if len(g.live) == 0 {
		return nil
	}
	start := g.r.IntN(len(g.live))
	for i := 0; i < len(g.live) && i < 64; i++ {
		if o := &g.live[(start+i)%len(g.live)]; o.user == user {
			return o
		}
	}
	return nil
}

func (g *gen) cancel(c *Command) {
	if len(g.live) == 0 || (len(g.dead) > 0 && g.r.IntN(20) == 0) {
		// stale: an order that already filled or was cancelled
		if len(g.dead) == 0 {
			g.place(c)
			return
		}
		*c = Command{Kind: KindCancelOrder, User: g.pickUser().id, OrderID: g.dead[g.r.IntN(len(g.dead))]}
		return
	}
	o := &g.live[g.r.IntN(len(g.live))]
	*c = Command{Kind: KindCancelOrder, User: o.user, OrderID: o.id}
	if !o.key.IsZero() && g.r.IntN(3) == 0 {
		c.OrderID, c.Key = 0, o.key
	}
	if g.r.IntN(2) == 0 {
		c.Market = o.market
	}
}

func (g *gen) modify(c *Command) {
	if len(g.live) == 0 {
		g.place(c)
		return
	}
	o := &g.live[g.r.IntN(len(g.live))]
	cfg := &genMarketCfgs[o.market]
	*c = Command{Kind: KindModifyOrder, User: o.user, OrderID: o.id}
	filled := o.total - o.rem
	switch x := g.r.IntN(10); {
	case x < 4: // shrink: keeps priority
		if o.rem > cfg.Lot {
			c.Qty = max(filled+Units(1+g.r.Int64N(int64(o.rem/cfg.Lot-1)))*cfg.Lot, cfg.MinQty)
		} else {
			c.Qty = o.total + cfg.Lot
		}
	case x < 8: // move the price, sometimes through the spread
		c.Price = o.price + Price(g.r.IntN(11)-5)*genStep[o.market]
		if c.Price <= 0 {
			c.Price = genStep[o.market]
		}
		if g.r.IntN(3) == 0 {
			c.Qty = o.total + Units(g.r.IntN(5))*cfg.Lot
		}
	default: // grow
		c.Qty = o.total + Units(1+g.r.IntN(50))*cfg.Lot
	}
	if c.Qty != 0 && c.Qty == o.total {
		c.Qty = 0
	}
	if c.Qty == 0 && c.Price == 0 {
		c.Qty = o.total + cfg.Lot
	}
}

func (g *gen) transfer(c *Command) {
	u := g.pickUser()
	a := AssetID(1 + g.r.IntN(genAssets))
	*c = Command{User: u.id, Asset: a, Key: g.newKey("r")}
	switch x := g.r.IntN(100); {
	case x < 45:
		c.Kind = KindSpotDeposit
		c.Amount = 1 + Units(g.r.Int64N(int64(genFund[a]/4)))
	case x < 70:
		c.Kind = KindSpotWithdraw
		c.Amount = 1 + Units(g.r.Int64N(max(1, int64(u.avail[a])/2)))
	case x < 80 && len(g.withdrawn) > 0:
		i := g.r.IntN(len(g.withdrawn))
		w := g.withdrawn[i]
		g.withdrawn[i] = g.withdrawn[len(g.withdrawn)-1]
		g.withdrawn = g.withdrawn[:len(g.withdrawn)-1]
		*c = Command{Kind: KindSpotRefund, User: w.user, Asset: w.asset, Amount: w.amount, Key: w.key}
	case x < 90:
		c.Kind = KindAdjust
		c.Amount = 1 + Units(g.r.Int64N(int64(genFund[a]/100)))
		if g.r.IntN(2) == 0 {
			c.Amount = -min(c.Amount, max(1, u.avail[a]))
		}
	default: // a retry of a recent operation: same result, nothing changes
		if len(g.ops) == 0 {
			c.Kind, c.Amount = KindSpotDeposit, 1
			break
		}
		op := g.ops[g.r.IntN(len(g.ops))]
		*c = Command{Kind: op.kind, User: op.user, Asset: op.asset, Amount: op.amount, Key: op.key}
	}
	g.remember(c)
}

func (g *gen) remember(c *Command) {
	op := genOp{kind: c.Kind, user: c.User, asset: c.Asset, amount: c.Amount, key: c.Key}
	if len(g.ops) < 64 {
		g.ops = append(g.ops, op)
	} else {
		g.ops[g.r.IntN(len(g.ops))] = op
	}
}

// status freezes or disables a user, and soon restores them.
func (g *gen) status(c *Command) {
	for i := range g.users {
		if g.users[i].status != Active && g.r.IntN(2) == 0 {
			*c = Command{Kind: KindSetAccountStatus, User: g.users[i].id, Status: Active}
			return
		}
	}
	*c = Command{Kind: KindSetAccountStatus, User: g.pickUser().id, Status: AccountStatus(g.r.IntN(3))}
}

func (g *gen) halt(c *Command) {
	if g.haltLeft > 0 {
		*c = Command{Kind: KindTick}
		return
	}
	m := MarketID(1 + g.r.IntN(2))
	*c = Command{Kind: KindHaltMarket, Market: m}
	g.haltLeft = 5 + g.r.IntN(60)
}

// nonCanonicalKey has a non-zero byte after a zero byte.
func nonCanonicalKey() Key {
	var k Key
	k[0], k[1], k[3] = 'a', 'b', 'c'
	return k
}

var genHugeInts = [...]int64{math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1, -1,
	1 << 62, math.MaxInt32, math.MaxUint32, -math.MaxInt64}

func (g *gen) hugeInt() int64 { return genHugeInts[g.r.IntN(len(genHugeInts))] }

// invalid builds a command that is wrong in one way. When the core must
// reject it whatever the state, mustReject is set.
func (g *gen) invalid(c *Command) {
	g.mustReject = true
	u := g.pickUser()
	m := MarketID(1 + g.r.IntN(2))
	cfg := &genMarketCfgs[m]
	place := Command{Kind: KindPlaceOrder, User: u.id, Market: m, Side: Side(1 + g.r.IntN(2)), Type: Limit,
		TIF: GTC, Price: g.limitPrice(m, Buy, false), Qty: cfg.MinQty}
	*c = place
	switch g.r.IntN(47) {
	case 0:
		c.Market = []MarketID{0, 3, MaxMarkets, MaxMarkets + 1, math.MaxUint32}[g.r.IntN(5)]
	case 1:
		c.Side = []Side{0, 3, 255}[g.r.IntN(3)]
	case 2:
		c.Type = []OrderType{0, 3, 255}[g.r.IntN(3)]
	case 3:
		c.TIF = []TimeInForce{0, 5, 255}[g.r.IntN(3)]
	case 4:
		c.Type, c.TIF, c.Price = Market, []TimeInForce{GTC, FOK, PostOnly, 9}[g.r.IntN(4)], 0
	case 5:
		c.Price += Price(1 + g.r.IntN(int(cfg.Tick-1))) // off-tick
	case 6:
		c.Price = []Price{0, -cfg.Tick, -1, math.MinInt64}[g.r.IntN(4)]
	case 7: // a buy whose notional overflows int64
		c.Side, c.Price, c.Qty = Buy, Price(math.MaxInt64)/cfg.Tick*cfg.Tick, cfg.MaxQty
	case 8:
		c.Qty += Units(1 + g.r.IntN(int(cfg.Lot-1))) // off-lot
	case 9:
		c.Qty = []Units{0, -cfg.Lot, -1, math.MinInt64, math.MaxInt64, cfg.MaxQty + cfg.Lot}[g.r.IntN(6)]
	case 10:
		if m == 2 {
			c.Qty = cfg.Lot // below MinQty
		} else {
			c.Qty = cfg.MaxQty * 2
		}
	case 11:
		c.Type, c.TIF = Market, 0 // MARKET with a price
	case 12:
		c.Type, c.TIF, c.Price, c.Qty, c.Side, c.QuoteQty = Market, 0, 0, 0, Sell, 1_000_000 // by quote must be a buy
	case 13:
		c.Type, c.TIF, c.Price, c.Side, c.QuoteQty = Market, 0, 0, Buy, 1_000_000 // qty and quote qty both set
	case 14:
		c.Type, c.TIF, c.Price, c.Qty, c.Side = Market, 0, 0, 0, Buy
		c.QuoteQty = []Units{-1, math.MinInt64, math.MaxInt64}[g.r.IntN(3)]
	case 15:
		c.QuoteQty = 1 // a LIMIT with a quote budget
	case 16:
		c.User = FeeUser
	case 17:
		c.User = genUnknownUser
	case 18:
		c.STP = STP(2 + g.r.IntN(254))
	case 19:
		c.Key = nonCanonicalKey()
	case 20:
		*c = Command{Kind: KindCancelOrder, User: u.id, OrderID: 0}
		if g.r.IntN(2) == 0 {
			c.Key = nonCanonicalKey()
		}
	case 21:
		*c = Command{Kind: KindCancelOrder, User: u.id, OrderID: OrderID([]uint64{math.MaxUint64, 1 << 62,
			uint64(g.seq) * 1_000}[g.r.IntN(3)])}
	case 22, 23: // someone else's order, or the right order in the wrong market
		o := g.liveOf(g.pickUser().id)
		if o == nil {
			*c = Command{Kind: KindCancelOrder, User: FeeUser, OrderID: 1}
			break
		}
		*c = Command{Kind: KindCancelOrder, User: o.user, OrderID: o.id, Market: 3 - o.market}
		if g.r.IntN(2) == 0 {
			c.Kind = KindModifyOrder
			c.Qty = o.total + genMarketCfgs[o.market].Lot
		}
		if g.r.IntN(2) == 0 {
			c.Market, c.User = 0, o.user+1
		}
	case 24, 25:
		o := g.liveOf(g.pickUser().id)
		if o == nil {
			*c = Command{Kind: KindModifyOrder, User: u.id, OrderID: math.MaxUint64, Qty: cfg.MinQty}
			break
		}
		mc := &genMarketCfgs[o.market]
		*c = Command{Kind: KindModifyOrder, User: o.user, OrderID: o.id}
		switch g.r.IntN(5) {
		case 0:
			c.Price = -mc.Tick
		case 1:
			c.Price = o.price + 1 // off-tick
		case 2:
			c.Qty = []Units{-mc.Lot, math.MinInt64, math.MaxInt64, mc.MaxQty + mc.Lot}[g.r.IntN(4)]
		case 3:
			c.Qty = o.total + 1 // off-lot
		default:
			c.Price = Price(math.MaxInt64) / mc.Tick * mc.Tick
			if o.side == Sell {
				c.Price = -1
			}
		}
	case 26:
		*c = Command{Kind: KindSpotDeposit, User: u.id, Asset: genUSDT, Amount: []Units{0, -1, math.MinInt64}[g.r.IntN(3)],
			Key: g.newKey("r")}
		c.Kind = []Kind{KindSpotDeposit, KindSpotWithdraw, KindSpotRefund}[g.r.IntN(3)]
	case 27:
		*c = Command{Kind: KindAdjust, User: u.id, Asset: genUSDT, Amount: []Units{0, math.MinInt64}[g.r.IntN(2)], Key: g.newKey("r")}
	case 28:
		*c = Command{Kind: KindSpotDeposit + Kind(g.r.IntN(4)), User: u.id, Amount: 1, Key: g.newKey("r"),
			Asset: []AssetID{0, 4, MaxAssets, MaxAssets + 1, math.MaxUint32}[g.r.IntN(5)]}
	case 29:
		*c = Command{Kind: KindSpotDeposit + Kind(g.r.IntN(4)), User: u.id, Asset: genBTC, Amount: 1}
		if g.r.IntN(2) == 0 {
			c.Key = nonCanonicalKey()
		}
	case 30:
		*c = Command{Kind: []Kind{KindSpotDeposit, KindSpotWithdraw, KindSpotRefund}[g.r.IntN(3)], User: FeeUser,
			Asset: genUSDT, Amount: 1, Key: g.newKey("r")}
	case 31: // more than anyone holds
		*c = Command{Kind: KindSpotWithdraw, User: u.id, Asset: AssetID(1 + g.r.IntN(genAssets)), Amount: math.MaxInt64,
			Key: g.newKey("r")}
		if g.r.IntN(2) == 0 {
			c.Kind, c.Amount = KindAdjust, -(u.avail[c.Asset] + 1)
		}
	case 32: // a refund of nothing, or of another amount than was withdrawn
		*c = Command{Kind: KindSpotRefund, User: u.id, Asset: genUSDT, Amount: 5, Key: g.newKey("r")}
		if len(g.withdrawn) > 0 {
			w := g.withdrawn[g.r.IntN(len(g.withdrawn))]
			*c = Command{Kind: KindSpotRefund, User: w.user, Asset: w.asset, Amount: w.amount + 1, Key: w.key}
		}
	case 33: // a req_id reused with different parameters
		if len(g.ops) == 0 {
			*c = Command{Kind: KindSpotDeposit, User: u.id, Asset: genUSDT, Amount: 0, Key: g.newKey("r")}
			break
		}
		op := g.ops[g.r.IntN(len(g.ops))]
		*c = Command{Kind: op.kind, User: op.user, Asset: op.asset, Amount: op.amount, Key: op.key}
		switch g.r.IntN(3) {
		case 0:
			c.Amount++
			if c.Amount == 0 {
				c.Amount = 2 // an adjustment of -1 became 0: keep it a conflict, not a bad amount
			}
		case 1:
			c.User++
		default:
			c.Asset = genAssets + 1 - c.Asset + 1
			if c.Asset > genAssets || c.Asset == op.asset {
				c.Asset = op.asset%genAssets + 1
			}
		}
	case 34: // a deposit that overflows the asset's total
		*c = Command{Kind: KindSpotDeposit, User: u.id, Asset: AssetID(1 + g.r.IntN(genAssets)), Amount: math.MaxInt64,
			Key: g.newKey("r")}
	case 35:
		*c = Command{Kind: KindSetAccountStatus, User: u.id, Status: AccountStatus(3 + g.r.IntN(253))}
	case 36:
		*c = Command{Kind: []Kind{KindHaltMarket, KindResumeMarket}[g.r.IntN(2)],
			Market: []MarketID{0, 3, MaxMarkets + 1, math.MaxUint32}[g.r.IntN(4)]}
	case 37:
		if g.halted[m] {
			*c = Command{Kind: KindTick, Flags: 2}
			break
		}
		*c = Command{Kind: KindResumeMarket, Market: m} // NOT_HALTED
	case 38:
		*c = Command{Kind: KindTick, Flags: []uint8{2, 3, 128, 255}[g.r.IntN(4)]}
	case 39:
		*c = Command{Kind: []Kind{0, kindMax + 1, 100, 255, KindDebugPanic}[g.r.IntN(5)], User: u.id}
	case 40:
		*c = Command{Kind: KindConfigAsset, Asset: []AssetID{0, MaxAssets + 1, math.MaxUint32}[g.r.IntN(3)], BaseScale: 2}
	case 41:
		*c = Command{Kind: KindConfigAsset, Asset: 5, BaseScale: MaxBaseScale + 1 + uint8(g.r.IntN(3))}
		if g.r.IntN(2) == 0 {
			c.Asset, c.BaseScale = genBTC, genScales[genBTC]+1 // a scale never changes
		}
	case 42, 43:
		*c = Command{Kind: KindConfigMarket, Market: m, Cfg: *cfg}
		switch g.r.IntN(12) {
		case 0:
			c.Cfg.Tick = 0
		case 1:
			c.Cfg.Lot = -cfg.Lot
		case 2:
			c.Cfg.Quote = c.Cfg.Base
		case 3:
			c.Cfg.Base = 7 // not configured
		case 4:
			c.Cfg.MakerFee = MaxFeeRate + 1
		case 5:
			c.Cfg.TakerFee = -1
		case 6:
			c.Cfg.Tick = cfg.Tick / 10 // tick*lot no longer a multiple of 10^scale
		case 7:
			c.Cfg.BaseScale++
		case 8:
			c.Cfg.MinQty = cfg.Lot + 1
		case 9:
			c.Cfg.MaxQty = cfg.MinQty - cfg.Lot
		case 10:
			c.Market = []MarketID{0, MaxMarkets + 1}[g.r.IntN(2)]
		default:
			c.Cfg.Tick, c.Cfg.Lot = math.MaxInt64, math.MaxInt64
		}
	case 44: // harmless repeats: the same asset config, the same market config
		g.mustReject = false
		if g.r.IntN(2) == 0 {
			*c = Command{Kind: KindConfigAsset, Asset: genUSDT, BaseScale: genScales[genUSDT]}
		} else {
			*c = Command{Kind: KindConfigMarket, Market: m, Cfg: *cfg} // MARKET_EXISTS while orders rest
		}
	case 45: // the whale bids ~MaxInt64/2 at the lowest price: two such orders on one level sum past MaxInt64
		g.mustReject = false
		wc := &genMarketCfgs[1]
		*c = Command{Kind: KindPlaceOrder, User: g.users[0].id, Market: 1, Side: Buy, Type: Limit, TIF: GTC,
			Price: wc.Tick, Qty: (wc.MaxQty/2 + Units(g.r.Int64N(1<<50))) / wc.Lot * wc.Lot}
	default: // a sell resting at a price whose notional overflows: legal, and it must never trade
		g.mustReject = false
		c.Side, c.Price, c.Qty = Sell, Price(math.MaxInt64)/cfg.Tick*cfg.Tick, cfg.MinQty
	}
}

// observe feeds back the events of the last command.
func (g *gen) observe(evs []Event) {
	for i := range evs {
		e := &evs[i]
		switch e.Kind {
		case EvBalance:
			if u, ok := g.userAt[e.User]; ok && e.Asset <= genAssets {
				g.users[u].avail[e.Asset] += e.DAvail
			}
		case EvOrderAccepted:
			g.accepted(e)
		case EvOrderPartiallyFilled:
			if j, ok := g.liveAt[e.OrderID]; ok {
				g.live[j].rem = e.Amount
			}
		case EvOrderFilled, EvOrderCancelled, EvOrderExpired:
			g.closed(e.OrderID)
		case EvOrderModified:
			if j, ok := g.liveAt[e.OrderID]; ok {
				g.live[j].price, g.live[j].total = e.Price, e.Qty
			}
		case EvTrade:
			if e.Market <= 2 && e.Price%genStep[e.Market] == 0 {
				g.mid[e.Market] = e.Price
			}
		case EvMarketHalted:
			if e.Market <= 2 {
				g.halted[e.Market] = true
			}
		case EvMarketResumed:
			if e.Market <= 2 {
				g.halted[e.Market] = false
			}
		case EvAccountStatus:
			if u, ok := g.userAt[e.User]; ok {
				g.users[u].status = e.AcctSt
			}
		case EvP2PTransfer:
			g.p2pLast = max(g.p2pLast, uint64(e.OrderID))
			if P2PStatus(e.Detail) == P2PPending {
				g.p2pFrom = append(g.p2pFrom, e.User) // ids are dense: p2pFrom[id-1]
			}
		case EvTransfer:
			if e.CmdKind == KindSpotWithdraw && e.Code == OK && e.Flags == 0 {
				g.withdrawn = append(g.withdrawn, genOp{kind: KindSpotWithdraw, user: e.User, asset: e.Asset,
					amount: e.Amount, key: e.Key})
			}
		}
	}
}

func (g *gen) accepted(e *Event) {
	if j, ok := g.liveAt[e.OrderID]; ok { // a modify re-entered the order
		g.live[j].price, g.live[j].rem = e.Price, e.Qty
		return
	}
	if e.Market > 2 {
		return
	}
	total := e.Qty
	if g.last.Kind == KindPlaceOrder && g.last.Qty > 0 {
		total = g.last.Qty
	}
	g.liveAt[e.OrderID] = len(g.live)
	g.live = append(g.live, genOrder{id: e.OrderID, user: e.User, market: e.Market, side: e.Side,
		price: e.Price, total: total, rem: e.Qty, key: e.Key})
	g.liveIn[e.Market]++
}

func (g *gen) closed(id OrderID) {
	j, ok := g.liveAt[id]
	if !ok {
		return
	}
	g.liveIn[g.live[j].market]--
	last := len(g.live) - 1
	if j != last {
		g.live[j] = g.live[last]
		g.liveAt[g.live[j].id] = j
	}
	g.live = g.live[:last]
	delete(g.liveAt, id)
	if len(g.dead) < 256 {
		g.dead = append(g.dead, id)
	} else {
		g.dead[g.r.IntN(len(g.dead))] = id
	}
}
