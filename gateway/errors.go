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

// AsAPIError returns the *APIError in err's chain, if any.
func AsAPIError(err error) (*APIError, bool) {
	var e *APIError
	ok := errors.As(err, &e)
	return e, ok
}
