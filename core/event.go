package core

// EventKind is the type of an event. Values are part of the public event
// stream: append only.
type EventKind uint8

const (
	EvResult               EventKind = 1  // last event of every command: Code, CmdKind, OrderID, Status, Qty=filled
	EvOrderAccepted        EventKind = 2  // ORDER_ACCEPTED: remainder rests; Price, Qty=remaining, Amount=frozen
	EvOrderRejected        EventKind = 3  // Code
	EvTrade                EventKind = 4  // TradeID, Price, Qty, Amount=notional, OrderID=maker, OtherOrderID=taker, User=maker, OtherUser=taker, Fee=maker fee, Fee2=taker fee, Side=taker side
	EvOrderFilled          EventKind = 5  // ORDER_MATCHED: order fully filled; maker: Qty=last fill, Price, OtherOrderID=taker; taker: Qty=total filled
	EvOrderPartiallyFilled EventKind = 6  // resting order partially filled; Qty=fill, Price, Amount=remaining
	EvOrderCancelled       EventKind = 7  // Code = OK (user) or the reason; Qty=remaining, Amount=frozen released
	EvOrderExpired         EventKind = 8  // IOC/FOK/MARKET remainder or STP; Qty=expired, Amount=filled
	EvOrderModified        EventKind = 9  // Price, Qty=new total, Amount=frozen after; Flags=1 if priority kept
	EvBalance              EventKind = 10 // User, Asset, DAvail, DFrozen
	EvTransfer             EventKind = 11 // spot deposit/withdraw/refund/adjust result: CmdKind, User, Asset, Amount, Key, Code, Flags=1 if repeat
	EvAssetConfigured      EventKind = 12
	EvMarketConfigured     EventKind = 13
	EvMarketHalted         EventKind = 14 // Market, Detail = BreakerReason, Code = OK (MANUAL_HALT) or INVARIANT_VIOLATION, User = operator
	EvMarketResumed        EventKind = 15 // Market left HALTED or SUSPENDED: Detail = its new MarketStatus, User = operator
	EvAccountStatus        EventKind = 16 // User, Status
	EvInvariantViolation   EventKind = 17 // Market (0 = balance level), Asset, Code=CodeInvariantViolation, Detail
	EvCoreHalted           EventKind = 18 // Detail = BreakerReason, User = operator (or 0)
	EvSnapshotRequested    EventKind = 19
	EvCoreResumed          EventKind = 20 // the core halt was resolved: User = operator
	EvOpsForgotten         EventKind = 21 // Key = req_id, Qty = records forgotten
	EvP2PUser              EventKind = 22 // a transfer-service user was created: User, Asset, Amount = initial credit, Fee = balance after (p2p_cmd.go)
	EvP2PTransfer          EventKind = 23 // a transfer was created or changed status: see p2p_cmd.go
	// binary markets (issue 22): order events of a binary market carry
	// Detail = the order's Outcome, Side = book direction, Price = book price
	// (YES terms; on every order event, the taker's ORDER_MATCHED, CANCELLED
	// and EXPIRED included: the order's own limit on the book) and Payout;
	// ORDER_ACCEPTED and ORDER_PARTIALLY_FILLED also Frozen. EvTrade there has
	// Flags = FillKind and Payout (binary.go; issue 40).
	EvMarketStatus    EventKind = 100 // a binary lifecycle step: Market, Detail = new MarketStatus, Flags = Outcome (resolve), User = operator
	EvPositionSettled EventKind = 101 // Market, User, Qty = shares paid, Amount = quote paid, Fee = the position's cost sum removed
	EvMarketSettled   EventKind = 102 // settlement done: Market, Amount = pnl pool moved to the fee account, Detail = final MarketStatus
	EvMarketArchived  EventKind = 103 // the market's slot is released (KindArchive): Market, User = operator
	EvPosition        EventKind = 104 // a position after a change (absolute): Market, User, Qty/Amount = YES/NO volume, DAvail/DFrozen = YES/NO cost sum, Fee/Fee2 = YES/NO pending sell
)

