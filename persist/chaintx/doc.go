// Package chaintx is the managed on-chain transaction service of spec 002:
// Postgres lease + fencing token as the single correctness boundary,
// managed_tx as the one authority for nonce and state, nonce =
// max(chain pending, local cache, database) and never reused or moved back,
// writer workers (hash(submitter) % N) that allocate contiguous nonces for a
// batch in one transaction, submit != final, receipt checking with back-off,
// finality with reorg handling, resubmission of the same signed payload, STUCK
// with a pluggable resolution hook, and a completions feed read by polling.
//
// Layers (spec §2.1), dependencies pointing inwards only:
//
//	domain     tx.go, state.go, lease.go          ManagedTx, states, Lease
//	ports      ports.go                           Store, Chain, Signer, Hook
//	use cases  manager.go, writer.go, tracker.go, the Manager and its loops
//	           remediate.go, hook.go, foreign.go,
//	           backoff.go, rpc.go (every Chain call's deadline)
//	adapters   pgstore/ (Postgres, pgx)            implements Store
//	           evm/     (EVM JSON-RPC, go-ethereum) implements Chain, Signer
//
// This package imports neither pgx nor go-ethereum.
//
// States (spec §4.2; answers never show confirmation counts):
//
//	CREATED --writer: nonce, signed raw + hash stored--> ALLOCATED --broadcast--> TRACKING
//	TRACKING --receipt, `finality` blocks deep--> CONFIRMED (status 1) | FAILED_FINAL (status 0, or the
//	          nonce consumed by our CANCEL / PLACEHOLDER: sub_state CANCELLED)
//	TRACKING --receipt's block reorged out--> TRACKING (receipt cleared, checked and resubmitted again)
//	ALLOCATED | TRACKING --no receipt for StuckAfter--> STUCK (CRITICAL log, metric, completion, hook);
//	          a STUCK tx is still tracked (resent with a back-off): a later CONFIRMED / FAILED_FINAL is
//	          appended to the feed again
//	STUCK --operator RESOLVE_FOREIGN, the nonce final on chain with a tx none of ours--> FAILED_FINAL
//	          (sub_state FOREIGN_NONCE)
//
// Fencing: every critical write (nonce and cursor, signed raws, state, schedule
// times, receipt and finality, remediation audit) runs in a transaction that
// first locks the submitter's lease row FOR SHARE where owner = this node,
// token = the token this node holds and expires_at > clock_timestamp(). No row:
// ErrFenced, nothing written, counted in ubs_chain_lease_fenced_total, and the
// node drops the lease (stops acting for that submitter until it acquires it
// again with a new token). A take-over (SELECT ... FOR UPDATE, token + 1)
// waits for every fenced transaction in progress, so a write that passed the
// check commits before the new leader's first one.
package chaintx
