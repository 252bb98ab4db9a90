package model

// These tests prove the pre-validation returns the spec's exact code for
// every check of 1.5.1-1.5.7 (ATK-001..010, BAL-001/004/005 at the
// validation layer) and applies the checks in the order of 1.5.8.

import (
	"testing"
)

const btc AssetID = 2

func okInputs() Inputs {
	a := AssetConfig{ID: btc, Symbol: "BTC", Precision: 8, MinTransfer: 1000, MaxTransfer: 100_000_000_000, Status: AssetActive, InternalTransferEnabled: true}
	return Inputs{
		Caller: Caller{Authenticated: true, UserID: 7},
		Asset:  &a,
		Limits: RateLimits{PerSecond: 10, PerDay: 100, DailyAmount: 10_000_000_000},
		Source: AccountState{Exists: true, Status: Active, Available: 500_000_000},
		Target: AccountState{Exists: true, Status: Active},
	}
}

func okRequest() Request {
	return Request{From: "FUNDING", To: "SPOT", Asset: "BTC", Amount: "1.5"}
}

func TestValidateEveryCode(t *testing.T) {
	type mod func(*Request, *Inputs)
	cases := []struct {
		name string
		m    mod
		want Code
	}{
		{"ok", func(*Request, *Inputs) {}, ""},
		{"ATK-011 no token", func(_ *Request, in *Inputs) { in.Caller.Authenticated = false }, CodeUnauthorized},
		{"user 0", func(_ *Request, in *Inputs) { in.Caller.UserID = 0 }, CodeUnauthorized},
		{"ATK-001/002 other user_id", func(r *Request, _ *Inputs) { r.UserID = 8 }, CodeForbidden},
		{"own user_id", func(r *Request, _ *Inputs) { r.UserID = 7 }, ""},
		{"ATK-007 same account", func(r *Request, _ *Inputs) { r.From, r.To = "SPOT", "SPOT" }, CodeSameAccount},
		{"ATK-008 invalid from", func(r *Request, _ *Inputs) { r.From = "INVALID" }, CodeInvalidAccountType},
		{"invalid to", func(r *Request, _ *Inputs) { r.To = "spot" }, CodeInvalidAccountType},
		{"empty from", func(r *Request, _ *Inputs) { r.From = "" }, CodeInvalidAccountType},
		{"FUTURE unsupported", func(r *Request, _ *Inputs) { r.To = "FUTURE" }, CodeUnsupportedAccountType},
		{"MARGIN unsupported", func(r *Request, _ *Inputs) { r.From = "MARGIN" }, CodeUnsupportedAccountType},
		{"ATK-009 unknown asset", func(_ *Request, in *Inputs) { in.Asset = nil }, CodeInvalidAsset},
		{"suspended", func(_ *Request, in *Inputs) { in.Asset.Status = AssetSuspended }, CodeAssetSuspended},
		{"transfer disabled", func(_ *Request, in *Inputs) { in.Asset.InternalTransferEnabled = false }, CodeTransferNotAllowed},
		{"ATK-003 negative", func(r *Request, _ *Inputs) { r.Amount = "-100" }, CodeInvalidAmount},
		{"ATK-004 zero", func(r *Request, _ *Inputs) { r.Amount = "0" }, CodeInvalidAmount},
		{"zero with decimals", func(r *Request, _ *Inputs) { r.Amount = "0.000" }, CodeInvalidAmount},
		{"not a number", func(r *Request, _ *Inputs) { r.Amount = "1e5" }, CodeInvalidAmount},
		{"empty amount", func(r *Request, _ *Inputs) { r.Amount = "" }, CodeInvalidAmount},
		{"ATK-005 precision", func(r *Request, _ *Inputs) { r.Amount = "0.000000001" }, CodePrecisionOverflow},
		{"trailing zeros fine", func(r *Request, _ *Inputs) { r.Amount = "1.50000000000" }, ""},
		{"ATK-006 u64 max + 1", func(r *Request, _ *Inputs) { r.Amount = "18446744073709551616" }, CodeOverflow},
		{"above safety bound", func(r *Request, _ *Inputs) { r.Amount = "92233720368.54775808" }, CodeOverflow},
		{"too small", func(r *Request, _ *Inputs) { r.Amount = "0.00000999" }, CodeAmountTooSmall},
		{"min exact", func(r *Request, _ *Inputs) { r.Amount = "0.00001" }, ""},
		{"too large", func(r *Request, _ *Inputs) { r.Amount = "1000.00000001" }, CodeAmountTooLarge},
		{"rate per second", func(_ *Request, in *Inputs) { in.Rate.RequestsLastSecond = 10 }, CodeRateLimitExceeded},
		{"daily count", func(_ *Request, in *Inputs) { in.Rate.TransfersToday = 100 }, CodeDailyLimitExceeded},
		{"daily amount", func(_ *Request, in *Inputs) { in.Rate.AmountToday = 9_900_000_000 }, CodeDailyAmountExceeded},
		{"asset daily amount wins", func(_ *Request, in *Inputs) { in.Asset.DailyAmountLimit = 149_999_999 }, CodeDailyAmountExceeded},
		{"asset daily amount, room left", func(_ *Request, in *Inputs) {
			in.Asset.DailyAmountLimit, in.Rate.AmountToday = 200_000_000, 50_000_000
		}, ""},
		{"asset daily amount, only global set", func(_ *Request, in *Inputs) { in.Limits.DailyAmount = 0; in.Asset.DailyAmountLimit = 100 }, CodeDailyAmountExceeded},
		{"ATK-010 duplicate cid", func(r *Request, in *Inputs) { r.CID = "c1"; in.DuplicateOf = "X" }, CodeDuplicateRequest},
		{"cid too long", func(r *Request, _ *Inputs) { r.CID = string(make([]byte, 65)) }, CodeInvalidRequest},
		{"source missing", func(_ *Request, in *Inputs) { in.Source = AccountState{} }, CodeSourceAccountNotFound},
		{"funding target missing", func(r *Request, in *Inputs) { r.From, r.To = "SPOT", "FUNDING"; in.Target = AccountState{} }, CodeTargetAccountNotFound},
		{"spot target created lazily", func(_ *Request, in *Inputs) { in.Target = AccountState{} }, ""},
		{"BAL-004 frozen", func(_ *Request, in *Inputs) { in.Source.Status = Frozen }, CodeAccountFrozen},
		{"BAL-005 disabled", func(_ *Request, in *Inputs) { in.Source.Status = Disabled }, CodeAccountDisabled},
		{"BAL-001 insufficient", func(_ *Request, in *Inputs) { in.Source.Available = 149_999_999 }, CodeInsufficientBalance},
		{"BAL-002 exact", func(_ *Request, in *Inputs) { in.Source.Available = 150_000_000 }, ""},
		{"spot target core halted", func(_ *Request, in *Inputs) { in.Target.Unavailable = CodeCoreHalted }, CodeCoreHalted},
		{"spot target ops full", func(_ *Request, in *Inputs) { in.Target.Unavailable = CodeTooManyOps }, CodeTooManyOps},
		{"spot source users full", func(r *Request, in *Inputs) {
			r.From, r.To = "SPOT", "FUNDING"
			in.Source.Unavailable = CodeTooManyUsers
		}, CodeTooManyUsers},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, in := okRequest(), okInputs()
			tc.m(&req, &in)
			c, e := Validate(req, in)
			var got Code
			if e != nil {
				got = e.Code
			}
			if got != tc.want {
				t.Fatalf("got %q (%v), want %q", got, e, tc.want)
			}
			if tc.want == "" && (c.Amount <= 0 || c.UserID != 7) {
				t.Fatalf("checked = %+v", c)
			}
		})
	}
	c, _ := Validate(okRequest(), okInputs())
	if c.Amount != 150_000_000 || c.From != AccountFunding || c.To != AccountSpot || c.Asset.ID != btc {
		t.Fatalf("checked = %+v", c)
	}
}

