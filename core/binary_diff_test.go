package core

// binary_diff_test.go checks the binary-market matching of the core against
// a deliberately naive reference on random streams: the reference keeps
// orders in a flat list in the users' own terms (outcome, side, own
// price), finds the maker of every fill by sorting the crossing orders by
// book price and arrival, and settles each of the four fill kinds from
// first principles (each party pays or receives its own price x q, fee =
// floor(notional x rate), mint/burn move payout x q in or out of the
// reserve). After every command the result code, the fills (maker, taker,
// price, qty, kind), every quote balance, every position, the reserve, the
// pnl pool and every resting order must agree.

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

const (
	nbMarket MarketID = 1
	nbQuote  AssetID  = 1
	nbPayout Units    = 10_000
	nbUsers           = 6
	nbFund   Units    = 10_000_000
)

type nbOrder struct {
	id     OrderID
	user   UserID
	out    Outcome
	side   Side  // own side
	price  Price // own price
	rem    Units
	frozen Units
}

// bookSide and bookPrice: the YES book's terms of the order.
func (o *nbOrder) bookSide() Side {
	if o.out == OutcomeNo {
		return 3 - o.side
	}
	return o.side
}

func (o *nbOrder) bookPrice() Price {
	if o.out == OutcomeNo {
		return Price(nbPayout) - o.price
	}
	return o.price
}

type nbPos struct{ yes, no, yesPend, noPend, yesCost, noCost Units }

type nbFill struct {
	maker, taker OrderID
	price        Price // book price
	qty          Units
	kind         FillKind
}

type naiveBinary struct {
	maker, taker Rate
	avail        map[UserID]Units
	frozen       map[UserID]Units
	pos          map[UserID]*nbPos
	orders       []*nbOrder // resting, in arrival order
	reserve, pnl Units
	nextID       OrderID
}

func newNaiveBinary(maker, taker Rate) *naiveBinary {
	n := &naiveBinary{maker: maker, taker: taker, avail: map[UserID]Units{}, frozen: map[UserID]Units{},
		pos: map[UserID]*nbPos{}, nextID: 1}
	for u := UserID(1); u <= nbUsers; u++ {
		n.avail[u] = nbFund
		n.pos[u] = &nbPos{}
	}
	return n
}

func (n *naiveBinary) maxRate() Rate { return max(n.maker, n.taker) }

func nbFee(x Units, r Rate) Units { return x * Units(r) / Units(RateDenominator) }

func (n *naiveBinary) hold(price Price, qty Units) Units {
	x := Units(price) * qty
	return x + nbFee(x, n.maxRate())
}

func (p *nbPos) vol(o Outcome) *Units {
	if o == OutcomeYes {
		return &p.yes
	}
	return &p.no
}

func (p *nbPos) pend(o Outcome) *Units {
	if o == OutcomeYes {
		return &p.yesPend
	}
	return &p.noPend
}

func (p *nbPos) cost(o Outcome) *Units {
	if o == OutcomeYes {
		return &p.yesCost
	}
	return &p.noCost
}

// crosses reports whether resting r is a counterparty of taker t at t's limit.
func nbCrosses(t, r *nbOrder) bool {
	if r.bookSide() == t.bookSide() {
		return false
	}
	if t.bookSide() == Buy {
		return r.bookPrice() <= t.bookPrice()
	}
	return r.bookPrice() >= t.bookPrice()
}

// queue is the resting counterparties of t, best book price first, then arrival.
func (n *naiveBinary) queue(t *nbOrder) []*nbOrder {
	var q []*nbOrder
	for _, r := range n.orders {
		if nbCrosses(t, r) {
			q = append(q, r)
		}
	}
	sort.SliceStable(q, func(i, j int) bool {
		if q[i].bookPrice() != q[j].bookPrice() {
			if t.bookSide() == Buy {
				return q[i].bookPrice() < q[j].bookPrice()
			}
			return q[i].bookPrice() > q[j].bookPrice()
		}
		return q[i].id < q[j].id
	})
	return q
}

