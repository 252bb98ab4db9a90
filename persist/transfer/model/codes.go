package model

import "github.com/ubscore/ubscore/core"

// The core's typed integers, so a quantity cannot be passed as an id.
type (
	UserID  = core.UserID
	AssetID = core.AssetID
	Units   = core.Units // an amount in the asset's smallest unit
)

// Code is a stable error code of the spec (1.5, 8.2); the strings are public API.
type Code string

const (
	CodeUnauthorized           Code = "UNAUTHORIZED"
	CodeForbidden              Code = "FORBIDDEN"
	CodeSameAccount            Code = "SAME_ACCOUNT"
	CodeInvalidAccountType     Code = "INVALID_ACCOUNT_TYPE"
	CodeUnsupportedAccountType Code = "UNSUPPORTED_ACCOUNT_TYPE"
	CodeInvalidAmount          Code = "INVALID_AMOUNT"
	CodePrecisionOverflow      Code = "PRECISION_OVERFLOW"
	CodeAmountTooSmall         Code = "AMOUNT_TOO_SMALL"
	CodeAmountTooLarge         Code = "AMOUNT_TOO_LARGE"
	CodeOverflow               Code = "OVERFLOW"
	CodeInvalidAsset           Code = "INVALID_ASSET"
	CodeAssetSuspended         Code = "ASSET_SUSPENDED"
	CodeTransferNotAllowed     Code = "TRANSFER_NOT_ALLOWED"
	CodeSourceAccountNotFound  Code = "SOURCE_ACCOUNT_NOT_FOUND"
	CodeTargetAccountNotFound  Code = "TARGET_ACCOUNT_NOT_FOUND"
	CodeAccountFrozen          Code = "ACCOUNT_FROZEN"
	CodeAccountDisabled        Code = "ACCOUNT_DISABLED"
	CodeInsufficientBalance    Code = "INSUFFICIENT_BALANCE"
	CodeRateLimitExceeded      Code = "RATE_LIMIT_EXCEEDED"
	CodeDailyLimitExceeded     Code = "DAILY_LIMIT_EXCEEDED"
	CodeDailyAmountExceeded    Code = "DAILY_AMOUNT_EXCEEDED"
	CodeDuplicateRequest       Code = "DUPLICATE_REQUEST"
	CodeSystemError            Code = "SYSTEM_ERROR"
	CodeInvalidRequest         Code = "INVALID_REQUEST" // malformed field the spec has no code for (cid too long)

	// Adapter-level refusals (recorded as EXPLICIT_FAIL or reported as UNKNOWN).
	CodeRefundWithoutWithdraw Code = "REFUND_WITHOUT_WITHDRAW" // refund of a req_id whose withdraw did not succeed
	CodeReqIDConflict         Code = "REQ_ID_CONFLICT"         // same req_id and op, other parameters
	CodeCoreHalted            Code = "CORE_HALTED"             // SPOT: the core's breaker is tripped (spec 004 §5)
	CodeTooManyOps            Code = "TOO_MANY_OPS"            // SPOT: the core's processed-ops set is full
	CodeTooManyUsers          Code = "TOO_MANY_USERS"          // SPOT: the core cannot create another account
)

// Error is a refusal a user can cause, with its stable code.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "transfer: " + string(e.Code)
	}
	return "transfer: " + string(e.Code) + ": " + e.Message
}

// Reject is the refusal of code c with msg.
func Reject(c Code, msg string) *Error { return &Error{Code: c, Message: msg} }
