// Package withdraw sends money from a user's FUNDING account (Postgres) to
// an address on an EVM chain, exactly once, through the managed
// transactions of persist/chaintx.
//
//	POST  --one Postgres tx: debit balances_tb, managed_tx CREATED, withdrawal PENDING-->
//	writer (lease holder): nonce, sign, store raw + hash, broadcast; tracker: receipt, finality
//	settler, following tx_completions in one tx with its checkpoint:
//	    CONFIRMED    -> COMPLETED
//	    FAILED_FINAL -> CANCELLED + refund to FUNDING (CAS from PENDING: once)
//	    STUCK        -> stays PENDING (it may still be mined; an operator decides,
//	                    e.g. POST /admin/v1/tx/{id}/remediate CANCEL, whose
//	                    confirmation then cancels and refunds)
//
// Guards, in POST's transaction, each refusing with nothing debited
// (issue 33): the user's address allowlist and daily limits (limits.go,
// migration 0085; a refund gives the quota back), and the hot wallet's
// last balance reading against what it has not paid yet (hotwallet.go).
//
// Amounts: the exchange's units (core.Units at the asset's scale) at the
// edge and in balances_tb; the chain's smallest unit (wei for ETH) in
// managed_tx. Conversion is exact or refused (AMOUNT_NOT_REPRESENTABLE).
// The conservation check counts PENDING + COMPLETED as "withdrawn"
// (persist/transfer/invariant_withdrawals.go).
package withdraw
