package model

import "github.com/ubscore/ubscore/persist/transfer/ulid"

// CheckParams is the adapter's own defense in depth (spec 9.3): it trusts
// no caller. A bad parameter is refused without a record: the same input is
// refused the same way every time.
func CheckParams(reqID string, user UserID, asset AssetID, amount Units) *Outcome {
	var o Outcome
	switch {
	case !ulid.Valid(reqID):
		o = UnknownOutcome("invalid req_id") // a caller bug, never a reason to compensate
	case user == 0:
		o = Fail(CodeForbidden)
	case asset == 0:
		o = Fail(CodeInvalidAsset)
	case amount <= 0 || amount > MaxTransferUnits:
		o = Fail(CodeInvalidAmount)
	default:
		return nil
	}
	return &o
}
