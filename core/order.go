package core

// order is a live order in the pool. Owned by the processor goroutine.
// Invariant while resting: filled < qty, frozen >= what the remainder can
// still cost (quote incl. worst-case fee for buys, base for sells), and the
// order is linked into exactly one level of its market's book.
type order struct {
	// The first 64 bytes hold what a cancel and a fill read and write (one
	// cache line: the struct is 128 bytes, TestOrderLayout pins it); the rest
	// is read at placement, by modifies, queries and snapshots. The owner's
	// user id is there too: the hot paths read it from the account
	// (accounts[acct].id == user, which they touch anyway).
	id     OrderID
	price  Price // limit price (0 for MARKET)
	qty    Units // total quantity (base Units); 0 for MARKET-by-quote
	filled Units // base Units filled so far
	frozen Units // still frozen for this order (quote for buys, base for sells)
	acct   int32 // index into Processor.accounts
	prev   int32 // neighbours in the level's FIFO, -1 at the ends
	next   int32
	market MarketID
	side   Side
	inBook bool
	// outcome is 0 on spot markets; on a binary market the order's outcome:
	// side and price are then the YES book's (binary.go), frozen is quote
	// for a BUY in the order's own terms and shares for a SELL.
	outcome Outcome
	hasKey  bool // key is not zero: the order is in clientIdx
	// byQuote marks a MARKET BUY by quote budget: qty is MaxUnits and the
	// budget left is frozen.
	byQuote bool

	user   UserID
	typ    OrderType
	tif    TimeInForce
	stp    STP
	pos    int32 // binary markets: the owner's position (index in binaryMarket.pos), -1 (a BUY) until its first fill looks it up
	lastPx Price // price of the last fill as taker (MARKET-by-quote status)
	seq    Seq   // seq of the command that created (or last re-inserted) it
	key    Key   // client order id, zero if none
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

// release returns slot i to the free list. It leaves the slot's contents:
// every alloc is followed by a store of a whole order (placement, restore).
func (op *orderPool) release(i int32) {
	op.free = append(op.free, i)
}

// clientKey indexes open orders by (user, client order id).
type clientKey struct {
	user UserID
	key  Key
}
