package gateway

import "github.com/ubscore/ubscore/core"

// Each user's orders and trades in History, for GET /orders (history) and
// GET /my-trades. The rule that makes a page complete:
//
//   - every order with id >= the order floor has its record here (History
//     saw it placed, and has not evicted it); every trade with id >= the
//     trade floor is in the trade log. Pages above the floors are answered
//     from memory alone, so an answered order or trade is listed at once,
//     whatever the archive's lag (read-your-writes).
//   - below the floors the archive (Postgres, written by the sink) answers,
//     but only once it has persisted the seq the floor reports (belowSeq):
//     by then it holds the final state of every order and trade below the
//     floor. The floor only rises: when a finished order or a trade is
//     evicted, or an order is placed while History tracks MaxLiveOrders.

// window is how many finished orders and trades History keeps.
func (h *History) window() int {
	if h.Window <= 0 || h.Window > MaxFinishedOrders {
		return MaxFinishedOrders
	}
	return h.Window
}

// link makes slot i the newest record of its user.
func (h *History) link(i int32) {
	r := h.slot(i)
	if h.users == nil {
		h.users = make(map[core.UserID]int32)
	}
	head := h.users[r.User]
	r.older, r.newer = head, 0
	if head != 0 {
		h.slot(head - 1).newer = i + 1
	}
	h.users[r.User] = i + 1
}

// unlink takes slot i out of its user's list.
func (h *History) unlink(i int32) {
	r := h.slot(i)
	if r.older != 0 {
		h.slot(r.older - 1).newer = r.newer
	}
	switch {
	case r.newer != 0:
		h.slot(r.newer - 1).older = r.older
	case r.older != 0:
		h.users[r.User] = r.older
	default:
		delete(h.users, r.User)
	}
	r.older, r.newer = 0, 0
}

// raiseFloor records that orders below f may no longer be here.
func (h *History) raiseFloor(f core.OrderID) {
	h.belowSeq = h.seq
	if h.floorSet && f > h.floor {
		h.floor = f
	}
}

// Skipped tells History that the commands up to seq were never applied
// to it (a warm-up that starts after a snapshot, or where the WAL begins):
// the archive must have persisted seq before it answers for orders or
// trades below the floors, whose changes until then History did not see.
// Call it before the first Apply.
func (h *History) Skipped(seq core.Seq) {
	h.belowSeq = max(h.belowSeq, seq)
	h.mine.belowSeq = max(h.mine.belowSeq, seq)
}

// touch records a change to order id: below the floor, the archive must
// catch up to this seq before it answers for such orders.
func (h *History) touch(id core.OrderID) {
	if !h.floorSet || id < h.floor {
		h.belowSeq = h.seq
	}
}

// Floor is where History's complete part of the order history begins.
type Floor struct {
	// Order: every order with id >= Order is in History (NoFloor: none).
	Order core.OrderID
	// Trade: every trade with id >= Trade is in History (NoFloor: none).
	Trade uint64
	// OrderSeq and TradeSeq: the archive answers for orders (trades) below
	// the floor once its persisted seq has reached this.
	OrderSeq, TradeSeq core.Seq
}

// NoFloor is a Floor id above every id: nothing is known complete.
const NoFloor = ^uint64(0)

// Floors reports the floors of the order history and my-trades.
func (h *History) Floors() Floor {
	f := Floor{Order: core.OrderID(NoFloor), Trade: NoFloor, OrderSeq: h.belowSeq, TradeSeq: h.mine.belowSeq}
	if h.floorSet {
		f.Order = h.floor
	}
	if h.mine.floorSet {
		f.Trade = h.mine.floor
	}
	return f
}

// UserOrders calls fn with user's records, newest placed first, until fn
// returns false. Records of orders History saw placed come in descending
// id order; the others (Partial, seeded: below the floor) may come in
// between. A record aliases History's memory: valid only inside the Read.
func (h *History) UserOrders(user core.UserID, fn func(r *OrderRecord) bool) {
	for p := h.users[user]; p != 0; {
		r := h.slot(p - 1)
		if !fn(r) {
			return
		}
		p = r.older
	}
}

