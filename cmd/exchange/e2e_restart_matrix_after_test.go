package main

// What TestRestartMatrix does after its restarts: the stuck work ends and
// the venue works on.

import (
	"context"
	"fmt"
	"math/big"
	"time"
)

// finish lets the stuck work end after the restarts: a block mined over
// the withdrawal's finality completes it, the FUNDING side of the internal
// transfer works again and it commits.
func (v *rmVenue) finish() {
	v.t.Helper()
	if err := v.node.Mine(3); err != nil {
		v.t.Fatal(err)
	}
	v.poll("withdrawal COMPLETED", 20*time.Second, func() bool {
		_, w := v.s.do("GET", "/api/v1/withdrawals/"+v.wID, v.s.token(v.wUser, false), nil)
		return w["state"] == "COMPLETED" && w["tx_state"] == "CONFIRMED"
	})
	if bal, err := v.node.Balance(v.wTo); err != nil || bal.Cmp(big.NewInt(250_000_000_000_000_000)) != 0 {
		v.t.Fatalf("on chain the withdrawal's address holds %v wei (%v), want 0.25 ETH", bal, err)
	}
	conn := e2eConn(v.t, v.pg)
	if _, err := conn.Exec(context.Background(), fmt.Sprintf(`DROP TRIGGER %s ON transfer_operations; DROP FUNCTION %s()`,
		v.xTrigger, v.xTrigger)); err != nil {
		v.t.Fatal(err)
	}
	var last map[string]any
	v.poll("internal transfer COMMITTED", 20*time.Second, func() bool {
		_, last = v.s.do("GET", "/api/v1/internal_transfer/"+v.xPending, v.s.token(v.xUser, false), nil)
		if s, _ := last["state"].(string); s != rmPendingState && s != "COMMITTED" {
			v.t.Fatalf("internal transfer %s answered 202 %s ended %v", v.xPending, rmPendingState, last)
		}
		return last["state"] == "COMMITTED"
	})
	v.wantFunds(v.xUser, "USDT", 30_000000, 120_000000)
	v.wantFunds(v.wUser, "ETH", 0, 75_000000)
}

// workOn: the core's breaker lifts once the fault is repaired, and the
// venue works on: retries with a client's keys find what they made, the
// settlement finishes, the halted market resumes, the frozen and disabled
// accounts still refuse, every resting order cancels with its fills, a new
// order is taken, money is conserved, and the sink catches up.
func (v *rmVenue) workOn() {
	v.t.Helper()
	for _, a := range []map[string]any{{"user_id": rmFaulty, "asset": "BTC", "amount": "2", "ref": "rm-fix-user"},
		{"user_id": 0, "asset": "BTC", "amount": "-2", "ref": "rm-fix-fee"}} {
		v.ok(0, "POST", "/admin/v1/adjust", 1000, a)
	}
	v.ok(0, "POST", "/admin/v1/core/breaker/resolve", 1000, map[string]any{"note": "restart matrix: repaired"})
	if o := v.ok(0, "POST", "/api/v1/order", rmTaker, rmRetryOrder()); o["duplicate"] != true || id(v.t, o["order_id"]) != v.retryOrder {
		v.t.Fatalf("client_order_id rm-live-1 sent again after the restarts: %v, want the duplicate of order %d", o, v.retryOrder)
	}
	if b := v.ok(0, "POST", "/transfers", rmBob, rmRetryP2P); fmt.Sprint(b["transferId"]) != v.retryP2P {
		v.t.Fatalf("requestId rm-p1 sent again after the restarts: %v, want transfer %s", b, v.retryP2P)
	}
	if b := v.ok(0, "POST", fmt.Sprintf("/admin/v1/binary-markets/%d/settle", v.binary), 1000, nil); b["status"] != "SETTLED" {
		v.t.Fatalf("settling after the restarts: %v", b)
	}
	v.ok(0, "POST", "/admin/v1/markets/"+v.haltedSpot+"/resume", 1000, nil)
	if st, b := v.s.do("POST", "/api/v1/order", v.s.token(rmFrozen, false), rmLimit("BTC-USDT", "BUY", "48000", "0.001")); st != 409 ||
		b["code"] != "ACCOUNT_FROZEN" {
		v.t.Fatalf("an order of the FROZEN account after the restarts: %d %v", st, b)
	}
	x := newXT(v.t, v.s, v.pg)
	x.refused("F->S from the DISABLED FUNDING account after the restarts", rmOff, xferBody(F, S, "USDT", "5"), 400, "ACCOUNT_DISABLED")
	cancelled := 0
	for oid, o := range v.orders {
		if w := v.want[fmt.Sprint("order ", oid)].(map[string]any); w["status"] == "NEW" || w["status"] == "PARTIALLY_FILLED" {
			if b := v.ok(0, "DELETE", fmt.Sprint("/api/v1/order/", oid), o.user, nil); b["status"] != "CANCELLED" ||
				b["filled_quantity"] != w["filled_quantity"] {
				v.t.Fatalf("cancel %d after the restarts: %v, was %v", oid, b, w)
			}
			cancelled++
		}
	}
	if cancelled != 6 { // the resting spot orders: 4 in BTC-USDT, 2 in ETH-USDT
		v.t.Fatalf("%d resting orders cancelled after the restarts, want 6", cancelled)
	}
	v.ok(0, "POST", "/api/v1/order", rmThird, rmLimit(v.haltedSpot, "BUY", "2950", "0.01"))
	if st, inv := v.s.do("GET", "/admin/v1/invariants", v.admin, nil); st != 200 || inv["ok"] != true {
		v.t.Fatalf("conservation check at the end: %d %v", st, inv)
	}
	e2eWaitSink(v.t, v.s, v.pg) // the read model followed both restarts
}
