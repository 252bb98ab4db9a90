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
// One path. fsm.go is the FSM as data: for every state, StepAt says
// which side to call, what to write before the call and where each outcome
// leads (pure, tested every state x every outcome). steps.go's run is its
// one executor. The Store and the FUNDING adapter go through a Batcher
// (batch.go), which runs the steps of many concurrent transfers as one
// transaction with the answers each would have had alone; a FUNDING call is
// a fused step (fused.go, batch_fused.go): the call and the transitions
// around it commit as ONE transaction, written as one CAS UPDATE from the
// state the step found to the state its chain ends in (the states in
// between exist only inside that transaction), and Create inserts the
// transfer in the transaction of its first move. So some states are never
// durable on this path: SOURCE_DONE never; INIT, SOURCE_PENDING (a
// FUNDING source) and TARGET_PENDING, COMPENSATING (a FUNDING target or
// refund) only when a SPOT call or an unknown outcome stops the chain
// there. A SPOT call is made after its announcing state is durable (a CAS,
// or the previous fused COMMIT); its outcome is written with the next
// FUNDING call's transaction, or by CAS. Fault injection wraps the sides
// below this path: the SPOT adapter in Faulty, the FUNDING side inside the
// batch transactions (Batcher.SetFaults: an explicit failure, an error
// before the effect, a crash before COMMIT, a COMMIT whose answer is lost,
// a crash after COMMIT), so the fault tests run the path production runs.
// Coordinator.Fused reports it; the server logs it at start.
//
// Amounts are core.Units: int64 in the asset's smallest unit. The schema is
// persist/migrations/0002_transfers.sql.
package transfer