// UserTrade is one trade as the order history lists it (History's trade
// log and the archive's trades table).
type UserTrade struct {
	ID                   uint64
	Seq                  core.Seq
	Time                 int64 // unix ns
	Market               core.MarketID
	Price                core.Price // the maker's price
	Qty                  core.Units // base units
	Quote                core.Units // notional, quote units
	MakerOrder           core.OrderID
	TakerOrder           core.OrderID
	MakerUser, TakerUser core.UserID
	MakerFee, TakerFee   core.Units // quote units
	TakerSide            core.Side
	// A binary market's trade (0 on spot): each party's outcome and price
	// in its own outcome's terms (Price is the YES book's; TakerSide is the
	// taker's own side). The maker's own side follows: the opposite of the
	// taker's between one outcome's holders, the same across outcomes (a
	// mint or a burn).
	TakerOutcome, MakerOutcome core.Outcome
	TakerPrice, MakerPrice     core.Price
	olderMaker, olderTake      uint64 // position+1 in the log of MakerUser's / TakerUser's previous trade
}

// MakerSide is the maker's own side (its outcome's terms on a binary market).
func (t *UserTrade) MakerSide() core.Side {
	if t.TakerOutcome != 0 && t.TakerOutcome != t.MakerOutcome {
		return t.TakerSide // a mint (both buy) or a burn (both sell)
	}
	return 3 - t.TakerSide
}

// binaryTrade completes t from EvTrade e of a binary market (e.Flags =
// the fill kind, e.Detail = the taker's outcome, e.Payout set).
func (t *UserTrade) binaryTrade(e *core.Event) {
	if e.Flags == 0 || e.Payout == 0 {
		return
	}
	kind, out := core.FillKind(e.Flags), core.Outcome(e.Detail)
	t.TakerOutcome, t.MakerOutcome = out, 3-out
	if kind == core.FillTransferYes || kind == core.FillTransferNo {
		t.MakerOutcome = out
	}
	_, t.TakerPrice = ownTerms(t.TakerOutcome, 0, e.Price, e.Payout)
	_, t.MakerPrice = ownTerms(t.MakerOutcome, 0, e.Price, e.Payout)
}

// tradeLog is a ring of the most recent trades of every user, linked per
// user (each entry points to its maker's and its taker's previous trade).
type tradeLog struct {
	buf      []UserTrade            // grows to the window, then wraps
	n        uint64                 // trades added so far: position n-1 is the newest
	heads    map[core.UserID]uint64 // user -> position+1 of their newest trade
	floor    uint64                 // once floorSet: every trade with id >= floor is in buf
	floorSet bool
	belowSeq core.Seq // the seq of the newest trade evicted from buf
}

// add appends trade e, evicting the oldest beyond window entries.
func (l *tradeLog) add(e *core.Event, window int) {
	if l.heads == nil {
		l.heads = make(map[core.UserID]uint64)
	}
	pos := l.n
	t := UserTrade{ID: e.TradeID, Seq: e.Seq, Time: e.Time, Market: e.Market, Price: e.Price, Qty: e.Qty,
		Quote: e.Amount, MakerOrder: e.OrderID, TakerOrder: e.OtherOrderID, MakerUser: e.User, TakerUser: e.OtherUser,
		MakerFee: e.Fee, TakerFee: e.Fee2, TakerSide: e.Side,
		olderMaker: l.heads[e.User], olderTake: l.heads[e.OtherUser]}
	t.binaryTrade(e)
	if len(l.buf) < window {
		l.buf = append(l.buf, t)
	} else {
		i := pos % uint64(len(l.buf))
		old := &l.buf[i]
		l.floor, l.belowSeq = max(l.floor, old.ID+1), old.Seq
		for _, u := range [2]core.UserID{old.MakerUser, old.TakerUser} {
			if l.heads[u] == pos-uint64(len(l.buf))+1 { // their newest trade leaves: they have none left
				delete(l.heads, u)
			}
		}
		l.buf[i] = t
	}
	l.n++
	l.heads[e.User], l.heads[e.OtherUser] = pos+1, pos+1
	if !l.floorSet {
		l.floor, l.floorSet = e.TradeID, true
	}
}

// UserTrades calls fn with user's trades in the log, newest first, until fn
// returns false (a trade with the user on both sides comes once).
func (h *History) UserTrades(user core.UserID, fn func(t *UserTrade) bool) {
	l := &h.mine
	if len(l.buf) == 0 {
		return
	}
	lo := l.n - uint64(len(l.buf)) // the oldest position held
	for p := l.heads[user]; p != 0 && p-1 >= lo; {
		t := &l.buf[(p-1)%uint64(len(l.buf))]
		if !fn(t) {
			return
		}
		if t.TakerUser == user {
			p = t.olderTake
		} else {
			p = t.olderMaker
		}
	}
}
