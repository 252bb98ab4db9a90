package chaintx

import (
	"context"
	"errors"
	"math/big"
	"time"
)

// The ports (spec §2.1): implemented by the adapters (pgstore, evm), used by
// the Manager. Every Store method taking a Lease is a critical write: it
// returns ErrFenced, having written nothing, unless the lease is still this
// node's, unexpired and at that token in the database.

var (
	ErrFenced    = errors.New("chaintx: fenced: the lease is no longer ours")
	ErrNotFound  = errors.New("chaintx: not found")
	ErrNotLeader = errors.New("chaintx: this node does not hold the submitter's lease")
	ErrBusy      = errors.New("chaintx: writer queue full")
	ErrStopped   = errors.New("chaintx: manager stopped")
	ErrTxFinal   = errors.New("chaintx: the transaction is final")
	ErrTxMined   = errors.New("chaintx: the transaction is already mined")
	ErrNoNonce   = errors.New("chaintx: the transaction has no nonce yet")
	ErrBadAction = errors.New("chaintx: unknown action")
	ErrNotStuck  = errors.New("chaintx: the transaction is not STUCK")
	// ErrNonceTaken: the tx's nonce is used on chain already (by another
	// tx): a CANCEL or REPLACE in it can never be mined.
	ErrNonceTaken = errors.New("chaintx: the nonce is already taken on chain")
	// ErrNonceNotFinal: RESOLVE_FOREIGN's proof failed: the nonce is not
	// used on chain at a block --chain-finality deep (yet).
	ErrNonceNotFinal = errors.New("chaintx: the nonce is not final on chain")
	ErrNoSubmitter   = errors.New("chaintx: this node has no key for the submitter")
	// ErrOutcomeUnknown: Create handed the request to its writer and the
	// answer did not come in time (the caller's context ended, or the
	// manager stopped meanwhile). The writer keeps the request: the tx may
	// still be allocated and sent, under its request_id.
	ErrOutcomeUnknown = errors.New("chaintx: outcome unknown: the writer still holds the request")
)

// AllocatedGrace is how long after allocation an ALLOCATED tx is due for
// (re)submission if the writer's own broadcast never got recorded (a crash
// between commit and broadcast).
const AllocatedGrace = 5 * time.Second

// NewTx is a creation request.
type NewTx struct {
	Submitter Address
	RequestID string // "" = not idempotent
	// AssignedID: RequestID was made for this one call by the server (the
	// caller gave none; unique): no tx can have it yet, so Create skips its
	// entry check (the writer's in-batch check still runs).
	AssignedID bool
	Payload    Payload
}

// RequestRef names a request: (submitter, request_id).
type RequestRef struct {
	Submitter Address
	RequestID string
}

// AllocGroup is one submitter's part of a writer batch.
type AllocGroup struct {
	Lease      Lease
	Reqs       []NewTx
	MaxCreated int    // CREATED rows of the submitter to allocate too, at most
	Assign     Assign // the nonce policy (below)
	// Guess (optional) is the writer's expectation, signed ahead: the
	// store may then allocate the group in one round trip, and falls back
	// to the regular path (Assign) when an expectation does not hold.
	Guess *AllocGuess
}

// AllocGuess is a writer's expectation for one group, from its nonce
// cache: the database cursor is at most Next, the submitter has no CREATED
// rows to allocate, and no request_id of the group exists yet (nor repeats
// within it). Txs are the group's requests in order, signed with the nonces
// Next, Next+1, ... (Nonce, Hash and Signed[0] set). The nonce policy is
// the same as Assign's: with the cursor at most Next, max(chain, cache, db)
// is Next. A store that uses a guess writes it in a transaction that first
// checks every expectation (and the fence); if one fails, nothing of the
// guess is written and the group takes the regular path.
type AllocGuess struct {
	Next uint64
	Txs  []Tx
}

// AllocResult is what one group of a writer batch did.
type AllocResult struct {
	Err       error  // ErrFenced: this group wrote nothing (the others of the batch did)
	Answers   []Tx   // one per request, in order: the new tx, or the one its request_id already names
	Existing  []bool // per request: the request_id existed (no nonce used)
	Allocated []Tx   // every tx allocated (new requests and former CREATED rows), nonce order
	Next      uint64 // the cursor after the batch
}

// SubmitGroup are one submitter's broadcasts to record.
type SubmitGroup struct {
	Lease   Lease
	Results []SubmitResult
}

