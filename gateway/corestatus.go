package gateway

import (
	"net/http"

	"github.com/ubscore/ubscore/core"
)

// How a core rejection becomes an HTTP answer. The body's code is always the
// core's own string (core.Code.String); the status follows one rule:
//
//	400 Bad Request  the request is wrong whatever the state (shape, ranges, grid)
//	404 Not Found    the thing named does not exist for this user
//	409 Conflict     a well-formed request the current state refuses
//	                 (balance, account or market status, book capacity, idempotency)
//	500              the command crashed the core (POISON_COMMAND): a bug
//	503              the core refuses all work (CORE_HALTED)
//
//	code                        status  code                        status
//	INVALID_COMMAND             400     INSUFFICIENT_BALANCE        409
//	UNKNOWN_COMMAND             400     ACCOUNT_FROZEN              409
//	INVALID_ASSET               400     ACCOUNT_DISABLED            409
//	INVALID_MARKET              400     MARKET_HALTED               409
//	INVALID_MARKET_CONFIG       400     DUPLICATE_CLIENT_ORDER_ID   409 (*)
//	INVALID_USER                400     POST_ONLY_WOULD_TAKE        409
//	INVALID_SIDE                400     FOK_NOT_FILLED              409
//	INVALID_ORDER_TYPE          400     NO_LIQUIDITY                409
//	INVALID_TIME_IN_FORCE       400     TOO_MANY_OPEN_ORDERS        409
//	INVALID_PRICE               400     TOO_MANY_PRICE_LEVELS       409
//	INVALID_QUANTITY            400     BOOK_FULL                   409
//	INVALID_AMOUNT              400     TOO_MANY_USERS              409
//	QUANTITY_TOO_SMALL          400     TOO_MANY_OPS                409
//	QUANTITY_TOO_LARGE          400     REQ_ID_CONFLICT             409
//	OVERFLOW                    400     REFUND_WITHOUT_WITHDRAW     409
//	INVALID_STATUS              400     FEE_ACCOUNT_CANNOT_TRADE    409
//	NOTHING_TO_MODIFY           400     NOT_HALTED                  409
//	INVALID_KEY                 400     SELF_TRADE_PREVENTED        409
//	ORDER_NOT_FOUND             404     INVARIANT_VIOLATION         409
//	ACCOUNT_NOT_FOUND           404     MARKET_EXISTS               409
//	CORE_HALTED                 503     POISON_COMMAND              500
//	MARKET_SUSPENDED            409     CANCELLED_BY_OPERATOR       409 (an order's cancel reason)
//
// (*) POST /order answers a duplicate client_order_id of a live order with
// that order (200, "duplicate": true); 409 only if it is gone by the time
// it is looked up.
var coreStatus = map[core.Code]struct {
	status int
	msg    string
}{
	core.CodeInvalidCommand:         {400, "the command is malformed"},
	core.CodeUnknownCommand:         {400, "unknown command"},
	core.CodeInvalidAsset:           {400, "unknown asset"},
	core.CodeInvalidMarket:          {400, "unknown market"},
	core.CodeInvalidMarketConfig:    {400, "invalid market configuration"},
	core.CodeInvalidUser:            {400, "invalid user"},
	core.CodeInvalidSide:            {400, "side must be BUY or SELL"},
	core.CodeInvalidOrderType:       {400, "type must be LIMIT or MARKET"},
	core.CodeInvalidTimeInForce:     {400, "invalid time_in_force for this order type"},
	core.CodeInvalidPrice:           {400, "invalid price for this order or market"},
	core.CodeInvalidQuantity:        {400, "invalid quantity for this order or market"},
	core.CodeInvalidAmount:          {400, "invalid amount"},
	core.CodeQuantityTooSmall:       {400, "quantity is below the market's minimum"},
	core.CodeQuantityTooLarge:       {400, "quantity is above the market's maximum"},
	core.CodeOverflow:               {400, "amount too large"},
	core.CodeInvalidStatus:          {400, "invalid account status"},
	core.CodeNothingToModify:        {400, "the modification changes nothing"},
	core.CodeInvalidKey:             {400, "invalid client_order_id or ref"},
	core.CodeOrderNotFound:          {404, "order not found"},
	core.CodeAccountNotFound:        {404, "account not found"},
	core.CodeInsufficientBalance:    {409, "insufficient balance"},
	core.CodeAccountFrozen:          {409, "the account is frozen"},
	core.CodeAccountDisabled:        {409, "the account is disabled"},
	core.CodeMarketHalted:           {409, "the market is halted"},
	core.CodeDuplicateClientOrderID: {409, "client_order_id is in use by a live order"},
	core.CodePostOnlyWouldTake:      {409, "a POST_ONLY order would take liquidity"},
	core.CodeFOKNotFilled:           {409, "a FOK order cannot be filled completely"},
	core.CodeNoLiquidity:            {409, "no liquidity for a MARKET order"},
	core.CodeTooManyOpenOrders:      {409, "too many open orders"},
	core.CodeTooManyPriceLevels:     {409, "the book has too many price levels"},
	core.CodeBookFull:               {409, "the book is full"},
	core.CodeTooManyUsers:           {409, "no more accounts can be created"},
	core.CodeTooManyOps:             {409, "no more transfer references can be recorded"},
	core.CodeReqIDConflict:          {409, "ref was used with other parameters"},
	core.CodeRefundWithoutWithdraw:  {409, "no matching withdrawal to refund"},
	core.CodeFeeAccountCannotTrade:  {409, "the fee account cannot trade"},
	core.CodeNotHalted:              {409, "the market is not halted"},
	core.CodeSelfTradePrevented:     {409, "self-trade prevented"},
	core.CodeInvariantViolation:     {409, "the market's invariant check fails; it stays halted"},
	core.CodeMarketExists:           {409, "the market exists and has orders"},
	core.CodeCoreHalted:             {503, "the core is halted"},
	core.CodePoisonCommand:          {500, "the command could not be applied"},
	core.CodeMarketSuspended:        {409, "the market is suspended: cancels only"},
	core.CodeCancelledByOperator:    {409, "cancelled by an operator"},
	// binary markets (issue 22)
	core.CodeInvalidOutcome:     {400, "outcome must be YES or NO"},
	core.CodeInsufficientShares: {409, "insufficient shares: a SELL may sell only shares held and not already offered"},
	core.CodeMarketNotOpen:      {409, "the market is not open yet"},
	core.CodeMarketClosed:       {409, "the market is closed to new orders"},
	core.CodeNotBinary:          {400, "not a binary market"},
	core.CodeNotSupported:       {400, "not supported on a binary market"},
	core.CodeNothingToSettle:    {409, "the market is not settling"},
	core.CodeInvalidQuestion:    {400, "question must be 1..256 bytes of UTF-8 without control characters"},
}

// coreErrors holds one immutable *APIError per core code, so a rejection
// costs no allocation. Never modify one: copy it.
var coreErrors = func() map[core.Code]*APIError {
	m := make(map[core.Code]*APIError, len(coreStatus))
	for c, s := range coreStatus {
		m[c] = &APIError{Status: s.status, Code: c.String(), Message: s.msg}
	}
	return m
}()

// coreError is the answer to a command the core rejected with code.
func coreError(code core.Code) *APIError {
	if e, ok := coreErrors[code]; ok {
		return e
	}
	return &APIError{Status: http.StatusInternalServerError, Code: code.String(), Message: "unexpected core result"}
}
