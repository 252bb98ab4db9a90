package gateway

import "github.com/ubscore/ubscore/core"

// Bounds of History. Every structure in it has one; at a bound the oldest
// finished data goes first, and live orders lose detail (never correctness
// of what the core reports: the core's own state always wins for a live
// order).
const (
	// MaxTradesPerMarket is how many recent public trades each market keeps
	// (a ring: the newest overwrite the oldest). About 40 B each.
	MaxTradesPerMarket = 1_000
	// MaxFinishedOrders is how many finished orders (FILLED, CANCELLED,
	// EXPIRED) are remembered for GET /order/{id}, evicted oldest-finished
	// first. About 150 B each plus their fills.
	MaxFinishedOrders = 200_000
	// MaxLiveOrders is how many live (resting) orders History tracks with
	// their placement details and fills. The core bounds resting orders
	// itself (core.MaxOrdersPerBook per market, core.MaxOpenOrdersPerUser per
	// user); beyond this a new live order is not tracked: it is still served
	// from the core while it rests, and its finished record is Partial.
	MaxLiveOrders = 2_000_000
	// MaxFillsPerOrder is how many fills one order lists (the first ones);
	// beyond it the order's FillsTruncated is set.
	MaxFillsPerOrder = 100
	// MaxRetainedFills bounds the fills held over all orders (56 B each).
	// When it is reached, finished orders are evicted oldest first to make
	// room; if only live orders hold fills, the new fill is not listed
	// (FillsTruncated) — filled quantities stay exact either way.
	MaxRetainedFills = 1_000_000
)

// Fill is one trade from the point of view of one order.
type Fill struct {
	TradeID uint64
	Time    int64        // unix ns of the command that made the trade
	Price   core.Price   // the maker's price
	Qty     core.Units   // base Units
	Fee     core.Units   // what this order's owner paid, in Units of the market's quote asset
	Maker   core.OrderID // the resting order
	Taker   core.OrderID // the incoming order
}

// Trade is one public trade of a market.
type Trade struct {
	ID        uint64
	Time      int64 // unix ns
	Price     core.Price
	Qty       core.Units
	TakerSide core.Side
}

// OrderRecord is what History knows about an order.
type OrderRecord struct {
	ID       core.OrderID
	User     core.UserID
	Time     int64 // unix ns of the command that placed it; 0 = unknown (Partial)
	Market   core.MarketID
	Side     core.Side
	Type     core.OrderType
	TIF      core.TimeInForce // IOC for MARKET orders
	Status   core.OrderStatus // NEW or PARTIALLY_FILLED while live, then FILLED, CANCELLED or EXPIRED
	Reason   core.Code        // a CANCELLED order: OK if its owner cancelled it, else why (SELF_TRADE_PREVENTED)
	Price    core.Price       // limit price (after any modify); 0 for MARKET
	Qty      core.Units       // total base quantity (after any modify); 0 for a MARKET BUY by quote budget
	QuoteQty core.Units       // quote budget of a MARKET BUY by quote, else 0
	Filled   core.Units       // base Units filled
	ClientID core.Key         // client order id, zero if none
	// Outcome is a binary market's order's outcome (0 on spot). Side and
	// Price are then the order's own, in its outcome's terms (as placed:
	// BUY NO @0.30), never the YES book's; Qty and Filled are shares.
	Outcome core.Outcome
	// Partial: History did not see this order placed (it started later, or
	// MaxLiveOrders was reached), so Type, TIF, Price, Qty and ClientID may
	// be zero rather than known.
	Partial bool
	// FillsTruncated: Fills does not list every fill of the order (a bound
	// was hit, or fills happened before History started).
	FillsTruncated bool
	// Fills in trade order. A slice returned by History aliases its memory:
	// valid only inside the Backend.Read that returned it.
	Fills []Fill

	// older and newer link History's records of one user, by insertion
	// (slot+1 of the neighbour, 0 = none); see History.users. Meaningless
	// in a copy.
	older, newer int32
}

// Live reports whether the order was still resting when last seen.
func (r *OrderRecord) Live() bool {
	return r.Status == core.StatusNew || r.Status == core.StatusPartiallyFilled
}

