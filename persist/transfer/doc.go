// Package transfer moves funds between a user's FUNDING account (Postgres,
// balances_tb) and SPOT account (the in-RAM core) through the strict FSM of
// the internal-transfer spec: the two sides share no transaction, so a
// persisted two-phase protocol with idempotent adapters stands in for 2PC.
//
//	INIT(0) --CAS--> SOURCE_PENDING(10) --withdraw OK--> SOURCE_DONE(20) --CAS--> TARGET_PENDING(30)
//	                      |                                                     |        |
//	                      +--withdraw EXPLICIT_FAIL--> FAILED(-10)   deposit OK-+        +-deposit EXPLICIT_FAIL
//	                                                                            v        v
//	                                                              COMMITTED(40)   COMPENSATING(-20) --refund OK--> ROLLED_BACK(-30)
//
// Rules, each enforced in one place:
//   - fsm.go holds the only transition table and the step program; Store.Transition refuses
//     anything else and applies the rest as a compare-and-set
//     (UPDATE ... WHERE req_id = $1 AND state = $expected).
//   - persist-before-call: the state naming a call is durable before the call.
//   - reversibility (2.3): only EXPLICIT_FAIL moves backwards; TIMEOUT,
//     PENDING, NETWORK_ERROR and UNKNOWN stay in place, are logged at
//     LevelCritical, counted, and retried forever.
//   - adapters are idempotent by (req_id, op) and keep their first outcome,
//     failures included (funding: transfer_operations, same transaction as
//     the balance change).
//   - failed is never mixed up with unknown in an answer either: once a
//     transfer's row exists Create answers that transfer, never an error;
//     an insert of unknown outcome is settled first (settle.go: found, or
//     fenced off as FAILED/SYSTEM_ERROR, or Result.Unconfirmed).
//   - validation (validate.go) runs the spec's checks in the order of 1.5.8
//     with its error codes, in the gateway, the Coordinator and (what they
//     can see) the adapters.
//
// Throughput (opt in): NewStoreBatched and NewFundingBatched route the
// Store's Get, Insert, Transition and NoteRetry and the FUNDING operations
// through a Batcher (batch.go), which runs the steps of many concurrent
// transfers as one transaction, with the answers each would have had
// alone. Config.Fuse goes further (fused.go, batch_fused.go): each FUNDING
// operation and the CAS transitions around it commit as ONE batch
// transaction, written as one CAS UPDATE from the state the step found to
// the state its chain ends in (the states in between exist only inside that
// transaction, where no one else can see them), and Create inserts the
// transfer in the transaction of its first move; with any FUNDING side but the
// batched *Funding on the Store's pool (e.g. wrapped in Faulty) the unfused
// path runs.
//
// Amounts are core.Units: int64 in the asset's smallest unit. The schema is
// persist/migrations/0002_transfers.sql.
package transfer
