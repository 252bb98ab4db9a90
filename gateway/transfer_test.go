package gateway

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// fakeTransfers is a TransferService that records what reached it and
// answers from fixed state; the real service is tested end to end in
// cmd/exchange (transfer_e2e_test.go).
type fakeTransfers struct {
	mu       sync.Mutex
	creates  []model.Request
	next     transfer.Result
	err      error
	stored   map[string]transfer.Transfer
	funding  map[core.AssetID]model.AccountState
	deposits map[string]bool
	statuses []string
	fundErr  error
}

func newFakeTransfers() *fakeTransfers {
	return &fakeTransfers{stored: map[string]transfer.Transfer{}, deposits: map[string]bool{},
		funding: map[core.AssetID]model.AccountState{1: {Exists: true, Status: model.Active, Available: 2_500_000}}}
}

var testTransferAssets = map[string]model.AssetConfig{
	"USDT": {ID: 1, Symbol: "USDT", Precision: 6, MinTransfer: 10_000, MaxTransfer: 10_000_000_000_000,
		Status: model.AssetActive, InternalTransferEnabled: true},
	"BTC": {ID: 2, Symbol: "BTC", Precision: 8, MinTransfer: 1_000, Status: model.AssetSuspended, InternalTransferEnabled: true},
}

func (f *fakeTransfers) AssetConfig(symbol string) (model.AssetConfig, bool) {
	a, ok := testTransferAssets[symbol]
	return a, ok
}

func (f *fakeTransfers) Create(_ context.Context, _ model.Caller, req model.Request) (transfer.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, req)
	return f.next, f.err
}

func (f *fakeTransfers) Get(_ context.Context, reqID string) (transfer.Transfer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.stored[reqID]
	if !ok {
		return t, transfer.ErrNotFound
	}
	return t, nil
}

func (f *fakeTransfers) List(_ context.Context, user core.UserID, page, size int) ([]transfer.Transfer, int64, error) {
	var out []transfer.Transfer
	for _, t := range f.stored {
		if t.UserID == user {
			out = append(out, t)
		}
	}
	return out, int64(len(out)), nil
}

func (f *fakeTransfers) FundingBalances(context.Context, core.UserID) (map[core.AssetID]model.AccountState, error) {
	return f.funding, f.fundErr
}

func (f *fakeTransfers) Deposit(_ context.Context, txRef string, _ core.UserID, _ core.AssetID, amount core.Units) (bool, error) {
	if amount == 7 {
		return false, transfer.ErrDepositConflict
	}
	first := !f.deposits[txRef]
	f.deposits[txRef] = true
	return first, nil
}

func (f *fakeTransfers) SetFundingStatus(_ context.Context, user core.UserID, asset core.AssetID, st model.AccountStatus) error {
	f.statuses = append(f.statuses, itoa(int64(user))+"/"+itoa(int64(asset))+"/"+string(st))
	return nil
}

func (f *fakeTransfers) Invariants(context.Context) ([]byte, error) {
	return []byte(`{"ok":true}`), nil
}
func (f *fakeTransfers) ResumeTransfers(context.Context) ([]byte, error) {
	return []byte(`{"transfers_halted":false}`), nil
}

type fakeFaults struct{ injected, cleared int }

func (f *fakeFaults) Inject(adapter, op, mode string, count int) error {
	if adapter != "funding" && adapter != "spot" {
		return errors.New("adapter must be funding or spot")
	}
	f.injected += count
	return nil
}
func (f *fakeFaults) Clear() { f.cleared++ }

var testTransfer = transfer.Transfer{ReqID: "01M84MM4Z9AKYXQB737R53QH1P", TransferID: 9, UserID: 42,
	From: model.AccountFunding, To: model.AccountSpot, Asset: 1, Amount: 100_500_000, State: transfer.Committed,
	CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), UpdatedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)}

func TestTransferRoutesAbsentWithoutService(t *testing.T) {
	h := newHarness(t)
	h.fails("POST", "/api/v1/internal_transfer", h.token(42), `{}`, 404, CodeNotFound)
	h.fails("POST", "/admin/v1/deposit", h.admin, `{}`, 404, CodeNotFound)
	h.fails("POST", "/admin/v1/faults", h.admin, `{}`, 404, CodeNotFound)
	h.fails("DELETE", "/admin/v1/faults", h.admin, ``, 404, CodeNotFound)
	out := h.ok("GET", "/api/v1/balances", h.token(42), "")
	if _, has := obj(t, list(t, out["balances"])[0])["funding"]; has {
		t.Fatal("funding shown without a transfer service")
	}
}