// History is the HTTP layer's bounded memory of what the core does not keep:
// recent public trades per market, the fills of orders, orders that are no
// longer in the book (finished), so GET /order/{id} can still answer, and
// each user's orders and trades for the order history and my-trades
// (history_user.go: every order and trade newer than a floor is here; older
// ones come from the Archive).
//
// Concurrency: Apply and Seed mutate and must be called with exclusive
// access — on the read-view goroutine under the view's write lock, in seq
// order, for every command (journal.Config.OnView). The query methods
// (Order, Trades, Stats) only read, and are called inside Backend.Read
// under the shared lock. History has no lock of its own.
//
// History is not journaled: after a restart it starts empty, and Seed loads
// the orders resting in the recovered core. Feeding the WAL tail through
// Apply while recovering (or a Postgres fallback, ServerConfig.Archive)
// brings older finished orders back.
//
// The zero value is ready to use.
type History struct {
	recs  [][]OrderRecord // slab of live and finished records in chunks of recChunk (never moved, so growth copies nothing); reused through free
	nrecs int32           // slots handed out so far
	free  []int32         // free slots of recs
	idx   orderIndex      // order id -> slot in recs
	live  int             // live records (<= MaxLiveOrders)
	done  []core.OrderID  // finished ids, oldest first, from doneH on (a FIFO queue)
	doneH int             // head of done
	fills int             // sum of len(Fills) over recs (<= MaxRetainedFills)

	trades [core.MaxMarkets + 1]*tradeRing // allocated on a market's first trade

	// Window is how many finished orders, and how many trades, History
	// keeps for the order history (0: MaxFinishedOrders; at most that).
	// Set it before the first Apply.
	Window int

	users    map[core.UserID]int32 // user -> slot+1 of their newest record; the list runs through older
	floor    core.OrderID          // once floorSet: every order with id >= floor has its record here
	floorSet bool                  // false: no order is known to be complete here (floor = infinity)
	belowSeq core.Seq              // the archive must have persisted this seq before orders below floor are read from it
	seq      core.Seq              // the seq of the command being applied
	mine     tradeLog              // every user's recent trades
}

// tradeRing holds a market's last MaxTradesPerMarket trades.
type tradeRing struct {
	buf  [MaxTradesPerMarket]Trade
	next int // slot of the next trade
	n    int // trades held, <= MaxTradesPerMarket
}

// HistoryStats are History's current sizes, for health and metrics.
type HistoryStats struct {
	LiveOrders     int
	FinishedOrders int
	Fills          int
}

// Apply records the effects of one command: c and evs as returned by
// core.Processor.Apply (the last event is the EvResult). Every command must
// be applied, in seq order. It does not keep c or evs.
func (h *History) Apply(c *core.Command, evs []core.Event) {
	if len(evs) == 0 {
		return
	}
	h.seq = c.Seq
	// The new order is opened before its events are read, so its own trades
	// (which come first) find it.
	if res := &evs[len(evs)-1]; c.Kind == core.KindPlaceOrder && res.Kind == core.EvResult &&
		res.Code == core.OK && res.OrderID != 0 {
		h.open(c, res.OrderID)
	}
	for i := range evs {
		e := &evs[i]
		if e.Detail != 0 && e.Payout != 0 && isOrderEvent(e.Kind) {
			h.binaryOrder(e)
		}
		switch e.Kind {
		case core.EvTrade:
			h.trade(e)
		case core.EvOrderModified:
			h.modified(e)
		case core.EvOrderFilled:
			h.finish(e, core.StatusFilled)
		case core.EvOrderCancelled:
			h.finish(e, core.StatusCancelled)
		case core.EvOrderExpired:
			h.finish(e, core.StatusExpired)
		}
	}
	// A user's cancel reports the order's filled quantity in its result:
	// that completes a Partial record (whose Qty holds the remainder).
	if res := &evs[len(evs)-1]; c.Kind == core.KindCancelOrder && res.Code == core.OK {
		if r := h.get(res.OrderID); r != nil && r.Partial && r.Status == core.StatusCancelled && r.Filled == 0 {
			r.Filled = res.Qty
			r.Qty += res.Qty
		}
	}
}

// FromStart tells History it applies the venue's commands from seq 1 (its
// warm-up, or the commands it is given, begin there): every order and trade
// is known here, so the floors start at 1 instead of at the first order
// and trade seen (a standby without the archive then knows its history is
// complete until its Window evicts). Call it before any Apply.
func (h *History) FromStart() {
	if !h.floorSet {
		h.floor, h.floorSet = 1, true
	}
	if !h.mine.floorSet {
		h.mine.floor, h.mine.floorSet = 1, true
	}
}

