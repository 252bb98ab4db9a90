package model

// This file is the spec's security pre-validation (1.5.1-1.5.7) as pure
// functions, in the order of 1.5.8. The gateway (layer 1) and the
// Coordinator (layer 2) both run it; the adapters re-check what they can see.

// Request is a transfer request as the API receives it.
type Request struct {
	UserID UserID // user_id from the body; 0 = absent (the caller's id is used)
	From   string // account type name: FUNDING, SPOT (FUTURE, MARGIN: unsupported)
	To     string
	Asset  string // asset symbol, resolved by the caller into an AssetConfig
	Amount string // decimal string in whole units ("100.5"), at most Precision places
	CID    string // optional client idempotency key, at most 64 bytes
}

// Caller is the authenticated identity (from the JWT).
type Caller struct {
	Authenticated bool
	UserID        UserID
}

// AssetStatus is an asset's listing status.
type AssetStatus string

const (
	AssetActive    AssetStatus = "ACTIVE"
	AssetSuspended AssetStatus = "SUSPENDED"
)

// AssetConfig is what validation knows about an asset.
type AssetConfig struct {
	ID                      AssetID
	Symbol                  string
	Precision               int   // decimal places of one unit; 0..MaxPrecision
	MinTransfer             Units // smallest amount, asset units (0 = no minimum beyond > 0)
	MaxTransfer             Units // largest amount, asset units (0 = MaxTransferUnits)
	Status                  AssetStatus
	InternalTransferEnabled bool
	// DailyAmountLimit is this asset's amount per user per UTC day (1.5.6),
	// asset units; 0 = RateLimits.DailyAmount applies.
	DailyAmountLimit Units
}

// RateLimits are the per-user limits of 1.5.6 (P2); zero disables a limit.
type RateLimits struct {
	PerSecond   int   // requests per second (spec: 10)
	PerDay      int   // transfers per day (spec: 100)
	DailyAmount Units // asset units per user per day
}

// RateState is the user's usage before this request.
type RateState struct {
	RequestsLastSecond int
	TransfersToday     int
	AmountToday        Units // asset units of this asset
}

// MaxCIDLen is the longest cid accepted (transfers_tb.cid is varchar(64)).
const MaxCIDLen = 64

// Checked is a request that passed steps 1-7: typed, in units.
type Checked struct {
	UserID UserID
	From   AccountType
	To     AccountType
	Asset  AssetConfig
	Amount Units
	CID    string
}

// CheckRequest runs steps 1-7 of 1.5.8: authentication, authorization,
// request format, account types, asset, amount, rate limits. asset is nil
// when the symbol is unknown.
func CheckRequest(req Request, caller Caller, asset *AssetConfig, rate RateState, lim RateLimits) (Checked, *Error) {
	// 1. Authentication.
	if !caller.Authenticated || caller.UserID == 0 {
		return Checked{}, Reject(CodeUnauthorized, "no valid identity")
	}
	// 2. Authorization: the body may not name another user (both accounts are
	// then the caller's by construction: account ownership).
	if req.UserID != 0 && req.UserID != caller.UserID {
		return Checked{}, Reject(CodeForbidden, "user_id does not match the token")
	}
	// 3. Request format.
	if req.From == "" || req.To == "" {
		return Checked{}, Reject(CodeInvalidAccountType, "from and to are required")
	}
	dec, ok := parseDecimal(req.Amount)
	if !ok {
		return Checked{}, Reject(CodeInvalidAmount, "amount is not a decimal number")
	}
	if len(req.CID) > MaxCIDLen {
		return Checked{}, Reject(CodeInvalidRequest, "cid longer than 64 bytes")
	}
	// 4. Account types (1.5.2, in table order).
	from, to := AccountType(req.From), AccountType(req.To)
	if from == to {
		return Checked{}, Reject(CodeSameAccount, "from and to are the same account")
	}
	if !from.known() || !to.known() {
		return Checked{}, Reject(CodeInvalidAccountType, "account type must be FUNDING or SPOT")
	}
	if !from.supported() || !to.supported() {
		return Checked{}, Reject(CodeUnsupportedAccountType, "only FUNDING and SPOT are supported")
	}
	// 5. Asset (1.5.4).
	if asset == nil || asset.ID == 0 {
		return Checked{}, Reject(CodeInvalidAsset, "unknown asset")
	}
	if asset.Status != AssetActive {
		return Checked{}, Reject(CodeAssetSuspended, "asset is not active")
	}
	if !asset.InternalTransferEnabled {
		return Checked{}, Reject(CodeTransferNotAllowed, "asset forbids internal transfers")
	}
	// 6. Amount (1.5.3). OVERFLOW precedes the range checks: the value must
	// be representable before it can be compared (ATK-006: u64::MAX+1 is
	// OVERFLOW, not AMOUNT_TOO_LARGE).
	amount, e := checkAmount(dec, asset)
	if e != nil {
		return Checked{}, e
	}
	// 7. Rate limits (1.5.6). An asset's own daily amount wins: one limit
	// in units cannot fit assets of different values.
	if asset.DailyAmountLimit > 0 {
		lim.DailyAmount = asset.DailyAmountLimit
	}
	if e := CheckRate(amount, rate, lim); e != nil {
		return Checked{}, e
	}
	return Checked{UserID: caller.UserID, From: from, To: to, Asset: *asset, Amount: amount, CID: req.CID}, nil
}

