package core

// Code is the stable outcome of a command. OK (0) means applied; every other
// value is a rejection that changed nothing. The numeric values are part of the
// WAL-derived event stream and the strings are part of the public API: append
// only, never renumber.
type Code uint16

const (
	OK Code = iota
	CodeInvalidCommand
	CodeUnknownCommand
	CodeInvalidAsset
	CodeInvalidMarket
	CodeMarketExists
	CodeInvalidMarketConfig
	CodeInvalidUser
	CodeInvalidSide
	CodeInvalidOrderType
	CodeInvalidTimeInForce
	CodeInvalidPrice
	CodeInvalidQuantity
	CodeInvalidAmount
	CodeQuantityTooSmall
	CodeQuantityTooLarge
	CodeOverflow
	CodeInsufficientBalance
	CodeAccountFrozen
	CodeAccountDisabled
	CodeMarketHalted
	CodeCoreHalted
	CodeOrderNotFound
	CodeDuplicateClientOrderID
	CodePostOnlyWouldTake
	CodeFOKNotFilled
	CodeNoLiquidity
	CodeTooManyOpenOrders
	CodeTooManyPriceLevels
	CodeBookFull
	CodeTooManyUsers
	CodeTooManyOps
	CodeReqIDConflict
	CodeRefundWithoutWithdraw
	CodeInvariantViolation
	CodePoisonCommand
	CodeInvalidStatus
	CodeNothingToModify
	CodeFeeAccountCannotTrade
	CodeNotHalted
	CodeInvalidKey
	CodeSelfTradePrevented
	CodeAccountNotFound
	CodeMarketSuspended
	CodeCancelledByOperator

	// The transfer service's codes (spec 003), p2p_cmd.go.
	CodeInvalidHandle
	CodeInvalidBalance
	CodeUserAlreadyExists
	CodeSelfTransfer
	CodeSenderNotFound
	CodeRecipientNotFound
	CodeTransferNotFound
	CodeCannotCancelTransfer
	CodeCancelWindowExpired
	CodeNotTransferSender
	CodeTooManyPendingTransfers
	CodePendingTransfersFull
	CodeTooManyTransfers
	// binary markets (issue 22)
	CodeInvalidOutcome     // an order or resolution names no outcome (YES = 1, NO = 2)
	CodeInsufficientShares // a SELL of more shares than the position holds free of other sells
	CodeMarketNotOpen      // a DRAFT market: no orders yet
	CodeMarketClosed       // past its close time, or RESOLVED / SETTLED / VOIDED
	CodeNotBinary          // a binary-market command on a spot market
	CodeNotSupported       // modify of a binary order, or a MARKET order on a binary market
	CodeNothingToSettle    // a settle on a market that is not settling
	CodeInvalidQuestion    // a binary market's question: over MaxQuestionLen bytes, not UTF-8, or a control character
	codeCount
)

