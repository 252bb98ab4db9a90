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
// # One request's way through the package
//
// There is one path; every transfer, every step, every test takes it.
//
//  1. Coordinator.Create (coordinator.go) validates the request in the
//     order of spec 1.5.8 (package model: CheckRequest, then both sides'
//     AccountState, CheckAccounts), draws a req_id (package ulid) and inserts
//     the transfer in the same transaction as its first move
//     (insertFused, fused.go): FUNDING->SPOT inserts it, withdraws from
//     FUNDING and moves it to TARGET_PENDING, or FAILED on a refusal;
//     SPOT->FUNDING inserts it in SOURCE_PENDING, durable before the SPOT
//     withdraw. An insert of unknown outcome is settled (settle.go).
//  2. Create then drives it (drive, advanceFrom) until it is terminal or
//     Config.MaxWait passes; the Worker (worker.go) finishes what a driver
//     left, at start and then every StaleAfter.
//  3. Each move is step (steps.go): the FSM's program says, for the state
//     the transfer is in, which side to call and where each outcome leads
//     (fsm.go: StepAt, pure, tested every state x every outcome), and run
//     executes it. A FUNDING call is a fused step: the transitions before
//     it, the operation and its outcome's transitions are ONE transaction
//     (fusePlan, batch_fused.go), written as one CAS from the state the
//     step found to the state its chain ends in. A SPOT call is made once
//     its announcing state is durable (a CAS, or the previous fused
//     COMMIT); its outcome is written with the next FUNDING call's
//     transaction, or by CAS when none follows.
//  4. Every Postgres request — Get, CAS, retry note, fused step — goes
//     through the Batcher (batch.go): a writer runs whatever is queued as
//     one transaction of one or two round trips (batch_tx.go: the Store's
//     statements, batch_store.go; the FUNDING rows locked and read, the
//     operations decided in memory by decideOp in arrival order,
//     batch_funding.go; records, balance changes, transitions and COMMIT,
//     batch_funding_write.go). A single request is a batch of one; every
//     caller gets the answer it would have had alone.
//
// So some states are never durable: SOURCE_DONE never; INIT, SOURCE_PENDING
// (a FUNDING source) and TARGET_PENDING, COMPENSATING (a FUNDING target or
// refund) only when a SPOT call or an unknown outcome stops the chain there.
// A crash before a fused COMMIT leaves the state the step found; after it,
// the state the chain ended in, and the repeat of its operation returns the
// recorded first outcome.
//
// # Rules, each enforced in one place
//
//   - fsm.go holds the only transition table and step program; a CAS or
//     fused plan outside it is refused (Store.Transition, fusePlan.legal).
//   - persist-before-call: the state naming a SPOT call is durable before
//     the call; a FUNDING call commits with the states around it.
//   - reversibility (2.3): only EXPLICIT_FAIL moves backwards; TIMEOUT,
//     PENDING, NETWORK_ERROR and UNKNOWN stay in place, are logged at
//     LevelCritical, counted, and retried forever.
//   - adapters are idempotent by (req_id, op) and keep their first outcome,
//     failures included (FUNDING: transfer_operations, in the transaction
//     of the balance change).
//   - failed is never mixed up with unknown: once a transfer's row exists
//     Create answers that transfer, never an error.
//
// Fault injection wraps the sides below this path (package transferfault):
// the SPOT adapter in a Faulty, the FUNDING side inside the batch
// transactions (Batcher.SetFaults: a FaultSource drawn once per request, an
// explicit failure, an error before the effect, a crash before COMMIT, a
// COMMIT whose answer is lost, a crash after COMMIT). The coordinator's
// FUNDING side is the ledger of its Store's Batcher, so no other path can be
// wired. The request model and the adapters' contract are package model;
// the server's wiring is package service; the conservation check (spec 7.2)
// is package invariant; the in-memory SPOT side of tests and the benchmark
// is package fakespot.
//
// Amounts are core.Units: int64 in the asset's smallest unit. The schema is
// persist/migrations/0002_transfers.sql.
package transfer
