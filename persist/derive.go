package persist

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/ubscore/ubscore/core"
)

// This file turns records into table rows. It is pure (no I/O), so the
// mapping from the core's events to rows can be reasoned about on its own:
//
//   - trades:      one row per EvTrade.
//   - spot_ledger: one row per EvBalance.
//   - wal_events:  one row per order audit event (accepted, filled, partially
//     filled, cancelled, expired after a fill, unfilled remainder).
//   - circuit_breaker_events: a row per breaker trip (EvMarketHalted,
//     EvCoreHalted), completed by its resolution (EvMarketResumed,
//     EvCoreResumed), in seq order.
//   - orders:      one row per order touched by the batch, collapsed to its
//     state after the batch's last record (see orderRow): new orders are
//     inserted whole, older ones updated (fills added, status replaced).

// tradeRow is one trades row. Amounts in smallest units (see the migration).
type tradeRow struct {
	tradeID, seq           int64
	market                 int32
	price, qty, quote      int64
	makerOrder, takerOrder int64
	makerUser, takerUser   int64
	makerFee, takerFee     int64
	takerSide              string
	at                     int64  // unix ns
	fillKind, takerOutcome string // binary markets ("" on spot: NULL)
	// binary markets: the maker's outcome and own side, both parties' prices
	// in their own outcome's terms (price is the YES book's)
	makerOutcome, makerSide string
	makerPrice, takerPrice  int64
}

// ledgerRow is one spot_ledger row: a signed change of a balance.
type ledgerRow struct {
	seq             int64
	idx             int32 // the event's index within its record
	user            int64
	asset           int32
	dAvail, dFrozen int64 // asset units
	cause           string
	ref             string // NULL when !hasRef
	hasRef          bool
	tradeID         int64 // NULL when !hasTrade
	hasTrade        bool
	at              int64 // unix ns
}

// walEventRow is one wal_events row; its payload is payloads[start:end].
type walEventRow struct {
	seq        int64
	idx        int32
	typ        string
	order      int64
	start, end int
	at         int64 // unix ns
}

// orderRow is what a batch does to one order. A new order (placed in this
// batch) carries its complete state and is inserted whole; an existing order
// carries only what changed: status when status != 0, price/qty when the
// has* flags are set, and filled as a delta added to the stored value
// (filled_quantity changes only through trades, so deltas are exact and the
// collapse of many changes within a batch is their sum).
type orderRow struct {
	id    core.OrderID
	isNew bool

	// Set for new orders only.
	user       core.UserID
	market     core.MarketID
	side       core.Side
	typ        core.OrderType
	tif        core.TimeInForce
	quoteQty   core.Units // MARKET BUY quote budget, quote units
	clientID   core.Key
	createdSeq core.Seq
	createdAt  int64 // unix ns

	price    core.Price // quote units per whole base unit
	hasPrice bool
	qty      core.Units // total base quantity
	hasQty   bool
	filled   core.Units       // new: total filled; existing: filled in this batch (base units)
	status   core.OrderStatus // 0 = unchanged (existing orders only)

	// Binary markets (migration 0060). side and price above stay the
	// order's own (its outcome's terms); these are its book terms, set for
	// a new order from its first event (every binary order event carries
	// them), and what it holds (hold, when hasHold: after the batch).
	outcome   core.Outcome // 0: spot, or an existing order (its terms are stored)
	bookSide  core.Side
	bookPrice core.Price
	hold      core.Units
	hasHold   bool

	updatedSeq core.Seq
	updatedAt  int64 // unix ns
}

// breakerRow is a circuit_breaker_events change: a trip inserts a row, a
// resolution completes the open row of its market.
type breakerRow struct {
	core.BreakerChange
	market string // core market id as text, "*" for the core
}

// batchRows holds the rows of one batch. Reused across batches.
type batchRows struct {
	trades      []tradeRow
	ledger      []ledgerRow
	events      []walEventRow
	payloads    []byte // wal_events payloads, back to back
	orders      []orderRow
	byID        map[core.OrderID]int // index into orders
	breakerRows []breakerRow         // in seq order
	brk         []core.BreakerChange // scratch of breakers
	p2p         p2pRows              // the transfer service's tables (p2p.go)
	binaryRows                       // binary markets and positions (binary.go)
}