func TestTransferFaultRouteNeedsFlag(t *testing.T) {
	ft := newFakeTransfers()
	h := newHarness(t, func(c *ServerConfig) { c.Transfers = ft })
	h.fails("POST", "/admin/v1/faults", h.admin, `{"adapter":"spot","op":"deposit","mode":"timeout","count":1}`, 404, CodeNotFound)
	ff := &fakeFaults{}
	h = newHarness(t, func(c *ServerConfig) { c.Transfers = ft; c.Faults = ff })
	h.ok("POST", "/admin/v1/faults", h.admin, `{"adapter":"spot","op":"deposit","mode":"timeout_after_effect","count":3}`)
	h.fails("POST", "/admin/v1/faults", h.admin, `{"adapter":"disk","op":"deposit","mode":"timeout_after_effect","count":3}`, 400, CodeInvalidParameter)
	h.fails("POST", "/admin/v1/faults", h.admin, `{"adapter":"spot","op":"deposit","mode":"x","count":0}`, 400, CodeInvalidParameter)
	h.fails("POST", "/admin/v1/faults", h.token(42), `{"adapter":"spot","op":"deposit","mode":"x","count":1}`, 403, CodeForbidden)
	h.ok("DELETE", "/admin/v1/faults", h.admin, "")
	if ff.injected != 3 || ff.cleared != 1 {
		t.Fatalf("injected %d cleared %d", ff.injected, ff.cleared)
	}
}

// Layer 1 refuses with the spec's codes before the service is called.
func TestTransferLayerOneChecks(t *testing.T) {
	ft := newFakeTransfers()
	h := newHarness(t, func(c *ServerConfig) { c.Transfers = ft })
	tok := h.token(42)
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"1","user_id":43}`, 403, "FORBIDDEN"},
		{`{"from":"SPOT","to":"SPOT","asset":"USDT","amount":"1"}`, 400, "SAME_ACCOUNT"},
		{`{"from":"INVALID","to":"SPOT","asset":"USDT","amount":"1"}`, 400, "INVALID_ACCOUNT_TYPE"},
		{`{"from":"FUTURE","to":"SPOT","asset":"USDT","amount":"1"}`, 400, "UNSUPPORTED_ACCOUNT_TYPE"},
		{`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":-100}`, 400, CodeInvalidFieldType},
		{`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":100}`, 400, CodeInvalidFieldType}, // decimals are strings (issue 20)
		{`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"0"}`, 400, "INVALID_AMOUNT"},
		{`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"0.0000001"}`, 400, "PRECISION_OVERFLOW"},
		{`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"18446744073709551616"}`, 400, "OVERFLOW"},
		{`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"0.001"}`, 400, "AMOUNT_TOO_SMALL"},
		{`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"10000001"}`, 400, "AMOUNT_TOO_LARGE"},
		{`{"from":"FUNDING","to":"SPOT","asset":"DOGE","amount":"1"}`, 400, "INVALID_ASSET"},
		{`{"from":"FUNDING","to":"SPOT","asset":"BTC","amount":"1"}`, 400, "ASSET_SUSPENDED"},
		{`{"from":"FUNDING","to":"SPOT","asset":"USDT"}`, 400, "INVALID_AMOUNT"},
		{`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"1","extra":1}`, 400, CodeUnknownField},
		{`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"1","cid":""}`, 400, "INVALID_REQUEST"},
	} {
		h.fails("POST", "/api/v1/internal_transfer", tok, c.body, c.status, c.code)
	}
	h.fails("POST", "/api/v1/internal_transfer", "", `{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"1"}`, 401, "UNAUTHORIZED")
	if len(ft.creates) != 0 {
		t.Fatalf("refused requests reached the service: %v", ft.creates)
	}
}

