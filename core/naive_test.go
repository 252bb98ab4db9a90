package core

// This file is a deliberately naive reference exchange for the differential
// test: resting orders live in one unordered slice, the best maker is found by
// a linear scan over (price, arrival), and balances are plain maps. It is
// written from the rules, not from the core's code:
//
//   - a fill trades at the maker's price; notional = price*qty/10^scale (exact);
//   - fee = floor(notional * rate / 1e6) at the maker's or the taker's rate;
//     the buyer pays notional + its fee in quote, the seller receives
//     notional - its fee, and the fee account (user 0) receives both fees;
//   - a LIMIT buy freezes notional(limit, qty) + the floor fee at max(maker,
//     taker); a sell freezes its base quantity; a MARKET buy by base quantity
//     freezes exactly what its walk of the book will cost; a MARKET buy by quote
//     freezes its budget (fees included); whatever is left is released at the end;
//   - STP cancel-resting cancels the own maker and keeps matching; STP
//     expire-taker stops at the first own maker and expires the remainder
//     whatever the time in force (nothing may rest crossed);
//   - a MARKET buy by quote is FILLED when its leftover budget cannot buy one
//     more lot at the best remaining ask (or, if the book ran dry, at the last
//     fill's price, since no later ask could be cheaper), otherwise EXPIRED;
//   - spot transfers and adjustments are idempotent by (kind, req_id), and
//     their explicit failures are recorded and repeated.
//
// Validation order (which code wins when several apply) follows the core's
// documented contract: identity, market, side/STP, shape, account, duplicate
// client id, funds, then POST_ONLY / FOK.

import (
	"fmt"
	"sort"
)

type nvOrder struct {
	id      OrderID
	user    UserID
	market  MarketID
	side    Side
	tif     TimeInForce
	stp     STP
	price   Price
	qty     Units // total base quantity; unused (0) for a MARKET buy by quote
	filled  Units
	frozen  Units // still held: quote for buys, base for sells
	key     Key
	arrival uint64 // time priority among equal prices; smaller is earlier
}

func (o *nvOrder) rem() Units { return o.qty - o.filled }

type nvBal struct{ avail, frozen Units }

type nvOpKey struct {
	kind Kind
	key  Key
}

type nvOp struct {
	user   UserID
	asset  AssetID
	amount Units
	code   Code
}

// nvTrade is one fill as the reference model sees it.
type nvTrade struct {
	price              Price
	qty                Units
	maker, taker       OrderID
	makerU, takerU     UserID
	makerFee, takerFee Units
}

// nvOutcome is what a command returned: its code and the RESULT fields.
type nvOutcome struct {
	code    Code
	orderID OrderID
	status  OrderStatus
	filled  Units
	trades  []nvTrade
}

type naiveBook struct {
	scale     map[AssetID]uint8
	cfg       map[MarketID]MarketCfg
	halted    map[MarketID]bool
	exists    map[UserID]bool
	status    map[UserID]AccountStatus
	bal       map[UserID]map[AssetID]*nvBal
	resting   []*nvOrder
	clock     uint64
	nextID    OrderID
	nextTrade uint64
	ops       map[nvOpKey]nvOp
}

func newNaiveBook() *naiveBook {
	return &naiveBook{
		scale: map[AssetID]uint8{}, cfg: map[MarketID]MarketCfg{}, halted: map[MarketID]bool{},
		exists: map[UserID]bool{FeeUser: true}, status: map[UserID]AccountStatus{},
		bal: map[UserID]map[AssetID]*nvBal{}, nextID: 1, nextTrade: 1, ops: map[nvOpKey]nvOp{},
	}
}

// --- arithmetic: plain int64 with loud overflow (the generator stays small) ---

func nvMul(a, b int64) int64 {
	if a < 0 || b < 0 {
		panic(fmt.Sprintf("naive: negative operand %d * %d", a, b))
	}
	if a != 0 && b > (1<<63-1)/a {
		panic(fmt.Sprintf("naive: overflow %d * %d (generator out of range)", a, b))
	}
	return a * b
}