var codeNames = [codeCount]string{
	OK:                         "OK",
	CodeInvalidCommand:         "INVALID_COMMAND",
	CodeUnknownCommand:         "UNKNOWN_COMMAND",
	CodeInvalidAsset:           "INVALID_ASSET",
	CodeInvalidMarket:          "INVALID_MARKET",
	CodeMarketExists:           "MARKET_EXISTS",
	CodeInvalidMarketConfig:    "INVALID_MARKET_CONFIG",
	CodeInvalidUser:            "INVALID_USER",
	CodeInvalidSide:            "INVALID_SIDE",
	CodeInvalidOrderType:       "INVALID_ORDER_TYPE",
	CodeInvalidTimeInForce:     "INVALID_TIME_IN_FORCE",
	CodeInvalidPrice:           "INVALID_PRICE",
	CodeInvalidQuantity:        "INVALID_QUANTITY",
	CodeInvalidAmount:          "INVALID_AMOUNT",
	CodeQuantityTooSmall:       "QUANTITY_TOO_SMALL",
	CodeQuantityTooLarge:       "QUANTITY_TOO_LARGE",
	CodeOverflow:               "OVERFLOW",
	CodeInsufficientBalance:    "INSUFFICIENT_BALANCE",
	CodeAccountFrozen:          "ACCOUNT_FROZEN",
	CodeAccountDisabled:        "ACCOUNT_DISABLED",
	CodeMarketHalted:           "MARKET_HALTED",
	CodeCoreHalted:             "CORE_HALTED",
	CodeOrderNotFound:          "ORDER_NOT_FOUND",
	CodeDuplicateClientOrderID: "DUPLICATE_CLIENT_ORDER_ID",
	CodePostOnlyWouldTake:      "POST_ONLY_WOULD_TAKE",
	CodeFOKNotFilled:           "FOK_NOT_FILLED",
	CodeNoLiquidity:            "NO_LIQUIDITY",
	CodeTooManyOpenOrders:      "TOO_MANY_OPEN_ORDERS",
	CodeTooManyPriceLevels:     "TOO_MANY_PRICE_LEVELS",
	CodeBookFull:               "BOOK_FULL",
	CodeTooManyUsers:           "TOO_MANY_USERS",
	CodeTooManyOps:             "TOO_MANY_OPS",
	CodeReqIDConflict:          "REQ_ID_CONFLICT",
	CodeRefundWithoutWithdraw:  "REFUND_WITHOUT_WITHDRAW",
	CodeInvariantViolation:     "INVARIANT_VIOLATION",
	CodePoisonCommand:          "POISON_COMMAND",
	CodeInvalidStatus:          "INVALID_STATUS",
	CodeNothingToModify:        "NOTHING_TO_MODIFY",
	CodeFeeAccountCannotTrade:  "FEE_ACCOUNT_CANNOT_TRADE",
	CodeNotHalted:              "NOT_HALTED",
	CodeInvalidKey:             "INVALID_KEY",
	CodeSelfTradePrevented:     "SELF_TRADE_PREVENTED",
	CodeAccountNotFound:        "ACCOUNT_NOT_FOUND",
	CodeMarketSuspended:        "MARKET_SUSPENDED",
	CodeCancelledByOperator:    "CANCELLED_BY_OPERATOR",

	CodeInvalidHandle:           "INVALID_USER_ID",
	CodeInvalidBalance:          "INVALID_BALANCE",
	CodeUserAlreadyExists:       "USER_ALREADY_EXISTS",
	CodeSelfTransfer:            "SELF_TRANSFER",
	CodeSenderNotFound:          "SENDER_NOT_FOUND",
	CodeRecipientNotFound:       "RECIPIENT_NOT_FOUND",
	CodeTransferNotFound:        "TRANSFER_NOT_FOUND",
	CodeCannotCancelTransfer:    "CANNOT_CANCEL_TRANSFER",
	CodeCancelWindowExpired:     "CANCEL_WINDOW_EXPIRED",
	CodeNotTransferSender:       "NOT_TRANSFER_SENDER",
	CodeTooManyPendingTransfers: "TOO_MANY_PENDING_TRANSFERS",
	CodePendingTransfersFull:    "PENDING_TRANSFERS_FULL",
	CodeTooManyTransfers:        "TOO_MANY_TRANSFERS",
	CodeInvalidOutcome:          "INVALID_OUTCOME",
	CodeInsufficientShares:      "INSUFFICIENT_SHARES",
	CodeMarketNotOpen:           "MARKET_NOT_OPEN",
	CodeMarketClosed:            "MARKET_CLOSED",
	CodeNotBinary:               "NOT_BINARY",
	CodeNotSupported:            "NOT_SUPPORTED",
	CodeNothingToSettle:         "NOTHING_TO_SETTLE",
	CodeInvalidQuestion:         "INVALID_QUESTION",
}

// String returns the stable API code, e.g. "INSUFFICIENT_BALANCE".
func (c Code) String() string {
	if c < codeCount {
		return codeNames[c]
	}
	return "UNKNOWN_CODE"
}

// Codes returns every defined code, in numeric order.
func Codes() []Code {
	out := make([]Code, codeCount)
	for i := range out {
		out[i] = Code(i)
	}
	return out
}