func TestTransferAnswers(t *testing.T) {
	ft := newFakeTransfers()
	h := newHarness(t, func(c *ServerConfig) { c.Transfers = ft })
	tok := h.token(42)
	body := `{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"100.5","cid":"c-1","user_id":42}`

	ft.next = transfer.Result{Transfer: testTransfer}
	out := h.ok("POST", "/api/v1/internal_transfer", tok, body)
	if out["state"] != "COMMITTED" || out["req_id"] != testTransfer.ReqID || out["amount"] != "100.500000" ||
		out["from"] != "FUNDING" || out["to"] != "SPOT" || out["asset"] != "USDT" || num(t, out["transfer_id"]) != 9 {
		t.Fatalf("committed answer %v", out)
	}
	if got := ft.creates[0]; got.Amount != "100.5" || got.CID != "c-1" || got.UserID != 42 {
		t.Fatalf("request passed on as %+v", got)
	}

	ft.next = transfer.Result{Transfer: testTransfer, Duplicate: true}
	if out := h.ok("POST", "/api/v1/internal_transfer", tok, body); out["duplicate"] != true || out["req_id"] != testTransfer.ReqID {
		t.Fatalf("duplicate answer %v", out)
	}

	pending := testTransfer
	pending.State = transfer.TargetPending
	ft.next = transfer.Result{Transfer: pending}
	if st, out := h.do("POST", "/api/v1/internal_transfer", tok, body); st != 202 || out["state"] != "TARGET_PENDING" {
		t.Fatalf("pending answer %d %v", st, out)
	}

	failed := testTransfer
	failed.State, failed.ErrorMessage = transfer.Failed, "source withdraw: EXPLICIT_FAIL(INSUFFICIENT_BALANCE)"
	ft.next = transfer.Result{Transfer: failed}
	if st, out := h.do("POST", "/api/v1/internal_transfer", tok, body); st != 400 || out["code"] != "INSUFFICIENT_BALANCE" ||
		out["state"] != "FAILED" || out["req_id"] != testTransfer.ReqID {
		t.Fatalf("failed answer %d %v", st, out)
	}

	ft.next, ft.err = transfer.Result{}, &model.Error{Code: model.CodeAccountFrozen, Message: "frozen"}
	h.fails("POST", "/api/v1/internal_transfer", tok, body, 400, "ACCOUNT_FROZEN")
	ft.err = &model.Error{Code: model.CodeRateLimitExceeded, Message: "slow down"}
	h.fails("POST", "/api/v1/internal_transfer", tok, body, 429, "RATE_LIMIT_EXCEEDED")
	ft.err = &model.Error{Code: CodeTransfersHalted, Message: "halted"}
	h.fails("POST", "/api/v1/internal_transfer", tok, body, 503, CodeTransfersHalted)
	ft.err = &model.Error{Code: CodeServiceUnavailable, Message: "not ready"}
	h.fails("POST", "/api/v1/internal_transfer", tok, body, 503, CodeServiceUnavailable)
	ft.err = errors.New("connection refused")
	h.fails("POST", "/api/v1/internal_transfer", tok, body, 500, "SYSTEM_ERROR")
	// Issue 20: an error from Create means nothing was recorded, and the
	// answer says so; a transfer the database fenced off after an insert of
	// unknown outcome is the transfer (FAILED, SYSTEM_ERROR, nothing moved);
	// one it could not even confirm is 202 with its req_id to poll.
	if _, out := h.do("POST", "/api/v1/internal_transfer", tok, body); !strings.Contains(out["message"].(string), "nothing happened") {
		t.Fatalf("system error before the row: %v", out)
	}
	ft.err = nil
	fenced := testTransfer
	fenced.State, fenced.ErrorMessage = transfer.Failed, "create: not recorded (the database did not confirm the insert); nothing moved"
	ft.next = transfer.Result{Transfer: fenced}
	if st, out := h.do("POST", "/api/v1/internal_transfer", tok, body); st != 500 || out["code"] != "SYSTEM_ERROR" ||
		out["state"] != "FAILED" || out["req_id"] != testTransfer.ReqID {
		t.Fatalf("fenced answer %d %v", st, out)
	}
	ft.next = transfer.Result{Transfer: transfer.Transfer{ReqID: testTransfer.ReqID, UserID: 42, From: model.AccountFunding,
		To: model.AccountSpot, Asset: 1, Amount: 100_500000}, Unconfirmed: true}
	if st, out := h.do("POST", "/api/v1/internal_transfer", tok, body); st != 202 || out["state"] != "UNKNOWN" ||
		out["req_id"] != testTransfer.ReqID || out["amount"] != "100.500000" || !strings.Contains(out["message"].(string), "poll GET") {
		t.Fatalf("unconfirmed answer %d %v", st, out)
	}

	ft.stored[testTransfer.ReqID] = testTransfer
	if out := h.ok("GET", "/api/v1/internal_transfer/"+testTransfer.ReqID, tok, ""); out["state"] != "COMMITTED" ||
		out["created_at"] != "2026-01-02T03:04:05Z" {
		t.Fatalf("get %v", out)
	}
	h.fails("GET", "/api/v1/internal_transfer/"+testTransfer.ReqID, h.token(43), "", 404, "TRANSFER_NOT_FOUND")
	h.fails("GET", "/api/v1/internal_transfer/01M84MM4Z9AKYXQB737R53QH1Q", tok, "", 404, "TRANSFER_NOT_FOUND")
	h.fails("GET", "/api/v1/internal_transfer/not-a-ulid", tok, "", 400, CodeInvalidParameter)
	if out := h.ok("GET", "/api/v1/internal_transfers?page=1&size=5", tok, ""); num(t, out["total"]) != 1 ||
		len(list(t, out["transfers"])) != 1 {
		t.Fatalf("list %v", out)
	}
	h.fails("GET", "/api/v1/internal_transfers?size=101", tok, "", 400, CodeInvalidParameter)
	h.fails("GET", "/api/v1/internal_transfers?page=0", tok, "", 400, CodeInvalidParameter)
}

