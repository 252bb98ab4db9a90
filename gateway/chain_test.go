package gateway

// POST /api/v1/withdrawals over a fake withdrawal service: each outcome of
// withdraw.Service.Create has its own answer. The one that matters most is
// the unknown commit: 202 with state UNKNOWN and the withdrawal id to poll —
// never a bare 500 after which a client retry without cid could withdraw twice.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/withdraw"
)

// fakeWithdrawals answers Create with err (or a PENDING withdrawal when nil)
// and records what it was asked.
type fakeWithdrawals struct {
	err   error
	calls []withdraw.Request
}

func (f *fakeWithdrawals) Asset(symbol string) (withdraw.Asset, bool) {
	if symbol != "ETH" {
		return withdraw.Asset{}, false
	}
	return withdraw.Asset{Symbol: "ETH", ID: 3, Scale: 8, ChainDecimals: 18}, true
}

func (f *fakeWithdrawals) Create(_ context.Context, r withdraw.Request) (withdraw.Withdrawal, bool, error) {
	f.calls = append(f.calls, r)
	if f.err != nil {
		return withdraw.Withdrawal{}, false, f.err
	}
	now := time.Unix(1_700_000_000, 0)
	return withdraw.Withdrawal{ID: 42, UserID: r.User, Asset: 3, Amount: r.Amount, ValueWei: big.NewInt(1),
		Address: chaintx.Address(r.Address), CID: r.CID, State: withdraw.Pending, CreatedAt: now, UpdatedAt: now}, false, nil
}

func (f *fakeWithdrawals) Get(context.Context, int64) (withdraw.Withdrawal, error) {
	return withdraw.Withdrawal{}, &withdraw.Error{Code: withdraw.CodeNotFound, Message: "no such withdrawal"}
}

func (f *fakeWithdrawals) List(context.Context, core.UserID, int, int) ([]withdraw.Withdrawal, int64, error) {
	return nil, 0, nil
}

// outcome is one case of TestPostWithdrawalOutcomes.
type outcome struct {
	name   string
	err    error
	status int
	check  func(t *testing.T, out map[string]any)
}

// guard is a refusal of code answered with status.
func guard(code withdraw.Code, status int) outcome {
	return outcome{string(code), &withdraw.Error{Code: code, Message: "refused"}, status, func(t *testing.T, out map[string]any) {
		if out["code"] != string(code) {
			t.Fatalf("answer %v", out)
		}
	}}
}

func TestPostWithdrawalOutcomes(t *testing.T) {
	const body = `{"asset":"ETH","amount":"0.5","address":"0x00000000000000000000000000000000000000aa"}`
	for _, tc := range []outcome{
		{"recorded", nil, http.StatusAccepted, func(t *testing.T, out map[string]any) {
			if out["withdrawal_id"] != json.Number("42") || out["state"] != string(withdraw.Pending) || out["amount"] != "0.50000000" {
				t.Fatalf("answer %v", out)
			}
		}},
		{"commit outcome unknown", &withdraw.UnconfirmedError{ID: 77, Cause: fmt.Errorf("connection reset")}, http.StatusAccepted,
			func(t *testing.T, out map[string]any) {
				if out["withdrawal_id"] != json.Number("77") || out["state"] != "UNKNOWN" || out["message"] == "" {
					t.Fatalf("unknown outcome answered %v; want 202 UNKNOWN with the id to poll", out)
				}
			}},
		{"not recorded", fmt.Errorf("%w: fenced", withdraw.ErrNotRecorded), http.StatusInternalServerError,
			func(t *testing.T, out map[string]any) {
				if out["code"] != CodeSystemError || out["withdrawal_id"] != nil {
					t.Fatalf("answer %v", out)
				}
			}},
		{"refused", &withdraw.Error{Code: withdraw.CodeInsufficientBalance, Message: "not enough"}, http.StatusConflict,
			func(t *testing.T, out map[string]any) {
				if out["code"] != string(withdraw.CodeInsufficientBalance) {
					t.Fatalf("answer %v", out)
				}
			}},
		// The guards of issue 33: nothing was debited; each has its status.
		guard(withdraw.CodeWithdrawalLimit, http.StatusConflict),
		guard(withdraw.CodeAddressNotAllowed, http.StatusForbidden),
		guard(withdraw.CodeHotWalletShort, http.StatusConflict),
		guard(withdraw.CodeHotWalletUnknown, http.StatusServiceUnavailable),
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeWithdrawals{err: tc.err}
			h := newHarness(t, func(c *ServerConfig) {
				c.Chain = &ChainConfig{Withdrawals: fake, Checksum: func(a chaintx.Address) string { return string(a) }}
			})
			st, out := h.do("POST", "/api/v1/withdrawals", h.token(7), body)
			if st != tc.status {
				t.Fatalf("status %d %v, want %d", st, out, tc.status)
			}
			tc.check(t, out)
			if len(fake.calls) != 1 || fake.calls[0].User != 7 || fake.calls[0].Amount != 50_000_000 {
				t.Fatalf("service asked %+v", fake.calls)
			}
		})
	}
	// Bad input never reaches the service.
	fake := &fakeWithdrawals{}
	h := newHarness(t, func(c *ServerConfig) { c.Chain = &ChainConfig{Withdrawals: fake} })
	h.fails("POST", "/api/v1/withdrawals", h.token(7), `{"asset":"DOGE","amount":"1","address":"0xaa"}`, 400, string(withdraw.CodeInvalidAsset))
	h.fails("POST", "/api/v1/withdrawals", h.token(7), `{"asset":"ETH","amount":"0.000000001","address":"0xaa"}`, 400, CodeInvalidAmount)
	h.fails("POST", "/api/v1/withdrawals", h.token(7), `{"asset":"ETH","address":"0xaa"}`, 400, CodeMissingField)
	if len(fake.calls) != 0 {
		t.Fatalf("bad requests reached the service: %+v", fake.calls)
	}
}