// Assign is the writer's nonce policy, called by Store.Allocate inside its
// transaction once it knows the database cursor: it sets each tx's Nonce
// (contiguous from max(chain, cache, db)) and signs it (Signed[0]), and
// returns the new cursor.
type Assign func(dbNext uint64, txs []*Tx) (next uint64, err error)

// SubmitResult is the outcome of one broadcast.
type SubmitResult struct {
	ID  TxID
	Err string // "" = the node accepted it (or already had it)
}

// ReceiptUpdate is the outcome of one receipt check.
type ReceiptUpdate struct {
	ID      TxID
	Receipt *Receipt      // nil: not found yet, or an error
	Err     string        // "" unless the check failed (not "not found")
	Retry   time.Duration // next check after this long
}

// PendingStats are the pile-up signals of one submitter (spec §5.2).
type PendingStats struct {
	Pending     int           // ALLOCATED + TRACKING + STUCK
	OldestAge   time.Duration // age of the oldest pending tx since allocation (database time)
	Stuck       int
	CreatedWait int // CREATED rows waiting for a nonce
}

// Store is the Postgres side: LeaseRepository, TxRepository,
// NonceCursorRepository and TxCompletionRepository of §2.1 in one port.
type Store interface {
	// AcquireLease acquires, renews or takes over (expired: token + 1) the
	// submitter's lease for node, with database time. Leader is false when
	// another node holds an unexpired lease.
	AcquireLease(ctx context.Context, submitter Address, node string, d time.Duration) (Lease, error)
	// ReleaseLease ends l now (expires_at = database time) if it is still
	// l's (owner and token): the next AcquireLease of any node takes over
	// at once, with token + 1. Not l's any more: nothing happens.
	ReleaseLease(ctx context.Context, l Lease) error

	Get(ctx context.Context, id TxID) (Tx, error)
	GetByRequest(ctx context.Context, submitter Address, requestID string) (Tx, error)
	// GetByRequests returns the txs that the refs name (those that exist,
	// in any order), in one query.
	GetByRequests(ctx context.Context, refs []RequestRef) ([]Tx, error)
	// Completions returns the feed after seq, at most limit entries.
	Completions(ctx context.Context, after int64, limit int) ([]Completion, error)
	Remediations(ctx context.Context, id TxID) ([]Remediation, error)
	Stats(ctx context.Context, submitter Address) (PendingStats, error)

	// Allocate runs one writer batch, every group in ONE transaction (one
	// commit for many submitters): per group, requests whose request_id
	// exists already answer that tx and use no nonce; the rest and up to
	// MaxCreated CREATED rows of the submitter get nonces from Assign; rows,
	// signed raws and the cursor are written. Fenced per group: a fenced
	// group's result has Err = ErrFenced and wrote nothing.
	Allocate(ctx context.Context, gs []AllocGroup) ([]AllocResult, error)
	// Submitted records broadcasts (attempt + 1): ALLOCATED -> TRACKING on
	// success, last_error otherwise; a success also schedules a receipt
	// check of a tx that had none (ALLOCATED, or STUCK since ALLOCATED:
	// the first broadcast that worked came after STUCK); the next resubmission is due after
	// resubmitAfter, or the tx's STUCK back-off if longer. One transaction, fenced per group: the returned slice
	// has ErrFenced for each group that wrote nothing.
	Submitted(ctx context.Context, gs []SubmitGroup, resubmitAfter time.Duration) ([]error, error)
	// ClaimResubmit claims the submitter's pending txs without a receipt
	// whose next_resubmit_at is due (at most limit, nonce order), before
	// anything is sent: next_resubmit_at = now + delay(tx), and for a STUCK
	// tx resubmit_backoff = delay(tx) (else none). The txs returned are as
	// before the claim (ResubmitBackoff the previous delay). Fenced.
	ClaimResubmit(ctx context.Context, l Lease, limit int, delay func(Tx) time.Duration) ([]Tx, error)
	// ReceiptCandidates are TRACKING / STUCK txs without a receipt, due for
	// a check (one never scheduled is due: it may still be mined).
	ReceiptCandidates(ctx context.Context, submitter Address, limit int) ([]Tx, error)
	// RecordReceipts stores found receipts and schedules the next checks. Fenced.
	RecordReceipts(ctx context.Context, l Lease, us []ReceiptUpdate) error
	// FinalityCandidates are TRACKING / STUCK txs with a receipt.
	FinalityCandidates(ctx context.Context, submitter Address, limit int) ([]Tx, error)
	// Finalize moves a tx with a receipt to CONFIRMED or FAILED_FINAL and
	// appends the completion, once. Fenced.
	Finalize(ctx context.Context, l Lease, id TxID, st State, sub string) error
	// Reorged clears a receipt whose block left the canonical chain: back to
	// TRACKING, checked and resubmitted at once. Fenced.
	Reorged(ctx context.Context, l Lease, id TxID, blockHash Hash) error
	// MarkStuck moves the submitter's ALLOCATED / TRACKING txs without a
	// receipt allocated longer than after ago to STUCK, appending a
	// completion each, and returns them; each stays due for receipt checks
	// (one never broadcast may still be mined: a send error can hide a
	// delivery). Fenced.
	MarkStuck(ctx context.Context, l Lease, after time.Duration, limit int) ([]Tx, error)
	// AddSigned stores one more signed transaction for a tx's nonce and the
	// remediation that made it, before it is broadcast. Fenced.
	AddSigned(ctx context.Context, l Lease, id TxID, s Signed, r Remediation) error
	// Audit stores a remediation that signed nothing (NOOP, or PLACEHOLDER
	// with no gap). Fenced.
	Audit(ctx context.Context, l Lease, r Remediation) error
	// InsertPlaceholder stores an ALLOCATED placeholder tx at a nonce below
	// the cursor that no managed tx holds (request_id "placeholder:<nonce>";
	// a repeat answers the existing one). Fenced.
	InsertPlaceholder(ctx context.Context, l Lease, t Tx, r Remediation) (Tx, error)
	// ResolveForeign moves a STUCK tx without a receipt to FAILED_FINAL
	// (sub_state FOREIGN_NONCE), appends the completion and stores r, in
	// one transaction; ErrNotStuck (nothing written) if it is not STUCK
	// without a receipt any more. Fenced.
	ResolveForeign(ctx context.Context, l Lease, id TxID, r Remediation) error
	// NoncesHeld returns which nonces in [from, to) managed txs of the submitter hold.
	NoncesHeld(ctx context.Context, submitter Address, from, to uint64) (map[uint64]bool, error)
}