func (n *naiveBinary) remove(o *nbOrder) {
	for i, r := range n.orders {
		if r == o {
			n.orders = append(n.orders[:i], n.orders[i+1:]...)
			return
		}
	}
}

// release returns what o still holds.
func (n *naiveBinary) release(o *nbOrder) {
	if o.side == Buy {
		n.avail[o.user] += o.frozen
		n.frozen[o.user] -= o.frozen
	} else {
		*n.pos[o.user].pend(o.out) -= o.frozen
	}
	o.frozen = 0
}

// place applies a limit order and returns its code and fills.
func (n *naiveBinary) place(c *Command) (Code, []nbFill) {
	t := &nbOrder{user: c.User, out: Outcome(c.Flags), side: c.Side, price: c.Price, rem: c.Qty}
	ps := n.pos[c.User]
	if c.Side == Buy {
		if h := n.hold(c.Price, c.Qty); n.avail[c.User] < h {
			return CodeInsufficientBalance, nil
		}
	} else if *ps.vol(t.out)-*ps.pend(t.out) < c.Qty {
		return CodeInsufficientShares, nil
	}
	// POST_ONLY and FOK look at the book as it is (own orders: skipped, or the end under expire-taker)
	q := n.queue(t)
	if c.TIF == PostOnly && len(q) > 0 {
		return CodePostOnlyWouldTake, nil
	}
	if c.TIF == FOK {
		var avail Units
		for _, r := range q {
			if r.user == t.user {
				if c.STP == STPExpireTaker {
					break
				}
				continue
			}
			avail += r.rem
		}
		if avail < c.Qty {
			return CodeFOKNotFilled, nil
		}
	}
	t.id = n.nextID
	n.nextID++
	if c.Side == Buy {
		t.frozen = n.hold(c.Price, c.Qty)
		n.avail[c.User] -= t.frozen
		n.frozen[c.User] += t.frozen
	} else {
		t.frozen = c.Qty
		*ps.pend(t.out) += c.Qty
	}
	var fills []nbFill
	stopped := false
	for _, r := range q {
		if t.rem == 0 {
			break
		}
		if r.user == t.user {
			if c.STP == STPExpireTaker {
				stopped = true
				break
			}
			n.release(r)
			n.remove(r)
			continue
		}
		qty := min(t.rem, r.rem)
		fills = append(fills, n.fill(t, r, qty))
	}
	if t.side == Buy && len(fills) > 0 && t.rem > 0 { // the taker keeps exactly what its remainder can cost
		need := n.hold(t.price, t.rem)
		n.avail[t.user] += t.frozen - need
		n.frozen[t.user] -= t.frozen - need
		t.frozen = need
	}
	if t.rem > 0 && (c.TIF == GTC || c.TIF == PostOnly) && !stopped {
		n.orders = append(n.orders, t)
	} else {
		n.release(t)
	}
	return OK, fills
}

// fill settles qty between taker t and maker r at r's book price.
func (n *naiveBinary) fill(t, r *nbOrder, qty Units) nbFill {
	bp := r.bookPrice()
	var kind FillKind
	switch {
	case t.out == r.out && t.out == OutcomeYes:
		kind = FillTransferYes
	case t.out == r.out:
		kind = FillTransferNo
	case t.side == Buy:
		kind = FillMint
	default:
		kind = FillBurn
	}
	for _, leg := range []struct {
		o    *nbOrder
		rate Rate
	}{{t, n.taker}, {r, n.maker}} {
		o := leg.o
		own := bp
		if o.out == OutcomeNo {
			own = Price(nbPayout) - bp
		}
		x := Units(own) * qty
		fee := nbFee(x, leg.rate)
		n.pnl += fee
		ps := n.pos[o.user]
		if o.side == Buy {
			o.frozen -= x + fee
			n.frozen[o.user] -= x + fee
			*ps.vol(o.out) += qty
			*ps.cost(o.out) += x + fee
		} else {
			o.frozen -= qty
			*ps.pend(o.out) -= qty
			*ps.vol(o.out) -= qty
			n.avail[o.user] += x - fee
			*ps.cost(o.out) -= x - fee
		}
		o.rem -= qty
	}
	switch kind {
	case FillMint:
		n.reserve += nbPayout * qty
	case FillBurn:
		n.reserve -= nbPayout * qty
	}
	if r.rem == 0 {
		n.release(r)
		n.remove(r)
	}
	return nbFill{maker: r.id, taker: t.id, price: bp, qty: qty, kind: kind}
}

