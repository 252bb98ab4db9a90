package gateway

import (
	"errors"
	"net/http"
)

// Stable API codes produced by this package. They are part of the public API:
// never rename one. The amount codes match the core's names (core.Code.String).
const (
	CodeUnauthorized      = "UNAUTHORIZED"       // 401: no, bad or expired credentials
	CodeForbidden         = "FORBIDDEN"          // 403: valid credentials, not allowed
	CodeInvalidAmount     = "INVALID_AMOUNT"     // 400: not a decimal, or <= 0
	CodePrecisionOverflow = "PRECISION_OVERFLOW" // 400: more decimals than the scale
	CodeOverflow          = "OVERFLOW"           // 400: does not fit in int64 units

	// Request shape (layer 1, before anything reaches the core).
	CodeInvalidJSON      = "INVALID_JSON"       // 400: not one well-formed JSON object
	CodeUnknownField     = "UNKNOWN_FIELD"      // 400: a member the endpoint does not define
	CodeDuplicateField   = "DUPLICATE_FIELD"    // 400: the same member twice
	CodeInvalidFieldType = "INVALID_FIELD_TYPE" // 400: e.g. a number where a decimal string is required
	CodeMissingField     = "MISSING_FIELD"      // 400: a required member is absent
	CodeInvalidParameter = "INVALID_PARAMETER"  // 400: a bad query parameter (limit, status)
	CodeBodyTooLarge     = "BODY_TOO_LARGE"     // 413: body longer than ServerConfig.MaxBodyBytes
	CodeHeaderTooLarge   = "HEADER_TOO_LARGE"   // 431: request headers beyond the read buffer
	CodeBadRequest       = "BAD_REQUEST"        // 400: the HTTP request itself could not be parsed
	CodeRequestTimeout   = "REQUEST_TIMEOUT"    // 408: the request was not received in time

	// Routing.
	CodeNotFound         = "NOT_FOUND"          // 404: no such endpoint
	CodeMethodNotAllowed = "METHOD_NOT_ALLOWED" // 405: the endpoint exists, not with this method

	// Availability.
	CodeSystemBusy         = "SYSTEM_BUSY"         // 503: the input ring is full (Backend ErrBusy); retry later
	CodeServiceUnavailable = "SERVICE_UNAVAILABLE" // 503: the core has stopped or is not ready yet
	CodeInternal           = "INTERNAL_ERROR"      // 500: a bug; logged with details, never shown

	// Core reason codes the gateway also produces itself at the edge. The
	// strings are the core's (core.Code.String), so a client sees one code
	// whichever layer rejected the request.
	CodeInvalidMarket      = "INVALID_MARKET"
	CodeInvalidAsset       = "INVALID_ASSET"
	CodeInvalidUser        = "INVALID_USER"
	CodeInvalidSide        = "INVALID_SIDE"
	CodeInvalidOrderType   = "INVALID_ORDER_TYPE"
	CodeInvalidTimeInForce = "INVALID_TIME_IN_FORCE"
	CodeInvalidPrice       = "INVALID_PRICE"
	CodeInvalidQuantity    = "INVALID_QUANTITY"
	CodeQuantityTooSmall   = "QUANTITY_TOO_SMALL"
	CodeQuantityTooLarge   = "QUANTITY_TOO_LARGE"
	CodeInvalidKey         = "INVALID_KEY"
	CodeInvalidStatus      = "INVALID_STATUS"
	CodeNothingToModify    = "NOTHING_TO_MODIFY"
	CodeOrderNotFound      = "ORDER_NOT_FOUND"

	// CodeOrderNotOpen (409): cancel or modify of the caller's order that is
	// no longer open (FILLED, CANCELLED, EXPIRED); the answer carries the
	// order as "order" beside code and message.
	CodeOrderNotOpen = "ORDER_NOT_OPEN"
)

// APIError is a rejection a user can cause. The server writes it as HTTP Status
// with the body {"code": Code, "message": Message}. Message is for humans and
// may change; it never contains the request's token, the secret or the raw input.
type APIError struct {
	Status  int    // HTTP status code, e.g. 401
	Code    string // stable code, one of the Code* constants
	Message string // human-readable reason
}

func (e *APIError) Error() string { return "gateway: " + e.Code + ": " + e.Message }

// Is reports whether target is an *APIError with the same Code, so that
// errors.Is(err, &APIError{Code: CodeOverflow}) works whatever the message.
func (e *APIError) Is(target error) bool {
	t, ok := target.(*APIError)
	return ok && t.Code == e.Code
}

// Unauthorized is a 401 UNAUTHORIZED: the request carries no valid credentials.
func Unauthorized(msg string) *APIError {
	return &APIError{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: msg}
}

// Forbidden is a 403 FORBIDDEN: the credentials are valid but do not allow this.
func Forbidden(msg string) *APIError {
	return &APIError{Status: http.StatusForbidden, Code: CodeForbidden, Message: msg}
}

// BadRequest is a 400 with the given stable code (e.g. CodeInvalidAmount).
func BadRequest(code, msg string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Code: code, Message: msg}
}

// Unavailable is a 503 with the given stable code (CodeSystemBusy or
// CodeServiceUnavailable): the request was not applied; it may be retried.
func Unavailable(code, msg string) *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Code: code, Message: msg}
}

// AsAPIError returns the *APIError in err's chain, if any.
func AsAPIError(err error) (*APIError, bool) {
	var e *APIError
	ok := errors.As(err, &e)
	return e, ok
}
