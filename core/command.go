package core

// Kind is the type of a command. Values are part of the WAL format: append only.
type Kind uint8

const (
	KindConfigAsset      Kind = 1  // Asset, BaseScale (the asset's decimal scale)
	KindConfigMarket     Kind = 2  // Market, MarketCfg
	KindPlaceOrder       Kind = 3  // User, Market, Side, Type, TIF, STP, Price, Qty | QuoteQty, Key = client order id
	KindCancelOrder      Kind = 4  // User, OrderID (or Key = client order id), Market optional
	KindModifyOrder      Kind = 5  // User, OrderID, Price (0 = keep), Qty (new total, 0 = keep)
	KindSpotDeposit      Kind = 6  // User, Asset, Amount > 0, Key = req_id
	KindSpotWithdraw     Kind = 7  // User, Asset, Amount > 0, Key = req_id
	KindSpotRefund       Kind = 8  // User, Asset, Amount > 0, Key = req_id of the withdraw it undoes
	KindAdjust           Kind = 9  // User, Asset, Amount != 0 (signed), Key = reference
	KindSetAccountStatus Kind = 10 // User, Status
	KindHaltMarket       Kind = 11 // Market, User = the operator: a breaker trip with reason MANUAL_HALT
	KindResumeMarket     Kind = 12 // Market, Flags = target status | ResumeRebuild, User = operator, Text = note (breaker.go)
	KindTick             Kind = 13 // Flags&TickFullCheck: run the full invariant check
	KindSnapshot         Kind = 14 // ask the driver to snapshot the state as of this seq
	KindDebugPanic       Kind = 15 // panics inside apply when Config.AllowDebugPanic (poison tests)
	KindBreakerTrip      Kind = 16 // Market (0 = the core), Flags = BreakerReason, User = operator or 0, Text = context JSON
	KindResumeCore       Kind = 17 // User = operator, Text = note: lifts a core halt if the full check passes
	KindCancelAll        Kind = 18 // Market, Qty = most orders to cancel (1..MaxCancelSlice): operator, HALTED/SUSPENDED market
	KindFault            Kind = 19 // Flags = Fault, Market, Side, User, Asset, Amount: only with Config.AllowFaults (fault.go)
	KindForgetOps        Kind = 20 // Key = req_id: forget its spot deposit / withdraw / refund records (the transfer is terminal)
	KindP2PCreateUser    Kind = 21 // User (0 = allocate), Text = handle, Asset, Amount = initial credit (p2p_cmd.go)
	KindP2PTransfer      Kind = 22 // User = sender, OrderID = recipient UserID, Asset, Amount, Key = requestId, Qty = hold ns
	KindP2PCancel        Kind = 23 // User = caller, OrderID = transfer id, Flags = P2PCancelAdmin
	KindP2PTick          Kind = 24 // execute the PENDING transfers due at the command's time
	// 25..27: free (issue 23 reserved them). Binary markets (binary.go), issue 22:
	KindConfigBinary  Kind = 28 // Market, Cfg.Quote/Lot/MinQty/MaxQty/MakerFee/TakerFee, Amount = payout (0: one whole quote unit), Price = close time (unix ns, 0: none), Text = question (binary.go ValidQuestion)
	KindActivate      Kind = 29 // Market, User = operator: DRAFT -> ACTIVE
	KindSuspendMarket Kind = 30 // Market, User = operator: ACTIVE -> SUSPENDED (cancels only)
	KindResolve       Kind = 31 // Market, Flags = Outcome (YES | NO), User = operator: -> RESOLVED, settling
	KindVoid          Kind = 32 // Market, User = operator: -> VOIDED, settling (every share pays payout/2)
	KindSettle        Kind = 33 // Market, Qty = most orders + positions to process (1..MaxSettleSlice)
	KindArchive       Kind = 34 // Market, User = operator: release a settled binary market's slot (its rows are archived downstream)
	KindP2PForget     Kind = 35 // Price = cutoff (unix ns): forget the finished transfers done at or before it (p2p_cmd.go)
	kindMax                = KindP2PForget
)

var kindNames = [...]string{"", "CONFIG_ASSET", "CONFIG_MARKET", "PLACE_ORDER", "CANCEL_ORDER",
	"MODIFY_ORDER", "SPOT_DEPOSIT", "SPOT_WITHDRAW", "SPOT_REFUND", "ADJUST", "SET_ACCOUNT_STATUS",
	"HALT_MARKET", "RESUME_MARKET", "TICK", "SNAPSHOT", "DEBUG_PANIC", "BREAKER_TRIP", "RESUME_CORE",
	"CANCEL_ALL", "FAULT", "FORGET_OPS", "P2P_CREATE_USER", "P2P_TRANSFER", "P2P_CANCEL", "P2P_TICK",
	KindConfigBinary: "CONFIG_BINARY", KindActivate: "ACTIVATE_MARKET", KindSuspendMarket: "SUSPEND_MARKET",
	KindResolve: "RESOLVE_MARKET", KindVoid: "VOID_MARKET", KindSettle: "SETTLE_MARKET", KindArchive: "ARCHIVE_MARKET",
	KindP2PForget: "P2P_FORGET"}

// Valid reports whether k is a kind the codec can journal and replay.
// Kinds 25..27 are unassigned.
func (k Kind) Valid() bool { return k >= 1 && k <= kindMax && (k < 25 || k > 27) }

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "UNKNOWN"
}

// Tick flags.
const TickFullCheck uint8 = 1

// MarketCfg is the static configuration of a market.
type MarketCfg struct {
	Base, Quote AssetID
	BaseScale   uint8 // prices are per 10^BaseScale base Units; tick*lot must be a multiple of it
	Tick        Price // price increment, > 0
	Lot         Units // quantity increment, > 0
	MinQty      Units // smallest order quantity (a multiple of Lot), > 0
	MaxQty      Units // largest order quantity, >= MinQty
	MakerFee    Rate  // millionths, 0..MaxFeeRate
	TakerFee    Rate  // millionths, 0..MaxFeeRate
}

// Command is one sequenced input. It is a flat value (no pointers) so ring
// slots hold it without allocation. Fields not used by a Kind must be zero;
// the codec enforces that "absent" and "zero" are the same thing.
type Command struct {
	Seq  Seq   // assigned once at sequencing; == WAL index
	Time int64 // unix nanoseconds, assigned at sequencing; the core clamps it monotonic
	Kind Kind

	Side      Side
	Type      OrderType
	TIF       TimeInForce
	STP       STP
	Status    AccountStatus
	Flags     uint8
	BaseScale uint8 // KindConfigAsset: the asset's decimal scale (edges only)

	User     UserID
	Market   MarketID
	Asset    AssetID
	OrderID  OrderID
	Price    Price
	Qty      Units
	QuoteQty Units // MARKET BUY by quote budget (fees included)
	Amount   Units // transfers and adjustments; signed only for KindAdjust
	Key      Key
	Cfg      MarketCfg // KindConfigMarket only
	// Text is free text of operator commands (a breaker resolution's note,
	// a breaker trip's context JSON), at most MaxTextLen bytes; empty for
	// every trading command. The core stores none of those: they are in the
	// WAL for the audit trail (the sink's circuit_breaker_events). It does
	// store two: a p2p user's handle and a binary market's question.
	Text string
}

// MaxTextLen bounds Command.Text.
const MaxTextLen = 1024
