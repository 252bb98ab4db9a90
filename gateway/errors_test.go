package gateway

// These tests prove the 403 checks and that APIError matches by Code through
// wrapping, which is how the server will map any error to a response.

import (
	"errors"
	"testing"
)

func TestRequireAdminAndSelf(t *testing.T) {
	user := Claims{UserID: 42}
	adm := Claims{UserID: 1, Admin: true}
	is403 := func(err error) bool {
		e, ok := AsAPIError(err)
		return ok && e.Status == 403 && e.Code == CodeForbidden
	}
	if err := RequireAdmin(adm); err != nil {
		t.Errorf("RequireAdmin(admin) = %v", err)
	}
	if err := RequireAdmin(user); !is403(err) {
		t.Errorf("RequireAdmin(user) = %v", err)
	}
	if err := RequireSelf(user, 42); err != nil {
		t.Errorf("RequireSelf(own) = %v", err)
	}
	for _, c := range []struct {
		c  Claims
		id uint64
	}{{user, 43}, {user, 0}, {adm, 42}} {
		if err := RequireSelf(c.c, c.id); !is403(err) {
			t.Errorf("RequireSelf(%+v, %d) = %v", c.c, c.id, err)
		}
	}
}

func TestAPIError(t *testing.T) {
	var err error = Unauthorized("token expired")
	if got := err.Error(); got != "gateway: UNAUTHORIZED: token expired" {
		t.Errorf("Error() = %q", got)
	}
	wrapped := errors.Join(errors.New("context"), err)
	if !errors.Is(wrapped, &APIError{Code: CodeUnauthorized}) || errors.Is(wrapped, &APIError{Code: CodeForbidden}) {
		t.Error("errors.Is does not match by Code")
	}
	if e, ok := AsAPIError(wrapped); !ok || e.Status != 401 {
		t.Errorf("AsAPIError = %+v, %v", e, ok)
	}
	if _, ok := AsAPIError(errors.New("plain")); ok {
		t.Error("AsAPIError matched a plain error")
	}
	if e := BadRequest(CodeOverflow, "x"); e.Status != 400 || e.Code != CodeOverflow {
		t.Errorf("BadRequest = %+v", e)
	}
}