func TestTransferAdminAndBalances(t *testing.T) {
	ft := newFakeTransfers()
	h := newHarness(t, func(c *ServerConfig) { c.Transfers = ft })
	dep := `{"user_id":42,"asset":"USDT","amount":"12.5","tx_ref":"chain-1"}`
	if out := h.ok("POST", "/admin/v1/deposit", h.admin, dep); out["credited"] != true || out["amount"] != "12.500000" {
		t.Fatalf("deposit %v", out)
	}
	if out := h.ok("POST", "/admin/v1/deposit", h.admin, dep); out["credited"] != false {
		t.Fatalf("repeat deposit %v", out)
	}
	h.fails("POST", "/admin/v1/deposit", h.admin, `{"user_id":42,"asset":"USDT","amount":"0.000007","tx_ref":"chain-1"}`, 409, CodeDepositConflict)
	h.fails("POST", "/admin/v1/deposit", h.admin, `{"user_id":42,"asset":"USDT","amount":"1","tx_ref":"has space"}`, 400, CodeInvalidKey)
	h.fails("POST", "/admin/v1/deposit", h.admin, `{"user_id":42,"asset":"USDT","amount":"-1","tx_ref":"x"}`, 400, CodeInvalidAmount)
	h.fails("POST", "/admin/v1/deposit", h.admin, `{"user_id":42,"asset":"USDT","tx_ref":"x"}`, 400, CodeMissingField)
	h.fails("POST", "/admin/v1/deposit", h.token(42), dep, 403, CodeForbidden)

	h.ok("POST", "/admin/v1/funding/42/status", h.admin, `{"asset":"USDT","status":"FROZEN"}`)
	h.ok("POST", "/admin/v1/funding/42/status", h.admin, `{"status":"ACTIVE"}`)
	h.fails("POST", "/admin/v1/funding/42/status", h.admin, `{"status":"GONE"}`, 400, CodeInvalidStatus)
	if strings.Join(ft.statuses, ",") != "42/1/FROZEN,42/0/ACTIVE" {
		t.Fatalf("statuses %v", ft.statuses)
	}

	bal := list(t, h.ok("GET", "/api/v1/balances", h.token(42), "")["balances"])
	usdt := obj(t, bal[0])
	if f := obj(t, usdt["funding"]); f["available"] != "2.500000" || f["status"] != "ACTIVE" {
		t.Fatalf("funding %v", usdt)
	}
	ft.fundErr = errors.New("postgres away")
	out := h.ok("GET", "/api/v1/balances", h.token(42), "")
	if out["funding_error"] != "FUNDING_UNAVAILABLE" || obj(t, list(t, out["balances"])[0])["funding"] != nil {
		t.Fatalf("balances with funding down %v", out)
	}
	if out := h.ok("GET", "/admin/v1/invariants", h.admin, ""); out["ok"] != true {
		t.Fatalf("invariants %v", out)
	}
	h.ok("POST", "/admin/v1/transfers/resume", h.admin, "")
}
