package model

// AccountType is the kind of account a transfer moves between.
type AccountType string

const (
	AccountFunding AccountType = "FUNDING" // Postgres balances_tb
	AccountSpot    AccountType = "SPOT"    // the in-RAM core (WAL-backed)
	AccountFuture  AccountType = "FUTURE"  // valid name, not launched: UNSUPPORTED_ACCOUNT_TYPE
	AccountMargin  AccountType = "MARGIN"  // valid name, not launched: UNSUPPORTED_ACCOUNT_TYPE
)

// known reports whether t is a valid account type name (spec 8.1 enum).
func (t AccountType) known() bool {
	return t == AccountFunding || t == AccountSpot || t == AccountFuture || t == AccountMargin
}

// supported reports whether transfers to or from t are launched.
func (t AccountType) supported() bool { return t == AccountFunding || t == AccountSpot }

// Reversible reports whether a debit of t can be refunded, so an explicit
// target failure may compensate (spec 2.2 "SOURCE REVERSIBLE?"). Both launched
// sides can refund; anything else stays in TARGET_PENDING and retries.
func (t AccountType) Reversible() bool { return t == AccountFunding || t == AccountSpot }

// AccountStatus is the status of a FUNDING balance row or a SPOT account.
type AccountStatus string

const (
	Active   AccountStatus = "ACTIVE"
	Frozen   AccountStatus = "FROZEN"   // may receive, may not send
	Disabled AccountStatus = "DISABLED" // may neither send nor receive
)

// AccountState is what validation needs to know about one side of a
// transfer for one asset.
type AccountState struct {
	Exists    bool          // the account exists (FUNDING: the user has any balance row)
	Status    AccountStatus // ACTIVE when the account does not exist yet
	Available Units         // available balance of the asset, asset units
	// Unavailable, if set, is why the side cannot take part in a transfer
	// now whatever the account's status (SPOT: CORE_HALTED, TOO_MANY_OPS,
	// TOO_MANY_USERS): Create refuses with it before anything moves.
	Unavailable Code
}