var eventNames = [...]string{"", "RESULT", "ORDER_ACCEPTED", "ORDER_REJECTED", "TRADE", "ORDER_MATCHED",
	"ORDER_PARTIALLY_FILLED", "ORDER_CANCELLED", "ORDER_EXPIRED", "ORDER_MODIFIED", "BALANCE",
	"TRANSFER", "ASSET_CONFIGURED", "MARKET_CONFIGURED", "MARKET_HALTED", "MARKET_RESUMED",
	"ACCOUNT_STATUS", "INVARIANT_VIOLATION", "CORE_HALTED", "SNAPSHOT_REQUESTED", "CORE_RESUMED", "OPS_FORGOTTEN",
	"P2P_USER", "P2P_TRANSFER",
	EvMarketStatus: "MARKET_STATUS", EvPositionSettled: "POSITION_SETTLED", EvMarketSettled: "MARKET_SETTLED",
	EvMarketArchived: "MARKET_ARCHIVED", EvPosition: "POSITION"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return "UNKNOWN"
}

// Violation details carried in Event.Detail of EvInvariantViolation.
const (
	ViolNegativeBalance uint8 = 1
	ViolConservation    uint8 = 2 // sum of balances != credited - debited
	ViolFrozenMismatch  uint8 = 3 // account frozen != what open orders hold
	ViolBookIndex       uint8 = 4 // level totals / order index disagree with the orders
	ViolCrossedBook     uint8 = 5
	ViolOrderAccounting uint8 = 6 // a fill found an order holding less than it costs
	ViolOpenOrders      uint8 = 7 // an account's open-order count != its resting orders
	ViolLevelDrift      uint8 = 8 // a price level emptied with a quantity left (its total drifted)
	// binary markets (binary_check.go)
	ViolShares   uint8 = 9  // YES shares != NO shares, or a total != the sum of the positions
	ViolReserve  uint8 = 10 // reserve != payout x shares (settling: x unsettled winning shares)
	ViolCostSum  uint8 = 11 // reserve + pnl pool != sum of cost sums, or the running sum drifted
	ViolOversold uint8 = 12 // a position's pending sell above its volume, or negative
	ViolPending  uint8 = 13 // a position's pending sell != what its resting sell orders hold
)

var violNames = [...]string{"", "NEGATIVE_BALANCE", "CONSERVATION", "FROZEN_MISMATCH", "BOOK_INDEX",
	"CROSSED_BOOK", "ORDER_ACCOUNTING", "OPEN_ORDERS", "LEVEL_DRIFT", "SHARES", "RESERVE", "COST_SUM", "OVERSOLD",
	"PENDING_MISMATCH"}

// ViolName is the stable name of a Viol* detail ("UNKNOWN" for others).
func ViolName(d uint8) string { return enumName(violNames[:], d) }

// Event is one output of the processor. A command's events are produced
// together and may leave the process (response, Postgres row, replica) only
// after durable_seq >= Seq. Fields not used by a Kind are zero.
type Event struct {
	Seq     Seq
	Time    int64
	Kind    EventKind
	CmdKind Kind
	Code    Code
	Side    Side
	Status  OrderStatus
	Flags   uint8
	Detail  uint8
	AcctSt  AccountStatus

	Market       MarketID
	Asset        AssetID
	User         UserID
	OtherUser    UserID
	OrderID      OrderID
	OtherOrderID OrderID
	TradeID      uint64
	Price        Price
	Qty          Units
	Amount       Units
	Fee          Units
	Fee2         Units
	DAvail       Units
	DFrozen      Units
	Key          Key

	// Payout is set on a binary market's order events and trades: the quote
	// Units a winning share pays, so an order's price in its own outcome's
	// terms is Price (YES) or Payout - Price (NO) with no other lookup. 0 on
	// spot.
	Payout Units
	// Frozen is what a binary order still holds after the event (quote
	// Units for a BUY in its own terms, shares for a SELL), on its
	// ORDER_ACCEPTED and ORDER_PARTIALLY_FILLED; 0 otherwise.
	Frozen Units
}