func (n *naiveBinary) cancel(user UserID, id OrderID) Code {
	for _, r := range n.orders {
		if r.id == id && r.user == user {
			n.release(r)
			n.remove(r)
			return OK
		}
	}
	return CodeOrderNotFound
}

// nbCompare checks the core's state against the reference's.
func nbCompare(p *Processor, n *naiveBinary) string {
	for u := UserID(1); u <= nbUsers; u++ {
		b := p.BalanceOf(u, nbQuote)
		if b.Avail != n.avail[u] || b.Frozen != n.frozen[u] {
			return fmt.Sprintf("user %d quote %+v, reference avail %d frozen %d", u, b, n.avail[u], n.frozen[u])
		}
		v, _ := p.Position(u, nbMarket)
		np := n.pos[u]
		got := nbPos{v.YesVolume, v.NoVolume, v.YesPending, v.NoPending, v.YesCostSum, v.NoCostSum}
		if got != *np {
			return fmt.Sprintf("user %d position %+v, reference %+v", u, got, *np)
		}
	}
	bv, _ := p.Binary(nbMarket)
	if bv.Reserve != n.reserve || bv.PnlPool != n.pnl {
		return fmt.Sprintf("reserve %d pnl %d, reference %d %d", bv.Reserve, bv.PnlPool, n.reserve, n.pnl)
	}
	rest := p.OpenOrders(nbMarket, 0, nil)
	if len(rest) != len(n.orders) {
		return fmt.Sprintf("%d resting orders, reference %d", len(rest), len(n.orders))
	}
	byID := map[OrderID]OrderView{}
	for _, o := range rest {
		byID[o.ID] = o
	}
	for _, r := range n.orders {
		o, ok := byID[r.id]
		if !ok || o.Qty-o.Filled != r.rem || o.Frozen != r.frozen || o.Outcome != r.out || o.Side != r.bookSide() ||
			o.Price != r.bookPrice() {
			return fmt.Sprintf("order %d: core %+v, reference %+v", r.id, o, *r)
		}
	}
	return ""
}

func TestBinaryDifferential(t *testing.T) {
	seeds, cmds := 20, 3_000
	if testing.Short() {
		seeds, cmds = 6, 2_000
	}
	base := propSeed(t)
	var kinds [5]int
	for s := 0; s < seeds; s++ {
		seed := base + uint64(s)
		if msg := runBinaryDiff(seed, cmds, &kinds); msg != "" {
			t.Fatalf("seed %d (replay: -core.seed %d; this is stream %d of it): %s", seed, base, s, msg)
		}
	}
	t.Logf("fills: transfer YES %d, transfer NO %d, mint %d, burn %d", kinds[1], kinds[2], kinds[3], kinds[4])
	for k := FillTransferYes; k <= FillBurn; k++ {
		if kinds[k] < 50 {
			t.Errorf("only %d fills of kind %v: the streams do not exercise it", kinds[k], k)
		}
	}
}