// TestValidateOrder: when a request breaks several checks, the earliest of
// 1.5.8 wins: auth, authz, format, account type, asset, amount, rate,
// idempotency, balance.
func TestValidateOrder(t *testing.T) {
	breaks := []struct {
		want Code
		m    func(*Request, *Inputs)
	}{
		{CodeUnauthorized, func(_ *Request, in *Inputs) { in.Caller.Authenticated = false }},
		{CodeForbidden, func(r *Request, _ *Inputs) { r.UserID = 99 }},
		{CodeInvalidAmount, func(r *Request, _ *Inputs) { r.Amount = "abc" }}, // format (step 3)
		{CodeSameAccount, func(r *Request, _ *Inputs) { r.To = r.From }},
		{CodeInvalidAsset, func(_ *Request, in *Inputs) { in.Asset = nil }},
		{CodePrecisionOverflow, func(r *Request, _ *Inputs) { r.Amount = "1.123456789" }},
		{CodeRateLimitExceeded, func(_ *Request, in *Inputs) { in.Rate.RequestsLastSecond = 50 }},
		{CodeDuplicateRequest, func(r *Request, in *Inputs) { r.CID = "c"; in.DuplicateOf = "X" }},
		{CodeInsufficientBalance, func(_ *Request, in *Inputs) { in.Source.Available = 0 }},
	}
	// Apply breaks i..end (last first, so a field two breaks share keeps
	// break i's value): the code of break i must come out.
	for i := range breaks {
		req, in := okRequest(), okInputs()
		for j := len(breaks) - 1; j >= i; j-- {
			breaks[j].m(&req, &in)
		}
		_, e := Validate(req, in)
		if e == nil || e.Code != breaks[i].want {
			t.Errorf("breaks %d..: got %v, want %s", i, e, breaks[i].want)
		}
	}
	// Within account types: SAME_ACCOUNT before INVALID before UNSUPPORTED.
	req, in := okRequest(), okInputs()
	req.From, req.To = "BOGUS", "BOGUS"
	if _, e := Validate(req, in); e == nil || e.Code != CodeSameAccount {
		t.Errorf("BOGUS->BOGUS: %v", e)
	}
	req.From, req.To = "BOGUS", "FUTURE"
	if _, e := Validate(req, in); e == nil || e.Code != CodeInvalidAccountType {
		t.Errorf("BOGUS->FUTURE: %v", e)
	}
	// Within assets: INVALID_ASSET, then ASSET_SUSPENDED, then TRANSFER_NOT_ALLOWED.
	req, in = okRequest(), okInputs()
	in.Asset.Status, in.Asset.InternalTransferEnabled = AssetSuspended, false
	if _, e := Validate(req, in); e == nil || e.Code != CodeAssetSuspended {
		t.Errorf("suspended+disabled: %v", e)
	}
	// Within accounts: not found, then frozen, then disabled, then balance.
	req, in = okRequest(), okInputs()
	in.Source = AccountState{Exists: true, Status: Frozen, Available: 0}
	if _, e := Validate(req, in); e == nil || e.Code != CodeAccountFrozen {
		t.Errorf("frozen+empty: %v", e)
	}
}

func TestAmountParsingAndFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		prec int
		want Units
		ok   bool
	}{
		{"1", 8, 100_000_000, true}, {"0.00000001", 8, 1, true}, {"007.50", 2, 750, true},
		{"92233720368.54775", 8, 0, false}, {"9223372036854775807", 0, 0, false},
		{"9223372036854775", 0, 9223372036854775, true}, {"9223372036854776", 0, 0, false},
	} {
		d, ok := parseDecimal(tc.in)
		if !ok {
			t.Fatalf("%q does not parse", tc.in)
		}
		got, ok := d.units(tc.prec, MaxTransferUnits)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("%q at %d: %d %v, want %d %v", tc.in, tc.prec, got, ok, tc.want, tc.ok)
		}
	}
	for _, bad := range []string{"", "-", ".", "1.", ".5", "+1", "1 ", " 1", "1,5", "0x10", "1.2.3", "NaN"} {
		if _, ok := parseDecimal(bad); ok {
			t.Errorf("%q parses", bad)
		}
	}
	for _, tc := range []struct {
		u    Units
		p    int
		want string
	}{{150_000_000, 8, "1.5"}, {1, 8, "0.00000001"}, {100, 2, "1"}, {0, 6, "0"}, {-5, 1, "-0.5"}, {42, 0, "42"}} {
		if got := FormatUnits(tc.u, tc.p); got != tc.want {
			t.Errorf("FormatUnits(%d, %d) = %q, want %q", tc.u, tc.p, got, tc.want)
		}
	}
}

func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"1", "0.1", "-1", "18446744073709551616", "0.000000001", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseDecimal(s)
		if !ok {
			return
		}
		if u, ok := d.units(18, MaxTransferUnits); ok && (u < 0 || u > MaxTransferUnits) {
			t.Fatalf("%q -> %d", s, u)
		}
	})
}