// Seed tracks the orders resting in p that History does not know yet (call
// it once after recovery, under the same exclusive access as Apply). Their
// earlier fills are unknown: FillsTruncated is set when Filled > 0.
func (h *History) Seed(p *core.Processor) {
	// Sized once, for every resting order and at most every account:
	// growing the two maps by doubling moved each entry once per doubling.
	n := min(p.RestingOrders(), MaxLiveOrders)
	h.idx.reserve(n)
	if h.users == nil {
		h.users = make(map[core.UserID]int32, min(n, p.Users()))
	}
	var buf []core.OrderView
	for _, m := range p.Markets() {
		buf = p.OpenOrders(m.ID, 0, buf[:0])
		for i := range buf {
			o := &buf[i]
			if _, known := h.idx.get(o.ID); known || h.live >= MaxLiveOrders {
				continue
			}
			st := core.StatusNew
			if o.Filled > 0 {
				st = core.StatusPartiallyFilled
			}
			r := OrderRecord{ID: o.ID, User: o.User, Market: o.Market, Side: o.Side, Type: core.Limit,
				TIF: o.TIF, Status: st, Price: o.Price, Qty: o.Qty, Filled: o.Filled, ClientID: o.ClientID,
				FillsTruncated: o.Filled > 0, Outcome: o.Outcome}
			if o.Outcome != 0 {
				bv, _ := p.Binary(o.Market)
				r.Side, r.Price = ownTerms(o.Outcome, o.Side, o.Price, bv.Payout)
			}
			h.insert(r)
			h.live++
		}
	}
}

// isOrderEvent reports whether k is an order lifecycle event (one that
// names an order in OrderID and, on a binary market, its outcome).
func isOrderEvent(k core.EventKind) bool {
	switch k {
	case core.EvOrderAccepted, core.EvOrderFilled, core.EvOrderPartiallyFilled, core.EvOrderCancelled,
		core.EvOrderExpired:
		return true
	}
	return false
}

// binaryOrder records the outcome of the binary order e is about, the
// first time an event names it (open cannot tell a binary order from the
// command alone: the market decides).
func (h *History) binaryOrder(e *core.Event) {
	if r := h.get(e.OrderID); r != nil && r.Outcome == 0 {
		r.Outcome = core.Outcome(e.Detail)
	}
}

// ownTerms is a binary order's side and price in its outcome's terms, from
// its book side and price (core.Event and core.OrderView carry those).
func ownTerms(out core.Outcome, bookSide core.Side, bookPrice core.Price, payout core.Units) (core.Side, core.Price) {
	if out == core.OutcomeNo {
		if bookPrice != 0 {
			bookPrice = core.Price(payout) - bookPrice
		}
		return 3 - bookSide, bookPrice
	}
	return bookSide, bookPrice
}

// open starts tracking a newly placed order.
func (h *History) open(c *core.Command, id core.OrderID) {
	if h.live >= MaxLiveOrders {
		h.raiseFloor(id + 1) // not tracked: its history is the archive's
		return
	}
	tif := c.TIF
	if c.Type == core.Market {
		tif = core.IOC
	}
	h.insert(OrderRecord{ID: id, User: c.User, Time: c.Time, Market: c.Market, Side: c.Side, Type: c.Type, TIF: tif,
		Status: core.StatusNew, Price: c.Price, Qty: c.Qty, QuoteQty: c.QuoteQty, ClientID: c.Key})
	h.live++
	if !h.floorSet { // the first order seen placed: every later id is seen placed too
		h.floor, h.floorSet = id, true
	}
}

// insert stores r in a free slot and indexes it.
func (h *History) insert(r OrderRecord) *OrderRecord {
	var i int32
	if n := len(h.free); n > 0 {
		i = h.free[n-1]
		h.free = h.free[:n-1]
		*h.slot(i) = r
	} else {
		i = h.nrecs
		if int(i>>recChunkBits) == len(h.recs) {
			h.recs = append(h.recs, make([]OrderRecord, recChunk))
		}
		h.nrecs++
		*h.slot(i) = r
	}
	h.idx.put(r.ID, i)
	h.link(i)
	return h.slot(i)
}

// recChunk is the number of records per slab chunk (4096 x ~150 B).
const (
	recChunkBits = 12
	recChunk     = 1 << recChunkBits
)

// slot is the record in slot i.
func (h *History) slot(i int32) *OrderRecord {
	return &h.recs[i>>recChunkBits][i&(recChunk-1)]
}

// get returns the record of id, or nil.
func (h *History) get(id core.OrderID) *OrderRecord {
	i, ok := h.idx.get(id)
	if !ok {
		return nil
	}
	return h.slot(i)
}

func (h *History) trade(e *core.Event) {
	ring := h.trades[e.Market]
	if ring == nil {
		ring = new(tradeRing)
		h.trades[e.Market] = ring
	}
	ring.buf[ring.next] = Trade{ID: e.TradeID, Time: e.Time, Price: e.Price, Qty: e.Qty, TakerSide: e.Side}
	ring.next = (ring.next + 1) % MaxTradesPerMarket
	ring.n = min(ring.n+1, MaxTradesPerMarket)
	h.mine.add(e, h.window())

	f := Fill{TradeID: e.TradeID, Time: e.Time, Price: e.Price, Qty: e.Qty, Maker: e.OrderID, Taker: e.OtherOrderID}
	f.Fee = e.Fee // maker fee
	h.addFill(e.OrderID, f)
	f.Fee = e.Fee2 // taker fee
	h.addFill(e.OtherOrderID, f)
}