func (b *batchRows) reset() {
	b.trades = b.trades[:0]
	b.ledger = b.ledger[:0]
	b.events = b.events[:0]
	b.payloads = b.payloads[:0]
	b.orders = b.orders[:0]
	b.breakerRows = b.breakerRows[:0]
	b.p2p.reset()
	b.resetBinary()
	if b.byID == nil {
		b.byID = make(map[core.OrderID]int)
	}
	clear(b.byID)
}

// rowCount is the number of rows the batch writes.
func (b *batchRows) rowCount() int {
	return len(b.trades) + len(b.ledger) + len(b.events) + len(b.orders) + len(b.breakerRows) + b.p2p.rows() +
		b.binaryRowCount()
}

// derive fills b with the rows of recs (contiguous, in seq order). Orders
// are sorted by id afterwards, so row locks are taken in a stable order.
func (b *batchRows) derive(recs []Record) {
	b.reset()
	for i := range recs {
		b.record(&recs[i])
	}
	slices.SortFunc(b.orders, func(x, y orderRow) int {
		switch {
		case x.id < y.id:
			return -1
		case x.id > y.id:
			return 1
		}
		return 0
	})
}

// record derives the rows of one command.
func (b *batchRows) record(r *Record) {
	c := &r.Cmd
	res := resultOf(r)
	at := recordTime(r)
	if c.Kind == core.KindPlaceOrder && res != nil && res.Code == core.OK && res.OrderID != 0 {
		b.newOrder(c, res.OrderID, at)
	}
	b.breakers(r)
	b.p2p.add(c, r.Events)
	b.binaryConfig(r, res)
	ref, hasRef := refOf(c, res)
	cause := c.Kind.String()
	// The BALANCE events right after an EvTrade are that trade's settlement.
	var tradeID int64
	inTrade := false
	for i := range r.Events {
		e := &r.Events[i]
		switch e.Kind {
		case core.EvBalance:
			b.ledger = append(b.ledger, ledgerRow{seq: int64(c.Seq), idx: int32(i), user: int64(e.User),
				asset: int32(e.Asset), dAvail: int64(e.DAvail), dFrozen: int64(e.DFrozen),
				cause: cause, ref: ref, hasRef: hasRef, tradeID: tradeID, hasTrade: inTrade, at: at})
			continue
		case core.EvTrade:
			b.trade(c.Seq, e, at)
			tradeID, inTrade = int64(e.TradeID), true
			continue
		}
		inTrade = false
		b.binaryEvent(c.Seq, e)
		b.orderEvent(c, e, int32(i), at)
	}
}

// trade records one EvTrade: its row and the fills of both orders.
func (b *batchRows) trade(seq core.Seq, e *core.Event, at int64) {
	b.trades = append(b.trades, tradeRow{tradeID: int64(e.TradeID), seq: int64(seq), market: int32(e.Market),
		price: int64(e.Price), qty: int64(e.Qty), quote: int64(e.Amount),
		makerOrder: int64(e.OrderID), takerOrder: int64(e.OtherOrderID),
		makerUser: int64(e.User), takerUser: int64(e.OtherUser),
		makerFee: int64(e.Fee), takerFee: int64(e.Fee2), takerSide: e.Side.String(), at: at})
	if e.Flags != 0 { // a binary market's fill (Flags = FillKind, Detail = the taker's outcome)
		r := &b.trades[len(b.trades)-1]
		kind, tOut := core.FillKind(e.Flags), core.Outcome(e.Detail)
		r.fillKind, r.takerOutcome = kind.String(), tOut.String()
		// a transfer is between holders of one outcome on opposite sides; a
		// mint (both buy) and a burn (both sell) between the two outcomes
		mOut, mSide := 3-tOut, e.Side
		if kind == core.FillTransferYes || kind == core.FillTransferNo {
			mOut, mSide = tOut, 3-e.Side
		}
		r.makerOutcome, r.makerSide = mOut.String(), mSide.String()
		r.makerPrice, r.takerPrice = int64(ownPrice(mOut, e.Price, e.Payout)), int64(ownPrice(tOut, e.Price, e.Payout))
	}
	b.order(e.OrderID, seq, at).filled += e.Qty
	b.order(e.OtherOrderID, seq, at).filled += e.Qty
}