func nvNotional(price Price, qty Units, scale uint8) Units {
	d := int64(1)
	for i := uint8(0); i < scale; i++ {
		d *= 10
	}
	p := nvMul(int64(price), int64(qty))
	if p%d != 0 {
		panic(fmt.Sprintf("naive: inexact notional %d*%d/10^%d", price, qty, scale))
	}
	return Units(p / d)
}

func nvFee(n Units, r Rate) Units { return Units(nvMul(int64(n), int64(r)) / 1_000_000) }

func nvMaxRate(c MarketCfg) Rate {
	if c.MakerFee > c.TakerFee {
		return c.MakerFee
	}
	return c.TakerFee
}

// nvTakerCost is what a buyer pays for qty at price as the taker.
func nvTakerCost(c MarketCfg, price Price, qty Units) Units {
	n := nvNotional(price, qty, c.BaseScale)
	return n + nvFee(n, c.TakerFee)
}

// nvAffordable is the largest multiple of the lot whose taker cost at price
// fits in budget, by binary search over the number of lots.
func nvAffordable(c MarketCfg, price Price, budget Units) Units {
	if budget <= 0 {
		return 0
	}
	lo, hi := int64(0), int64(budget)/int64(nvNotional(price, c.Lot, c.BaseScale))+1
	for lo < hi { // invariant: lo lots affordable; hi lots maybe not
		mid := (lo + hi + 1) / 2
		if nvTakerCost(c, price, Units(mid)*c.Lot) <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return Units(lo) * c.Lot
}

func nvCrosses(side Side, limit, makerPrice Price) bool {
	if side == Buy {
		return makerPrice <= limit
	}
	return makerPrice >= limit
}

func nvOpposite(s Side) Side {
	if s == Buy {
		return Sell
	}
	return Buy
}

// --- balances ---

func (n *naiveBook) b(u UserID, a AssetID) *nvBal {
	m := n.bal[u]
	if m == nil {
		m = map[AssetID]*nvBal{}
		n.bal[u] = m
	}
	x := m[a]
	if x == nil {
		x = &nvBal{}
		m[a] = x
	}
	return x
}

func (n *naiveBook) heldAsset(o *nvOrder) AssetID {
	c := n.cfg[o.market]
	if o.side == Buy {
		return c.Quote
	}
	return c.Base
}

// release gives back everything an order still holds.
func (n *naiveBook) release(o *nvOrder) {
	x := n.b(o.user, n.heldAsset(o))
	x.frozen -= o.frozen
	x.avail += o.frozen
	o.frozen = 0
}

// --- the book ---

// better reports whether maker a has priority over maker b (same side).
func nvBetter(a, b *nvOrder) bool {
	if a.price != b.price {
		if a.side == Buy {
			return a.price > b.price
		}
		return a.price < b.price
	}
	return a.arrival < b.arrival
}

// best is the highest-priority resting order on side of market, by linear scan.
func (n *naiveBook) best(m MarketID, side Side) *nvOrder {
	var best *nvOrder
	for _, o := range n.resting {
		if o.market == m && o.side == side && (best == nil || nvBetter(o, best)) {
			best = o
		}
	}
	return best
}

// priority returns the resting orders of one side in priority order (a copy).
func (n *naiveBook) priority(m MarketID, side Side) []*nvOrder {
	var out []*nvOrder
	for _, o := range n.resting {
		if o.market == m && o.side == side {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return nvBetter(out[i], out[j]) })
	return out
}

func (n *naiveBook) remove(o *nvOrder) {
	for i, r := range n.resting {
		if r == o {
			n.resting = append(n.resting[:i], n.resting[i+1:]...)
			return
		}
	}
	panic("naive: removing an order that does not rest")
}

func (n *naiveBook) rest(o *nvOrder) {
	n.clock++
	o.arrival = n.clock
	n.resting = append(n.resting, o)
}

// walk looks at what a taker of user on side could fill (limit 0 = any price)
// up to maxQty without changing anything: own makers are skipped under STP
// cancel-resting (they would be cancelled) and end the walk under expire-taker.
// It returns the fillable quantity and its taker cost in quote.
func (n *naiveBook) walk(m MarketID, user UserID, side Side, limit Price, maxQty Units, stp STP) (Units, Units) {
	c := n.cfg[m]
	var got, cost Units
	for _, o := range n.priority(m, nvOpposite(side)) {
		if got >= maxQty || (limit != 0 && !nvCrosses(side, limit, o.price)) {
			break
		}
		if o.user == user {
			if stp == STPExpireTaker {
				break
			}
			continue
		}
		q := min(o.rem(), maxQty-got)
		got += q
		cost += nvTakerCost(c, o.price, q)
	}
	return got, cost
}

// match runs taker t against the book. It reports whether it stopped at an own
// maker under STP expire-taker, and the price of its last fill.
func (n *naiveBook) match(t *nvOrder, limit, byQuote bool, out *nvOutcome) (stpStop bool, last Price) {
	c := n.cfg[t.market]
	for byQuote || t.rem() > 0 {
		mk := n.best(t.market, nvOpposite(t.side))
		if mk == nil || (limit && !nvCrosses(t.side, t.price, mk.price)) {
			return false, last
		}
		if mk.user == t.user {
			if t.stp == STPExpireTaker {
				return true, last
			}
			n.remove(mk)
			n.release(mk)
			continue
		}
		q := mk.rem()
		if byQuote {
			q = min(q, nvAffordable(c, mk.price, t.frozen))
			if q == 0 {
				return false, last
			}
		} else {
			q = min(q, t.rem())
		}
		n.fill(t, mk, q, out)
		last = mk.price
	}
	return false, last
}

func (n *naiveBook) fill(t, mk *nvOrder, q Units, out *nvOutcome) {
	c := n.cfg[t.market]
	notional := nvNotional(mk.price, q, c.BaseScale)
	mf, tf := nvFee(notional, c.MakerFee), nvFee(notional, c.TakerFee)
	buyer, seller, bf, sf := t, mk, tf, mf
	if t.side == Sell {
		buyer, seller, bf, sf = mk, t, mf, tf
	}
	buyer.frozen -= notional + bf
	n.b(buyer.user, c.Quote).frozen -= notional + bf
	n.b(buyer.user, c.Base).avail += q
	seller.frozen -= q
	n.b(seller.user, c.Base).frozen -= q
	n.b(seller.user, c.Quote).avail += notional - sf
	n.b(FeeUser, c.Quote).avail += mf + tf
	if buyer.frozen < 0 || seller.frozen < 0 {
		panic(fmt.Sprintf("naive: order frozen went negative (buyer %d, seller %d)", buyer.frozen, seller.frozen))
	}
	t.filled += q
	mk.filled += q
	out.trades = append(out.trades, nvTrade{price: mk.price, qty: q, maker: mk.id, taker: t.id,
		makerU: mk.user, takerU: t.user, makerFee: mf, takerFee: tf})
	n.nextTrade++
	if mk.rem() == 0 {
		n.remove(mk)
		n.release(mk)
	}
}

func nvQtyCode(q Units, c MarketCfg) Code {
	switch {
	case q <= 0 || q%c.Lot != 0:
		return CodeInvalidQuantity
	case q < c.MinQty:
		return CodeQuantityTooSmall
	case q > c.MaxQty:
		return CodeQuantityTooLarge
	}
	return OK
}

func (n *naiveBook) openOrders(u UserID) int {
	k := 0
	for _, o := range n.resting {
		if o.user == u {
			k++
		}
	}
	return k
}

// --- commands ---

func (n *naiveBook) apply(c *Command) nvOutcome {
	switch c.Kind {
	case KindConfigAsset:
		if _, ok := n.scale[c.Asset]; !ok {
			n.scale[c.Asset] = c.BaseScale
		}
		return nvOutcome{}
	case KindConfigMarket:
		n.cfg[c.Market] = c.Cfg
		return nvOutcome{}
	case KindPlaceOrder:
		return n.place(c)
	case KindCancelOrder:
		return n.cancel(c)
	case KindModifyOrder:
		return n.modify(c)
	case KindSpotDeposit, KindSpotWithdraw, KindSpotRefund, KindAdjust:
		return n.transfer(c)
	case KindSetAccountStatus:
		if c.Status > Disabled {
			return nvOutcome{code: CodeInvalidStatus}
		}
		n.exists[c.User] = true
		n.status[c.User] = c.Status
		return nvOutcome{}
	case KindHaltMarket:
		if _, ok := n.cfg[c.Market]; !ok {
			return nvOutcome{code: CodeInvalidMarket}
		}
		n.halted[c.Market] = true
		return nvOutcome{}
	case KindResumeMarket:
		if _, ok := n.cfg[c.Market]; !ok {
			return nvOutcome{code: CodeInvalidMarket}
		}
		if !n.halted[c.Market] {
			return nvOutcome{code: CodeNotHalted}
		}
		n.halted[c.Market] = false
		return nvOutcome{}
	}
	panic(fmt.Sprintf("naive: command kind %v not modelled", c.Kind))
}

// placeCheck returns the rejection code of a new order (OK to go on) and what to freeze.
func (n *naiveBook) placeCheck(c *Command) (Code, Units, OrderID) {
	if c.User == FeeUser {
		return CodeFeeAccountCannotTrade, 0, 0
	}
	mc, ok := n.cfg[c.Market]
	if !ok {
		return CodeInvalidMarket, 0, 0
	}
	if n.halted[c.Market] {
		return CodeMarketHalted, 0, 0
	}
	if c.Side != Buy && c.Side != Sell {
		return CodeInvalidSide, 0, 0
	}
	if c.STP != STPCancelResting && c.STP != STPExpireTaker {
		return CodeInvalidCommand, 0, 0
	}
	byQuote := false
	switch c.Type {
	case Limit:
		if c.TIF != GTC && c.TIF != IOC && c.TIF != FOK && c.TIF != PostOnly {
			return CodeInvalidTimeInForce, 0, 0
		}
		if c.Price <= 0 || c.Price%mc.Tick != 0 {
			return CodeInvalidPrice, 0, 0
		}
		if c.QuoteQty != 0 {
			return CodeInvalidQuantity, 0, 0
		}
	case Market:
		if c.TIF != 0 && c.TIF != IOC {
			return CodeInvalidTimeInForce, 0, 0
		}
		if c.Price != 0 {
			return CodeInvalidPrice, 0, 0
		}
		if c.QuoteQty != 0 {
			if c.Side != Buy || c.Qty != 0 || c.QuoteQty < 0 {
				return CodeInvalidQuantity, 0, 0
			}
			byQuote = true
		}
	default:
		return CodeInvalidOrderType, 0, 0
	}
	if !byQuote {
		if code := nvQtyCode(c.Qty, mc); code != OK {
			return code, 0, 0
		}
	}
	if !n.exists[c.User] {
		return CodeInsufficientBalance, 0, 0
	}
	switch n.status[c.User] {
	case Frozen:
		return CodeAccountFrozen, 0, 0
	case Disabled:
		return CodeAccountDisabled, 0, 0
	}
	if !c.Key.IsZero() {
		for _, o := range n.resting {
			if o.user == c.User && o.key == c.Key {
				return CodeDuplicateClientOrderID, 0, o.id
			}
		}
	}
	var freeze Units
	asset := mc.Base
	switch {
	case c.Side == Sell:
		freeze = c.Qty
	case c.Type == Limit:
		asset = mc.Quote
		nt := nvNotional(c.Price, c.Qty, mc.BaseScale)
		freeze = nt + nvFee(nt, nvMaxRate(mc))
	case byQuote:
		asset, freeze = mc.Quote, c.QuoteQty
	default:
		asset = mc.Quote
		q, cost := n.walk(c.Market, c.User, Buy, 0, c.Qty, c.STP)
		if q == 0 {
			return CodeNoLiquidity, 0, 0
		}
		freeze = cost
	}
	if c.Type == Market {
		if q, _ := n.walk(c.Market, c.User, c.Side, 0, mc.Lot, c.STP); q == 0 {
			return CodeNoLiquidity, 0, 0
		}
	}
	if n.b(c.User, asset).avail < freeze {
		return CodeInsufficientBalance, 0, 0
	}
	if c.Type == Limit {
		switch c.TIF {
		case PostOnly:
			if o := n.best(c.Market, nvOpposite(c.Side)); o != nil && nvCrosses(c.Side, c.Price, o.price) {
				return CodePostOnlyWouldTake, 0, 0
			}
		case FOK:
			if q, _ := n.walk(c.Market, c.User, c.Side, c.Price, c.Qty, c.STP); q < c.Qty {
				return CodeFOKNotFilled, 0, 0
			}
		}
		if (c.TIF == GTC || c.TIF == PostOnly) && n.openOrders(c.User) >= MaxOpenOrdersPerUser {
			return CodeTooManyOpenOrders, 0, 0
		}
	}
	return OK, freeze, 0
}

func (n *naiveBook) place(c *Command) nvOutcome {
	code, freeze, dup := n.placeCheck(c)
	if code != OK {
		return nvOutcome{code: code, status: StatusRejected, orderID: dup}
	}
	mc := n.cfg[c.Market]
	byQuote := c.Type == Market && c.QuoteQty > 0
	o := &nvOrder{id: n.nextID, user: c.User, market: c.Market, side: c.Side, tif: c.TIF, stp: c.STP,
		price: c.Price, qty: c.Qty, key: c.Key, frozen: freeze}
	n.nextID++
	held := n.b(c.User, n.heldAsset(o))
	held.avail -= freeze
	held.frozen += freeze
	out := nvOutcome{orderID: o.id}
	stpStop, last := n.match(o, c.Type == Limit, byQuote, &out)
	out.filled = o.filled
	rests := c.Type == Limit && (c.TIF == GTC || c.TIF == PostOnly)
	switch {
	case byQuote:
		out.status = StatusExpired
		if o.filled > 0 {
			price := last
			if b := n.best(c.Market, Sell); b != nil {
				price = b.price
			}
			if nvAffordable(mc, price, o.frozen) == 0 {
				out.status = StatusFilled
			}
		}
		n.release(o)
	case o.rem() == 0:
		out.status = StatusFilled
		n.release(o)
	case rests && !stpStop:
		out.status = StatusNew
		if o.filled > 0 {
			out.status = StatusPartiallyFilled
		}
		n.rest(o)
	default:
		out.status = StatusExpired
		n.release(o)
	}
	return out
}

// own finds c.User's resting order by id, or by client id when the id is 0.
func (n *naiveBook) own(c *Command) (*nvOrder, Code) {
	var found *nvOrder
	for _, o := range n.resting {
		if (c.OrderID != 0 && o.id == c.OrderID) ||
			(c.OrderID == 0 && !c.Key.IsZero() && o.user == c.User && o.key == c.Key) {
			found = o
		}
	}
	if found == nil || found.user != c.User || (c.Market != 0 && c.Market != found.market) {
		return nil, CodeOrderNotFound
	}
	if n.halted[found.market] {
		return nil, CodeMarketHalted
	}
	return found, OK
}

func (n *naiveBook) cancel(c *Command) nvOutcome {
	o, code := n.own(c)
	if code != OK {
		return nvOutcome{code: code}
	}
	n.remove(o)
	n.release(o)
	return nvOutcome{orderID: o.id, status: StatusCancelled, filled: o.filled}
}

func (n *naiveBook) modify(c *Command) nvOutcome {
	o, code := n.own(c)
	if code != OK {
		return nvOutcome{code: code}
	}
	switch n.status[c.User] {
	case Frozen:
		return nvOutcome{code: CodeAccountFrozen}
	case Disabled:
		return nvOutcome{code: CodeAccountDisabled}
	}
	mc := n.cfg[o.market]
	price, qty := o.price, o.qty
	if c.Price != 0 {
		price = c.Price
	}
	if c.Qty != 0 {
		qty = c.Qty
	}
	if price <= 0 || price%mc.Tick != 0 {
		return nvOutcome{code: CodeInvalidPrice}
	}
	if code := nvQtyCode(qty, mc); code != OK {
		return nvOutcome{code: code}
	}
	if qty <= o.filled {
		return nvOutcome{code: CodeInvalidQuantity}
	}
	if price == o.price && qty == o.qty {
		return nvOutcome{code: CodeNothingToModify}
	}
	need := qty - o.filled
	if o.side == Buy {
		nt := nvNotional(price, qty-o.filled, mc.BaseScale)
		need = nt + nvFee(nt, nvMaxRate(mc))
	}
	held := n.b(o.user, n.heldAsset(o))
	status := func() OrderStatus {
		if o.filled > 0 {
			return StatusPartiallyFilled
		}
		return StatusNew
	}
	if price == o.price && qty < o.qty { // shrink in place: keeps priority
		o.qty = qty
		if o.frozen > need {
			held.avail += o.frozen - need
			held.frozen -= o.frozen - need
			o.frozen = need
		}
		return nvOutcome{orderID: o.id, status: status(), filled: o.filled}
	}
	if held.avail+o.frozen < need {
		return nvOutcome{code: CodeInsufficientBalance}
	}
	if o.tif == PostOnly {
		if b := n.best(o.market, nvOpposite(o.side)); b != nil && nvCrosses(o.side, price, b.price) {
			return nvOutcome{code: CodePostOnlyWouldTake}
		}
	}
	// Re-enter: off the book, hold exactly the new requirement, trade as a taker.
	n.remove(o)
	held.avail -= need - o.frozen
	held.frozen += need - o.frozen
	o.frozen = need
	o.price, o.qty = price, qty
	out := nvOutcome{orderID: o.id}
	stpStop, _ := n.match(o, true, false, &out)
	out.filled = o.filled
	switch {
	case o.rem() == 0:
		out.status = StatusFilled
		n.release(o)
	case !stpStop:
		out.status = status()
		n.rest(o)
	default:
		out.status = StatusExpired
		n.release(o)
	}
	return out
}

func (n *naiveBook) transfer(c *Command) nvOutcome {
	if c.Key.IsZero() {
		return nvOutcome{code: CodeInvalidKey}
	}
	if _, ok := n.scale[c.Asset]; !ok {
		return nvOutcome{code: CodeInvalidAsset}
	}
	if c.Amount == 0 || (c.Kind != KindAdjust && c.Amount < 0) {
		return nvOutcome{code: CodeInvalidAmount}
	}
	k := nvOpKey{c.Kind, c.Key}
	if r, ok := n.ops[k]; ok {
		if r.user != c.User || r.asset != c.Asset || r.amount != c.Amount {
			return nvOutcome{code: CodeReqIDConflict}
		}
		return nvOutcome{code: r.code}
	}
	if c.User == FeeUser && c.Kind != KindAdjust {
		return nvOutcome{code: CodeInvalidUser} // not recorded
	}
	credit := c.Amount > 0 && c.Kind != KindSpotWithdraw
	amt := c.Amount
	if amt < 0 {
		amt = -amt
	}
	code := OK
	switch {
	case credit && c.Kind == KindSpotDeposit && n.exists[c.User] && n.status[c.User] == Disabled:
		code = CodeAccountDisabled
	case credit && c.Kind == KindSpotRefund:
		w, ok := n.ops[nvOpKey{KindSpotWithdraw, c.Key}]
		if !ok || w.code != OK || w.user != c.User || w.asset != c.Asset || w.amount != c.Amount {
			code = CodeRefundWithoutWithdraw
		}
	case credit:
	case !n.exists[c.User]:
		code = CodeInsufficientBalance
	case c.Kind == KindSpotWithdraw && n.status[c.User] == Frozen:
		code = CodeAccountFrozen
	case c.Kind == KindSpotWithdraw && n.status[c.User] == Disabled:
		code = CodeAccountDisabled
	case n.b(c.User, c.Asset).avail < amt:
		code = CodeInsufficientBalance
	}
	n.ops[k] = nvOp{user: c.User, asset: c.Asset, amount: c.Amount, code: code}
	if code == OK {
		if credit {
			n.exists[c.User] = true
			n.b(c.User, c.Asset).avail += amt
		} else {
			n.b(c.User, c.Asset).avail -= amt
		}
	}
	return nvOutcome{code: code}
}