// addFill records f on a live order: its Filled always, the fill itself
// within the bounds.
func (h *History) addFill(id core.OrderID, f Fill) {
	h.touch(id)
	r := h.get(id)
	if r == nil || !r.Live() {
		return
	}
	r.Filled += f.Qty
	r.Status = core.StatusPartiallyFilled
	if len(r.Fills) >= MaxFillsPerOrder {
		r.FillsTruncated = true
		return
	}
	if h.fills >= MaxRetainedFills {
		h.evictFinished(func() bool { return h.fills < MaxRetainedFills })
		if h.fills >= MaxRetainedFills {
			r.FillsTruncated = true
			return
		}
	}
	// Eviction only frees slots (recs never moves here), so r is still valid.
	r.Fills = append(r.Fills, f)
	h.fills++
}

func (h *History) modified(e *core.Event) {
	h.touch(e.OrderID)
	r := h.get(e.OrderID)
	if r == nil || !r.Live() {
		return
	}
	r.Price, r.Qty, r.Status = e.Price, e.Qty, e.Status
}

// finish moves an order to the finished records. An order History never saw
// placed gets a Partial record built from the event alone.
func (h *History) finish(e *core.Event, st core.OrderStatus) {
	h.touch(e.OrderID)
	r := h.get(e.OrderID)
	switch {
	case r == nil:
		r = h.insert(OrderRecord{ID: e.OrderID, User: e.User, Market: e.Market, Side: e.Side,
			Partial: true, FillsTruncated: true})
		if e.Detail != 0 && e.Payout != 0 { // a binary order: its own terms (every event carries its book price)
			r.Outcome = core.Outcome(e.Detail)
			r.Side, r.Price = ownTerms(r.Outcome, e.Side, e.Price, e.Payout)
		}
	case !r.Live():
		return // finished already (cannot happen: ids are unique and finish once)
	default:
		h.live--
	}
	r.Status = st
	switch {
	case e.Kind == core.EvOrderFilled && e.OtherOrderID == 0: // the taker's: Qty = total filled
		r.Filled = e.Qty
	case e.Kind == core.EvOrderFilled && r.Partial && r.Outcome == 0: // a maker's: Price = its limit price
		r.Price = e.Price
	case e.Kind == core.EvOrderExpired: // Qty = expired, Amount = filled
		r.Filled = e.Amount
		if r.Partial {
			r.Qty = e.Qty + e.Amount
		}
	case e.Kind == core.EvOrderCancelled: // Qty = remaining
		r.Reason = e.Code
		if r.Partial {
			r.Qty = e.Qty // the filled part is added by Apply when the result says it
		}
	}
	if w := h.window(); len(h.done)-h.doneH >= w {
		h.evictFinished(func() bool { return len(h.done)-h.doneH < w })
	}
	h.done = append(h.done, r.ID)
}

// evictFinished drops finished records, oldest first, until enough reports
// true or none is left.
func (h *History) evictFinished(enough func() bool) {
	for h.doneH < len(h.done) && !enough() {
		id := h.done[h.doneH]
		h.done[h.doneH] = 0
		h.doneH++
		if i, ok := h.idx.get(id); ok {
			h.fills -= len(h.slot(i).Fills)
			h.unlink(i)
			*h.slot(i) = OrderRecord{} // drops the Fills array for the GC
			h.free = append(h.free, i)
			h.idx.del(id)
		}
		h.raiseFloor(id + 1)
	}
	// Compact the queue once its dead head outweighs the live part.
	if h.doneH > 1024 && h.doneH*2 > len(h.done) {
		n := copy(h.done, h.done[h.doneH:])
		clear(h.done[n:])
		h.done, h.doneH = h.done[:n], 0
	}
}

// Order returns the record of a live or finished order. Its Fills alias
// History's memory (see OrderRecord.Fills).
func (h *History) Order(id core.OrderID) (OrderRecord, bool) {
	r := h.get(id)
	if r == nil {
		return OrderRecord{}, false
	}
	return *r, true
}

// Trades appends up to limit of market m's most recent trades, newest first.
func (h *History) Trades(m core.MarketID, limit int, dst []Trade) []Trade {
	if int(m) >= len(h.trades) || h.trades[m] == nil {
		return dst
	}
	ring := h.trades[m]
	for k := 0; k < min(limit, ring.n); k++ {
		i := (ring.next - 1 - k + 2*MaxTradesPerMarket) % MaxTradesPerMarket
		dst = append(dst, ring.buf[i])
	}
	return dst
}

// Stats returns History's current sizes.
func (h *History) Stats() HistoryStats {
	return HistoryStats{LiveOrders: h.live, FinishedOrders: len(h.done) - h.doneH, Fills: h.fills}
}