// orderEvent applies an order lifecycle event (or the command's result) to
// the order's row and, for audit events, adds a wal_events row.
func (b *batchRows) orderEvent(c *core.Command, e *core.Event, idx int32, at int64) {
	switch e.Kind {
	case core.EvOrderAccepted:
		o := b.binaryTerms(e, b.order(e.OrderID, c.Seq, at))
		o.status = e.Status // NEW, or PARTIALLY_FILLED when it traded before resting
		if e.Payout == 0 {  // a binary order keeps its own price (e.Price is the book's)
			o.price, o.hasPrice = e.Price, true
		}
	case core.EvOrderFilled:
		b.binaryTerms(e, b.order(e.OrderID, c.Seq, at)).status = core.StatusFilled
	case core.EvOrderPartiallyFilled:
		b.binaryTerms(e, b.order(e.OrderID, c.Seq, at)).status = core.StatusPartiallyFilled
	case core.EvOrderCancelled:
		b.binaryTerms(e, b.order(e.OrderID, c.Seq, at)).status = core.StatusCancelled
	case core.EvOrderExpired:
		b.binaryTerms(e, b.order(e.OrderID, c.Seq, at)).status = core.StatusExpired
	case core.EvOrderModified:
		o := b.order(e.OrderID, c.Seq, at)
		o.status = e.Status
		o.price, o.hasPrice = e.Price, true
		o.qty, o.hasQty = e.Qty, true // the new total
	case core.EvResult:
		if isOrderCmd(e.CmdKind) && e.Code == core.OK && e.OrderID != 0 && e.Status != 0 {
			b.order(e.OrderID, c.Seq, at).status = e.Status
		}
		return
	default:
		return
	}
	if typ := auditType(e); typ != "" {
		b.walEvent(c.Seq, idx, typ, e, at)
	}
}

// binaryTerms records what a binary order event (e.Payout != 0) says about
// order row o: a new order's outcome and book terms, and its hold after the
// event (e.Frozen while it rests, 0 once it closes). It returns o.
func (b *batchRows) binaryTerms(e *core.Event, o *orderRow) *orderRow {
	if e.Payout == 0 {
		return o
	}
	if o.isNew && o.outcome == 0 {
		o.outcome, o.bookSide, o.bookPrice = core.Outcome(e.Detail), e.Side, e.Price
	}
	o.hold, o.hasHold = e.Frozen, true
	return o
}

// ownPrice is a YES book price in outcome out's terms.
func ownPrice(out core.Outcome, bookPrice core.Price, payout core.Units) core.Price {
	if out == core.OutcomeNo {
		return core.Price(payout) - bookPrice
	}
	return bookPrice
}

// bookType is spec 004's book_type of an order of outcome out resting on
// the YES book's side bookSide (NATIVE_BUY, NATIVE_SELL, SYNTHETIC_BUY,
// SYNTHETIC_SELL).
func bookType(out core.Outcome, bookSide core.Side) string {
	if out == core.OutcomeNo {
		return "SYNTHETIC_" + bookSide.String()
	}
	return "NATIVE_" + bookSide.String()
}

// frozenAssetType is what a binary order of own side holds: quote for a
// BUY, shares for a SELL.
func frozenAssetType(side core.Side) string {
	if side == core.Buy {
		return "FUNDS"
	}
	return "SHARES"
}

// newOrder starts the row of an order placed by c (its full state; events
// of the same record then update status, price and fills).
func (b *batchRows) newOrder(c *core.Command, id core.OrderID, at int64) {
	tif := c.TIF
	if c.Type == core.Market {
		tif = core.IOC // market orders are always IOC
	}
	b.byID[id] = len(b.orders)
	b.orders = append(b.orders, orderRow{id: id, isNew: true, user: c.User, market: c.Market, side: c.Side,
		typ: c.Type, tif: tif, quoteQty: c.QuoteQty, clientID: c.Key, createdSeq: c.Seq, createdAt: at,
		price: c.Price, hasPrice: true, qty: c.Qty, hasQty: true, status: core.StatusNew,
		updatedSeq: c.Seq, updatedAt: at})
}

