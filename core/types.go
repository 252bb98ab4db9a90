package core

import "encoding/binary"

// Typed integers so that a price cannot be passed where a quantity is expected.
type (
	// Seq is the sequence number assigned once, at sequencing; it is also the
	// command's index in the write-ahead log. The first command has Seq 1.
	Seq uint64
	// UserID identifies an account holder. FeeUser (0) is the exchange's fee account.
	UserID uint64
	// AssetID identifies an asset; valid ids are 1..MaxAssets.
	AssetID uint32
	// MarketID identifies a market; valid ids are 1..MaxMarkets.
	MarketID uint32
	// OrderID is assigned by the core, strictly increasing from 1.
	OrderID uint64
	// Units is an amount in an asset's smallest unit (e.g. satoshi).
	Units int64
	// Price is quote Units per one whole base unit (10^BaseScale base Units).
	Price int64
	// Rate is a fee rate in millionths (1_000 = 0.1%).
	Rate int64
	// Key is a fixed-size identifier supplied by a client: a client order id, a
	// transfer req_id or an adjustment reference. Zero means "absent". Bytes after
	// the first zero byte must be zero (canonical form, checked by Validate).
	Key [32]byte
)

// FeeUser is the account that collects trading fees; it cannot trade.
const FeeUser UserID = 0

// Named limits: everything that can grow has one.
const (
	MaxAssets            = 64        // asset ids 1..MaxAssets
	MaxMarkets           = 256       // market ids 1..MaxMarkets
	MaxUsers             = 2_000_000 // accounts the core will create
	MaxOpenOrdersPerUser = 1_000     // resting orders per user, all markets
	MaxOrdersPerBook     = 1_000_000 // resting orders per market
	MaxPriceLevels       = 100_000   // price levels per book side
	// MaxProcessedOps bounds the live processed-ops set (spot transfer req_ids
	// and adjustment refs): past it a first-seen spot deposit or withdraw is
	// refused with TOO_MANY_OPS, recorded like any refusal in the reserve
	// above it (OpsReserve), where refunds and adjustments still fit. The
	// transfer service forgets the records of terminal transfers
	// (KindForgetOps), so the set stays far below this.
	MaxProcessedOps      = 50_000_000
	OpsReserve           = 1_000_000
	MaxBaseScale         = 18
	RateDenominator Rate = 1_000_000
	MaxFeeRate      Rate = 100_000 // 10%
	MaxUnits             = Units(1<<63 - 1)
)

// Side of an order.
type Side uint8

const (
	Buy  Side = 1
	Sell Side = 2
)

// OrderType of an order.
type OrderType uint8

const (
	Limit  OrderType = 1
	Market OrderType = 2
)

// TimeInForce of a limit order. Market orders ignore it (they are always IOC).
type TimeInForce uint8

const (
	GTC      TimeInForce = 1
	IOC      TimeInForce = 2
	FOK      TimeInForce = 3
	PostOnly TimeInForce = 4
)

// STP is the self-trade prevention mode of an incoming order.
type STP uint8

const (
	STPCancelResting STP = 0 // default: cancel the resting order of the same user, keep matching
	STPExpireTaker   STP = 1 // expire the incoming order's remainder at the first own resting order
)

// AccountStatus of a user's spot account.
type AccountStatus uint8

const (
	Active   AccountStatus = 0
	Frozen   AccountStatus = 1 // no new orders, no withdrawals; deposits, refunds, cancels allowed
	Disabled AccountStatus = 2 // only cancels and refunds
)

// MarketStatus of a market: one state machine (status.go) that binary
// markets extend with their lifecycle states. Values are part of the
// snapshot format and of ResumeMarket commands: append only.
type MarketStatus uint8

const (
	MarketActive    MarketStatus = 0
	MarketHalted    MarketStatus = 1 // circuit breaker: no new orders, cancels or modifies; queries served
	MarketSuspended MarketStatus = 2 // cancels allowed; no new orders or modifies
	// Binary markets' lifecycle (binary.go):
	MarketDraft    MarketStatus = 3 // configured, not yet open: no orders
	MarketResolved MarketStatus = 4 // outcome set; orders cancelled and positions paid by settle slices
	MarketSettled  MarketStatus = 5 // every winning share paid, reserve and pnl pool 0: terminal
	MarketVoided   MarketStatus = 6 // every share pays payout/2 (settle slices): terminal
)

// OrderStatus of an order as reported in events.
type OrderStatus uint8

const (
	StatusNew             OrderStatus = 1
	StatusPartiallyFilled OrderStatus = 2
	StatusFilled          OrderStatus = 3
	StatusCancelled       OrderStatus = 4
	StatusExpired         OrderStatus = 5
	StatusRejected        OrderStatus = 6
)

// The API names of the small enums (stable: part of the HTTP, SQL and replay
// outputs). A value that is not a valid member is "" when it is the zero
// value of a type whose members start at 1 (absent), else "UNKNOWN".
var (
	orderStatusNames   = [...]string{"", "NEW", "PARTIALLY_FILLED", "FILLED", "CANCELLED", "EXPIRED", "REJECTED"}
	sideNames          = [...]string{"", "BUY", "SELL"}
	orderTypeNames     = [...]string{"", "LIMIT", "MARKET"}
	tifNames           = [...]string{"", "GTC", "IOC", "FOK", "POST_ONLY"}
	stpNames           = [...]string{"CANCEL_RESTING", "EXPIRE_TAKER"}
	accountStatusNames = [...]string{"ACTIVE", "FROZEN", "DISABLED"}
	marketStatusNames  = [...]string{"ACTIVE", "HALTED", "SUSPENDED", "DRAFT", "RESOLVED", "SETTLED", "VOIDED"}
)

func enumName(names []string, i uint8) string {
	if int(i) < len(names) {
		return names[i]
	}
	return "UNKNOWN"
}

func (s OrderStatus) String() string   { return enumName(orderStatusNames[:], uint8(s)) }
func (s Side) String() string          { return enumName(sideNames[:], uint8(s)) }
func (t OrderType) String() string     { return enumName(orderTypeNames[:], uint8(t)) }
func (t TimeInForce) String() string   { return enumName(tifNames[:], uint8(t)) }
func (s STP) String() string           { return enumName(stpNames[:], uint8(s)) }
func (s AccountStatus) String() string { return enumName(accountStatusNames[:], uint8(s)) }
func (s MarketStatus) String() string  { return enumName(marketStatusNames[:], uint8(s)) }

// KeyFrom builds a Key from a string; ok is false if s is empty, longer than
// the key, or contains a zero byte.
func KeyFrom(s string) (k Key, ok bool) {
	if len(s) == 0 || len(s) > len(k) {
		return k, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return k, false
		}
		k[i] = s[i]
	}
	return k, true
}

// String returns the key up to its first zero byte.
func (k Key) String() string {
	n := 0
	for n < len(k) && k[n] != 0 {
		n++
	}
	return string(k[:n])
}

// IsZero reports whether the key is absent. Four word loads instead of
// a 32-byte memequal call: it runs on every order placed.
func (k Key) IsZero() bool {
	return binary.LittleEndian.Uint64(k[0:])|binary.LittleEndian.Uint64(k[8:])|
		binary.LittleEndian.Uint64(k[16:])|binary.LittleEndian.Uint64(k[24:]) == 0
}

// canonical reports whether no non-zero byte follows a zero byte.
func (k Key) canonical() bool {
	if k.IsZero() {
		return true // the common case: no key
	}
	seenZero := false
	for _, b := range k {
		if b == 0 {
			seenZero = true
		} else if seenZero {
			return false
		}
	}
	return true
}