func runBinaryDiff(seed uint64, cmds int, kinds *[5]int) string {
	r := rand.New(rand.NewPCG(seed, 7))
	fees := [][2]Rate{{1_000, 2_000}, {3_000, 1_000}, {0, 0}}[r.IntN(3)]
	p := New(Config{})
	nv := newNaiveBinary(fees[0], fees[1])
	var seq Seq
	apply := func(c Command) []Event {
		seq++
		c.Seq, c.Time = seq, int64(seq)
		return p.Apply(&c)
	}
	apply(Command{Kind: KindConfigAsset, Asset: nbQuote})
	apply(Command{Kind: KindConfigBinary, Market: nbMarket, Amount: nbPayout, Cfg: MarketCfg{Quote: nbQuote, Lot: 1,
		MinQty: 1, MaxQty: 1_000, MakerFee: fees[0], TakerFee: fees[1]}})
	apply(Command{Kind: KindActivate, Market: nbMarket})
	for u := UserID(1); u <= nbUsers; u++ {
		apply(Command{Kind: KindSpotDeposit, User: u, Asset: nbQuote, Amount: nbFund, Key: mkKey(fmt.Sprint("d", u))})
	}
	mid := 50
	for i := 0; i < cmds; i++ {
		u := UserID(1 + r.IntN(nbUsers))
		if len(nv.orders) > 0 && r.IntN(100) < 25 {
			o := nv.orders[r.IntN(len(nv.orders))]
			if r.IntN(10) == 0 {
				u = 1 + (o.user % nbUsers) // someone else's: not found
			}
			want := nv.cancel(u, o.id)
			ev := apply(Command{Kind: KindCancelOrder, User: u, OrderID: o.id})
			if got := ev[len(ev)-1].Code; got != want {
				return fmt.Sprintf("command %d cancel %d by %d: %v, reference %v", i, o.id, u, got, want)
			}
		} else {
			out := Outcome(1 + r.IntN(2))
			side := Side(1 + r.IntN(2))
			ref := mid
			if out == OutcomeNo {
				ref = 100 - mid
			}
			own := min(max(ref+r.IntN(11)-5, 1), 99)
			c := Command{Kind: KindPlaceOrder, User: u, Market: nbMarket, Side: side, Type: Limit,
				TIF: []TimeInForce{GTC, GTC, GTC, GTC, IOC, FOK, PostOnly}[r.IntN(7)], STP: STP(r.IntN(2)),
				Price: Price(own) * Price(nbPayout/100), Qty: Units(1 + r.IntN(60)), Flags: uint8(out)}
			if side == Sell {
				ps := nv.pos[u]
				if free := *ps.vol(out) - *ps.pend(out); free > 0 && r.IntN(8) != 0 {
					c.Qty = 1 + Units(r.Int64N(int64(min(free, 60))))
				}
			}
			want, wantFills := nv.place(&c)
			ev := apply(c)
			if got := ev[len(ev)-1].Code; got != want {
				return fmt.Sprintf("command %d %s: %v, reference %v", i, diffScript(&c), got, want)
			}
			var fills []nbFill
			for _, e := range ev {
				if e.Kind == EvTrade {
					fills = append(fills, nbFill{e.OrderID, e.OtherOrderID, e.Price, e.Qty, FillKind(e.Flags)})
				}
			}
			for _, f := range fills {
				kinds[f.kind]++
			}
			if fmt.Sprint(fills) != fmt.Sprint(wantFills) {
				return fmt.Sprintf("command %d %s: fills %v, reference %v", i, diffScript(&c), fills, wantFills)
			}
			if len(fills) > 0 && r.IntN(3) == 0 {
				mid = min(max(int(fills[0].price/Price(nbPayout/100)), 20), 80)
			}
		}
		if msg := nbCompare(p, nv); msg != "" {
			return fmt.Sprintf("after command %d: %s", i, msg)
		}
		if v := p.CheckInvariants(); len(v) != 0 {
			return fmt.Sprintf("after command %d: invariants %+v", i, v)
		}
	}
	return ""
}