// order returns the row of order id, starting a change set for an order
// placed before this batch if it has none yet, and stamps the update.
func (b *batchRows) order(id core.OrderID, seq core.Seq, at int64) *orderRow {
	i, ok := b.byID[id]
	if !ok {
		i = len(b.orders)
		b.byID[id] = i
		b.orders = append(b.orders, orderRow{id: id})
	}
	o := &b.orders[i]
	o.updatedSeq, o.updatedAt = seq, at
	return o
}

// refOf is the ledger ref of a command's balance changes: the order it
// placed, cancelled or modified, or the req_id / reference of a transfer.
func refOf(c *core.Command, res *core.Event) (string, bool) {
	switch {
	case isOrderCmd(c.Kind):
		if res == nil || res.OrderID == 0 {
			return "", false
		}
		return strconv.FormatUint(uint64(res.OrderID), 10), true
	case !c.Key.IsZero():
		return keyText(c.Key), true
	}
	return "", false
}

// walEvent appends an audit row with its JSON payload: the keys of spec 004
// 4.2 (snake_case, amounts in smallest units, sides BUY/SELL) after the
// market, user, order and side every row carries. For a spot book the book
// price is the order's limit price (original_price: the price it was
// placed at). A binary market's order is stated as placed (outcome, side,
// price in its outcome's terms; original_price of ORDER_ACCEPTED is that
// price, spec 004 §4.3) and on the YES book (book_type NATIVE_BUY /
// NATIVE_SELL / SYNTHETIC_BUY / SYNTHETIC_SELL, book_direction,
// book_price), with frozen_asset_type (FUNDS | SHARES), remaining_qty and
// frozen_amount on every event (issue 40).
func (b *batchRows) walEvent(seq core.Seq, idx int32, typ string, e *core.Event, at int64) {
	start := len(b.payloads)
	p := b.payloads
	p = jsonInt(append(p, `{"market_id":`...), int64(e.Market))
	p = jsonUint(append(p, `,"user_id":`...), uint64(e.User))
	p = jsonUint(append(p, `,"order_id":`...), uint64(e.OrderID))
	bin := e.Detail != 0 && e.Payout != 0 // a binary market's order: e.Side and e.Price are the YES book's
	if !bin {
		p = append(append(append(p, `,"side":"`...), e.Side.String()...), '"')
	} else { // the order as placed, then its book terms (issue 40)
		out := core.Outcome(e.Detail)
		side := e.Side
		if out == core.OutcomeNo {
			side = 3 - side
		}
		p = append(append(append(p, `,"side":"`...), side.String()...), '"')
		p = append(append(append(p, `,"outcome":"`...), out.String()...), '"')
		p = jsonInt(append(p, `,"price":`...), int64(ownPrice(out, e.Price, e.Payout)))
		p = append(append(append(p, `,"book_type":"`...), bookType(out, e.Side)...), '"')
		p = append(append(append(p, `,"book_direction":"`...), e.Side.String()...), '"')
		p = jsonInt(append(p, `,"book_price":`...), int64(e.Price))
		p = append(append(append(p, `,"frozen_asset_type":"`...), frozenAssetType(side)...), '"')
	}
	switch e.Kind {
	case core.EvOrderAccepted:
		p = append(append(append(p, `,"status":"`...), e.Status.String()...), '"')
		if bin {
			p = jsonInt(append(p, `,"original_price":`...), int64(ownPrice(core.Outcome(e.Detail), e.Price, e.Payout)))
		} else {
			p = jsonInt(append(p, `,"book_price":`...), int64(e.Price))
			p = jsonInt(append(p, `,"original_price":`...), int64(e.Price))
		}
		p = jsonInt(append(p, `,"remaining_qty":`...), int64(e.Qty))
		p = jsonInt(append(p, `,"frozen_amount":`...), int64(e.Amount))
		if !e.Key.IsZero() {
			q, _ := json.Marshal(keyText(e.Key)) // a string always marshals
			p = append(append(p, `,"client_order_id":`...), q...)
		}
	case core.EvOrderFilled:
		if e.OtherOrderID != 0 { // a resting order filled by a taker
			p = append(p, `,"role":"maker"`...)
			p = jsonInt(append(p, `,"fill_qty":`...), int64(e.Qty))
			p = jsonInt(append(p, `,"trade_price":`...), int64(e.Price))
			p = jsonUint(append(p, `,"counterparty_order_id":`...), uint64(e.OtherOrderID))
		} else { // the incoming order, filled in full
			p = append(p, `,"role":"taker"`...)
			p = jsonInt(append(p, `,"filled_qty":`...), int64(e.Qty))
		}
		if bin {
			p = append(p, `,"remaining_qty":0,"frozen_amount":0`...)
		}
	case core.EvOrderPartiallyFilled:
		p = jsonInt(append(p, `,"fill_qty":`...), int64(e.Qty))
		p = jsonInt(append(p, `,"trade_price":`...), int64(e.Price))
		p = jsonInt(append(p, `,"new_remaining_qty":`...), int64(e.Amount))
		p = jsonUint(append(p, `,"counterparty_order_id":`...), uint64(e.OtherOrderID))
		if bin {
			p = jsonInt(append(p, `,"remaining_qty":`...), int64(e.Amount))
			p = jsonInt(append(p, `,"frozen_amount":`...), int64(e.Frozen))
		}
	case core.EvOrderCancelled:
		p = append(append(append(p, `,"reason":"`...), e.Code.String()...), '"') // OK = the user asked
		p = jsonInt(append(p, `,"remaining_qty":`...), int64(e.Qty))
		p = jsonInt(append(p, `,"frozen_amount":`...), int64(e.Amount))
	case core.EvOrderExpired:
		p = jsonInt(append(p, `,"expired_qty":`...), int64(e.Qty))
		p = jsonInt(append(p, `,"filled_qty":`...), int64(e.Amount))
		if bin {
			p = append(p, `,"remaining_qty":0,"frozen_amount":0`...)
		}
	}
	p = append(p, '}')
	b.payloads = p
	b.events = append(b.events, walEventRow{seq: int64(seq), idx: idx, typ: typ, order: int64(e.OrderID),
		start: start, end: len(p), at: at})
}

