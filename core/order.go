package core

// order is a live order in the pool. Owned by the processor goroutine.
// Invariant while resting: filled < qty, frozen >= what the remainder can
// still cost (quote incl. worst-case fee for buys, base for sells), and the
// order is linked into exactly one level of its market's book.
type order struct {
	id     OrderID
	user   UserID
	acct   int32 // index into Processor.accounts
	market MarketID
	side   Side
	typ    OrderType
	tif    TimeInForce
	stp    STP
	// outcome is 0 on spot markets; on a binary market the order's outcome:
	// side and price are then the YES book's (binary.go), frozen is quote
	// for a BUY in the order's own terms and shares for a SELL.
	outcome Outcome
	price   Price // limit price (0 for MARKET)
	qty     Units // total quantity (base Units); 0 for MARKET-by-quote
	filled  Units // base Units filled so far
	lastPx  Price // price of the last fill as taker (MARKET-by-quote status)
	// byQuote marks a MARKET BUY by quote budget: qty is MaxUnits and the
	// budget left is frozen.
	byQuote bool
	pos     int32 // binary markets: the owner's position (index in binaryMarket.pos), -1 (a BUY) until its first fill looks it up; in byQuote's padding
	frozen  Units // still frozen for this order (quote for buys, base for sells)
	key     Key   // client order id, zero if none
	seq     Seq   // seq of the command that created (or last re-inserted) it
	prev    int32 // neighbours in the level's FIFO, -1 at the ends
	next    int32
	inBook  bool
}

func (o *order) remaining() Units { return o.qty - o.filled }

// orderPool is a slab of orders with a free list, so steady state allocates
// nothing. Index -1 means "none".
type orderPool struct {
	slots []order
	free  []int32
}

func (op *orderPool) alloc() int32 {
	if n := len(op.free); n > 0 {
		i := op.free[n-1]
		op.free = op.free[:n-1]
		return i
	}
	op.slots = append(op.slots, order{})
	return int32(len(op.slots) - 1)
}

func (op *orderPool) release(i int32) {
	op.slots[i] = order{}
	op.free = append(op.free, i)
}

// clientKey indexes open orders by (user, client order id).
type clientKey struct {
	user UserID
	key  Key
}