// Fees are EIP-1559 fee parameters, wei per gas.
type Fees struct {
	MaxFee *big.Int
	MaxTip *big.Int
}

// ChainReceipt is what the node says about a mined transaction.
type ChainReceipt struct {
	BlockNumber uint64
	BlockHash   Hash
	Success     bool
}

// Errors a Chain classifies.
var (
	ErrReceiptNotFound = errors.New("chaintx: receipt not found") // not mined yet: not an error
	ErrAlreadyKnown    = errors.New("chaintx: transaction already known")
	ErrNonceTooLow     = errors.New("chaintx: nonce too low") // the nonce is used (maybe by this very tx)
)

// Chain is the ChainConnector of §2.1.
type Chain interface {
	ChainID(ctx context.Context) (*big.Int, error)
	// PendingNonce is eth_getTransactionCount(a, "pending").
	PendingNonce(ctx context.Context, a Address) (uint64, error)
	// MinedNonce is eth_getTransactionCount(a, "latest").
	MinedNonce(ctx context.Context, a Address) (uint64, error)
	// MinedNonceAt is eth_getTransactionCount(a, block): the txs of a
	// mined up to and including block (the node needs its state).
	MinedNonceAt(ctx context.Context, a Address, block uint64) (uint64, error)
	// Send broadcasts a signed raw transaction; ErrAlreadyKnown /
	// ErrNonceTooLow when the node has it or its nonce is used.
	Send(ctx context.Context, raw []byte) error
	// Receipt returns the receipt of hash, ErrReceiptNotFound if not mined.
	Receipt(ctx context.Context, h Hash) (ChainReceipt, error)
	// Head is the latest block number.
	Head(ctx context.Context) (uint64, error)
	// BlockHash is the canonical block hash at height n.
	BlockHash(ctx context.Context, n uint64) (Hash, error)
	// Fees suggests EIP-1559 fees for a new transaction.
	Fees(ctx context.Context) (Fees, error)
}

// Unsigned is a transaction to sign.
type Unsigned struct {
	Nonce   uint64
	Payload Payload
	Fees    Fees
}

// Signer is the SignService: it signs for one address. The key never
// leaves it and is never logged.
type Signer interface {
	Address() Address
	Sign(u Unsigned) (Hash, []byte, error)
}