// breakers adds the circuit_breaker_events changes of one record.
func (b *batchRows) breakers(r *Record) {
	n := len(b.brk)
	b.brk = core.BreakerChanges(&r.Cmd, r.Events, b.brk)
	for i := n; i < len(b.brk); i++ {
		m := "*"
		if id := b.brk[i].Market; id != 0 {
			m = strconv.FormatUint(uint64(id), 10)
		}
		b.breakerRows = append(b.breakerRows, breakerRow{BreakerChange: b.brk[i], market: m})
	}
}

// auditType maps an event to its wal_events type, "" if it is not audited.
// An expired remainder is ORDER_EXPIRED after at least one fill (spec 004
// 4.2: an IOC that filled partly), ORDER_UNFILLED without any.
func auditType(e *core.Event) string {
	switch e.Kind {
	case core.EvOrderAccepted:
		return "ORDER_ACCEPTED"
	case core.EvOrderFilled:
		return "ORDER_MATCHED"
	case core.EvOrderPartiallyFilled:
		return "ORDER_PARTIALLY_FILLED"
	case core.EvOrderCancelled:
		return "ORDER_CANCELLED"
	case core.EvOrderExpired:
		if e.Amount == 0 {
			return "ORDER_UNFILLED"
		}
		return "ORDER_EXPIRED"
	}
	return ""
}

// resultOf returns the record's EvResult (its last event), or nil.
func resultOf(r *Record) *core.Event {
	if n := len(r.Events); n > 0 && r.Events[n-1].Kind == core.EvResult {
		return &r.Events[n-1]
	}
	return nil
}

// recordTime is the command's sequenced time as the core clamped it (every
// event carries it), in unix ns.
func recordTime(r *Record) int64 {
	if len(r.Events) > 0 {
		return r.Events[0].Time
	}
	return r.Cmd.Time
}

func isOrderCmd(k core.Kind) bool {
	return k == core.KindPlaceOrder || k == core.KindCancelOrder || k == core.KindModifyOrder
}

// keyText is a client key as text Postgres accepts: canonical keys have no
// zero bytes; invalid UTF-8 is replaced so a row can never be refused.
func keyText(k core.Key) string { return strings.ToValidUTF8(k.String(), "\uFFFD") }

func jsonInt(p []byte, v int64) []byte   { return strconv.AppendInt(p, v, 10) }
func jsonUint(p []byte, v uint64) []byte { return strconv.AppendUint(p, v, 10) }
