package chaintx

import (
	"math/big"
	"time"
)

// TxID is managed_tx.tx_id.
type TxID int64

// Address is an account on chain as 0x + 40 lower-case hex digits (the
// adapters normalise; the checksummed form is shown only at the edges).
type Address string

// Hash is a transaction or block hash as 0x + 64 lower-case hex digits.
type Hash string

// SignedKind says why a signed transaction exists for a nonce.
type SignedKind string

const (
	KindOriginal    SignedKind = "ORIGINAL"    // the payload the caller asked for
	KindReplace     SignedKind = "REPLACE"     // the same payload, higher fees (hook REPLACE)
	KindCancel      SignedKind = "CANCEL"      // a zero-value transfer to self in the same nonce (hook CANCEL)
	KindPlaceholder SignedKind = "PLACEHOLDER" // a zero-value transfer to self filling a nonce gap
)

// Consumes reports whether a mined transaction of this kind means the
// caller's payload did NOT happen (its nonce was used by something else).
func (k SignedKind) Consumes() bool { return k == KindCancel || k == KindPlaceholder }

// Payload is what a managed tx asks the chain to do. It never changes after
// creation: resubmission sends the same signed bytes (spec §2.3.3).
type Payload struct {
	To       Address
	Value    *big.Int // wei, >= 0
	Data     []byte   // call data; empty for a plain transfer
	GasLimit uint64   // gas units
}

// Signed is one signed transaction for a tx's nonce. Stored (hash and raw)
// before it is ever broadcast.
type Signed struct {
	Hash      Hash
	Raw       []byte // RLP-encoded signed transaction, as sent by eth_sendRawTransaction
	Kind      SignedKind
	MaxFee    *big.Int // wei per gas
	MaxTip    *big.Int // wei per gas
	CreatedAt time.Time
}

// Receipt is the minimal evidence of inclusion (spec §3.6).
type Receipt struct {
	TxHash      Hash // which of the tx's signed transactions was mined
	Kind        SignedKind
	BlockNumber uint64
	BlockHash   Hash
	Success     bool // receipt status 1
}

// Tx is the managed transaction (spec §4.2), the aggregate root. Only the
// writer of the submitter's lease holder sets Nonce; it never changes after.
type Tx struct {
	ID        TxID
	Submitter Address
	RequestID string // "" = none (no request-level idempotency)
	Payload   Payload
	Nonce     *uint64 // nil until ALLOCATED
	Hash      Hash    // the ORIGINAL signed tx's hash; "" until ALLOCATED
	State     State
	SubState  string // REVERTED / CANCELLED for FAILED_FINAL, REORGED after a reorg, else ""
	Signed    []Signed

	SubmitAttempts int
	LastError      string
	LastSubmitAt   *time.Time
	NextResubmitAt *time.Time
	// ResubmitBackoff is a STUCK tx's delay between resends (backoff.go;
	// 0: not backing off).
	ResubmitBackoff time.Duration
	Receipt         *Receipt // nil until a receipt is seen (and again after a reorg removed it)
	AllocatedAt     *time.Time
	ConfirmedAt     *time.Time // when the final state was reached
	FencingToken    int64      // token of the last write
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// Latest is the most recent signed transaction (highest fees); nil before ALLOCATED.
func (t *Tx) Latest() *Signed {
	if len(t.Signed) == 0 {
		return nil
	}
	return &t.Signed[len(t.Signed)-1]
}

// Completion is one entry of the completions feed (spec §4.4): every final
// state reached, with a dense seq (1, 2, 3, ... without gaps, committed in
// seq order).
type Completion struct {
	Seq       int64
	TxID      TxID
	Submitter Address
	RequestID string
	State     State // CONFIRMED, FAILED_FINAL or STUCK
	SubState  string
	At        time.Time
}

// Remediation is one row of the hook's audit (tx_remediations).
type Remediation struct {
	Submitter    Address
	TxID         TxID
	Nonce        uint64
	Action       Action
	NodeID       string
	FencingToken int64
	Reason       string
	Hashes       []Hash // signed transactions it sent
	At           time.Time
}