func checkAmount(dec decimalAmount, asset *AssetConfig) (Units, *Error) {
	if dec.neg || dec.zero() {
		return 0, Reject(CodeInvalidAmount, "amount must be > 0")
	}
	if asset.Precision < 0 || asset.Precision > MaxPrecision || len(dec.fracPart) > asset.Precision {
		return 0, Reject(CodePrecisionOverflow, "more decimal places than the asset has")
	}
	amount, ok := dec.units(asset.Precision, MaxTransferUnits)
	if !ok {
		return 0, Reject(CodeOverflow, "amount out of range")
	}
	if amount < asset.MinTransfer {
		return 0, Reject(CodeAmountTooSmall, "below the minimum transfer amount")
	}
	if asset.MaxTransfer > 0 && amount > asset.MaxTransfer {
		return 0, Reject(CodeAmountTooLarge, "above the maximum transfer amount")
	}
	return amount, nil
}

// CheckRate checks the user's usage rate against the limits of 1.5.6, lim,
// for a request of amount.
func CheckRate(amount Units, rate RateState, lim RateLimits) *Error {
	if lim.PerSecond > 0 && rate.RequestsLastSecond+1 > lim.PerSecond {
		return Reject(CodeRateLimitExceeded, "too many requests")
	}
	if lim.PerDay > 0 && rate.TransfersToday+1 > lim.PerDay {
		return Reject(CodeDailyLimitExceeded, "too many transfers today")
	}
	if lim.DailyAmount > 0 && (amount > lim.DailyAmount || rate.AmountToday > lim.DailyAmount-amount) {
		return Reject(CodeDailyAmountExceeded, "daily amount exceeded")
	}
	return nil
}

// CheckAccounts is step 9 (1.5.5), run last to avoid needless reads. A SPOT
// target is created lazily; a FUNDING target must exist.
func CheckAccounts(c Checked, source, target AccountState) *Error {
	if source.Unavailable != "" {
		return Reject(source.Unavailable, string(c.From)+" cannot take transfers now")
	}
	if target.Unavailable != "" {
		return Reject(target.Unavailable, string(c.To)+" cannot take transfers now")
	}
	if !source.Exists {
		return Reject(CodeSourceAccountNotFound, "source account does not exist")
	}
	if c.To == AccountFunding && !target.Exists {
		return Reject(CodeTargetAccountNotFound, "FUNDING account does not exist")
	}
	switch source.Status {
	case Frozen:
		return Reject(CodeAccountFrozen, "source account is frozen")
	case Disabled:
		return Reject(CodeAccountDisabled, "source account is disabled")
	}
	if source.Available < c.Amount {
		return Reject(CodeInsufficientBalance, "source balance below amount")
	}
	return nil
}

// Inputs is everything Validate reads besides the request.
type Inputs struct {
	Caller      Caller
	Asset       *AssetConfig // nil: unknown asset
	Rate        RateState
	Limits      RateLimits
	DuplicateOf string // req_id of the transfer already holding this cid; "" if none
	Source      AccountState
	Target      AccountState
}

// Validate runs all nine steps of 1.5.8 in order. A duplicate cid (step 8)
// is DUPLICATE_REQUEST; the caller answers it with the original transfer.
func Validate(req Request, in Inputs) (Checked, *Error) {
	c, e := CheckRequest(req, in.Caller, in.Asset, in.Rate, in.Limits)
	if e != nil {
		return Checked{}, e
	}
	if in.DuplicateOf != "" {
		return c, Reject(CodeDuplicateRequest, "cid already used by "+in.DuplicateOf)
	}
	if e := CheckAccounts(c, in.Source, in.Target); e != nil {
		return Checked{}, e
	}
	return c, nil
}
