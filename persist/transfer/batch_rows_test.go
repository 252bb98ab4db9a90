package transfer

// These tests pin what the batch statements hand back: a won CAS (plain or
// fused) answers the row exactly as its transition left it, so a driver
// steps on, or answers, without reading it again; a fused step that inserts
// its transfer holds it without a lock. Each batch mixes winners with a
// refused row and lost CAS, which must not disturb the others, and is then
// replayed, which must change nothing.

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

func casReq(id string, from, to State, msg string) *batchReq {
	return &batchReq{kind: kindCAS, reqID: id, from: from, to: to, msg: msg}
}

func TestBatchCASReturnsRows(t *testing.T) {
	h := newHarness(t)
	x := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 10, Init)
	y := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 20, Init)
	z := h.insertAt(8, model.AccountSpot, model.AccountFunding, usdt, 30, SourceDone)
	reqs := func() []*batchReq {
		return []*batchReq{
			casReq(x.ReqID, Init, SourcePending, ""),
			casReq(y.ReqID, SourcePending, SourceDone, "lost"),   // y is in INIT: lost
			casReq(x.ReqID, SourcePending, SourceDone, "second"), // chains on the first (round 2)
			casReq(z.ReqID, SourceDone, TargetPending, "z moved"),
		}
	}
	got := oneBatch(t, stoppedBatcher(t, h, BatchOptions{}), reqs()...)
	for i, want := range []bool{true, false, true, true} {
		if got[i].err != nil || got[i].won != want {
			t.Fatalf("request %d: won %v err %v, want won=%v", i, got[i].won, got[i].err, want)
		}
	}
	if got[1].transfer != (Transfer{}) {
		t.Errorf("lost CAS answered a row: %+v", got[1].transfer)
	}
	if r := got[0].transfer; r.ReqID != x.ReqID || r.State != SourcePending || r.ErrorMessage != "" {
		t.Errorf("round 1 row %+v, want x in SOURCE_PENDING", r)
	}
	rows := map[string]Transfer{}
	for _, tr := range []Transfer{x, y, z} {
		rows[tr.ReqID] = h.get(tr.ReqID)
	}
	if got[2].transfer != rows[x.ReqID] || rows[x.ReqID].State != SourceDone || rows[x.ReqID].ErrorMessage != "second" {
		t.Errorf("x answered %+v, stored %+v", got[2].transfer, rows[x.ReqID])
	}
	if got[3].transfer != rows[z.ReqID] || rows[z.ReqID].State != TargetPending || rows[z.ReqID].ErrorMessage != "z moved" {
		t.Errorf("z answered %+v, stored %+v", got[3].transfer, rows[z.ReqID])
	}
	if rows[y.ReqID].State != Init || rows[y.ReqID].ErrorMessage != "" {
		t.Errorf("y changed by a lost CAS: %+v", rows[y.ReqID])
	}

	// The same batch again: every CAS is lost and nothing changes.
	again := oneBatch(t, stoppedBatcher(t, h, BatchOptions{}), reqs()...)
	for i, a := range again {
		if a.err != nil || a.won || a.transfer != (Transfer{}) {
			t.Errorf("replayed request %d: %+v, want lost", i, a)
		}
	}
	for id, before := range rows {
		if after := h.get(id); after != before {
			t.Errorf("replay changed %s: %+v -> %+v", id, before, after)
		}
	}
}

// fusedInsertReq is insertFused's request for t (FUNDING->SPOT: the
// withdraw and what follows; SPOT->FUNDING: INIT->SOURCE_PENDING only).
func fusedInsertReq(t Transfer) *batchReq {
	plan := &fusePlan{insert: &t, at: Init, pre: []fuseCAS{{to: SourcePending}}}
	if t.From == model.AccountFunding {
		plan.op = model.OpWithdraw
		plan.ok = []fuseCAS{{to: SourceDone}, {to: TargetPending}}
		plan.fail = []fuseCAS{{to: Failed, msg: "source withdraw: ", outcome: true}}
	}
	return &batchReq{kind: kindFused, reqID: t.ReqID, op: plan.op, user: t.UserID, asset: t.Asset, amount: t.Amount, plan: plan}
}

func TestFusedBatchRowsInsertAndReplay(t *testing.T) {
	h := newHarness(t)
	installHistory(t, h.pool)
	h.deposit(7, usdt, 1000)
	h.deposit(8, usdt, 50)
	fresh := func(user UserID, from, to model.AccountType, amount Units) Transfer {
		return Transfer{ReqID: newID(t, h), UserID: user, From: from, To: to, Asset: usdt, Amount: amount}
	}
	ok1 := fresh(7, model.AccountFunding, model.AccountSpot, 100)  // withdraws: TARGET_PENDING
	poor := fresh(8, model.AccountFunding, model.AccountSpot, 500) // refused: FAILED, alone
	s2f := fresh(9, model.AccountSpot, model.AccountFunding, 70)   // INIT->SOURCE_PENDING, no operation
	moved := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 10, SourceDone)
	got := oneBatch(t, stoppedBatcher(t, h, BatchOptions{}),
		fusedInsertReq(ok1), fusedInsertReq(poor), fusedInsertReq(s2f),
		fusedReq(moved, Init), // elsewhere: lost
	)
	type want struct {
		inserted, won bool
		out           model.Outcome
		state         State
		cas           int
	}
	for i, w := range []want{
		{true, true, model.OK(), TargetPending, 3},
		{true, true, model.Fail(model.CodeInsufficientBalance), Failed, 2},
		{true, true, model.Outcome{}, SourcePending, 1},
		{},
	} {
		a := got[i]
		if a.err != nil || a.inserted != w.inserted || a.won != w.won || a.out != w.out || a.state != w.state || a.cas != w.cas {
			t.Fatalf("request %d: %+v, want %+v", i, a, w)
		}
	}
	for i, tr := range []Transfer{ok1, poor, s2f} {
		if row := h.get(tr.ReqID); got[i].transfer != row || row.State != got[i].state {
			t.Errorf("request %d answered %+v, stored %+v", i, got[i].transfer, row)
		}
	}
	if m := got[1].transfer.ErrorMessage; m != "source withdraw: EXPLICIT_FAIL(INSUFFICIENT_BALANCE)" {
		t.Errorf("refused row's error_message %q", m)
	}
	if got[3].transfer != (Transfer{}) {
		t.Errorf("lost step answered a row: %+v", got[3].transfer)
	}
	for _, c := range []struct {
		tr         Transfer
		path, recs string
	}{
		// No cid: each is inserted directly where its chain ends (fusePlan.direct).
		{ok1, "TARGET_PENDING", "withdraw:SUCCESS"},
		{poor, "FAILED", "withdraw:EXPLICIT_FAIL(INSUFFICIENT_BALANCE)"},
		{s2f, "SOURCE_PENDING", ""},
		{moved, "INIT>SOURCE_DONE", ""},
	} {
		wantHistory(t, h.pool, c.tr.ReqID, c.path, c.recs)
	}
	if b7, b8 := h.fundingBalance(7, usdt), h.fundingBalance(8, usdt); b7 != 900 || b8 != 50 {
		t.Fatalf("balances %d and %d, want 900 and 50", b7, b8)
	}

	// Replayed (a driver that did not hear the answer): the steps find
	// their transfers moved on and do nothing; a plain repeat of the
	// withdraw answers the first outcome.
	before := map[string]Transfer{}
	for _, tr := range []Transfer{ok1, poor, s2f, moved} {
		before[tr.ReqID] = h.get(tr.ReqID)
	}
	again := oneBatch(t, stoppedBatcher(t, h, BatchOptions{}),
		fusedReq(ok1, Init), fusedReq(poor, Init), fusedReq(moved, Init))
	for i := range 3 {
		if a := again[i]; a.err != nil || a.won || a.cas != 0 {
			t.Errorf("replayed step %d: %+v, want lost", i, a)
		}
	}
	repeat := oneBatch(t, stoppedBatcher(t, h, BatchOptions{}),
		repeatReq(before[ok1.ReqID], model.OpWithdraw), repeatReq(before[poor.ReqID], model.OpWithdraw))
	if repeat[0].out != model.OK() || repeat[1].out != model.Fail(model.CodeInsufficientBalance) {
		t.Errorf("repeated withdraws answered %v and %v", repeat[0].out, repeat[1].out)
	}
	for id, row := range before {
		if after := h.get(id); after != row {
			t.Errorf("replay changed %s: %+v -> %+v", id, row, after)
		}
	}
	if b7, b8 := h.fundingBalance(7, usdt), h.fundingBalance(8, usdt); b7 != 900 || b8 != 50 {
		t.Fatalf("balances after replay %d and %d, want 900 and 50", b7, b8)
	}
}

// TestDriveAnswersFromItsOwnWrite: Create answers the row its last CAS
// left, exactly as stored, without reading it again: a fused transfer
// costs the Batcher two requests (its first fused step and the final
// transition), in either direction; the unbatched path answers the stored
// row as well.
func TestDriveAnswersFromItsOwnWrite(t *testing.T) {
	h, b := newFusedHarness(t, BatchOptions{})
	h.deposit(7, usdt, 1000)
	h.spot.Credit(7, usdt, 1000)
	for _, dir := range [][2]string{{"FUNDING", "SPOT"}, {"SPOT", "FUNDING"}} {
		n := b.Stats().Requests.Load()
		r := h.create(h.coord, 7, dir[0], dir[1], "USDT", "0.0001", "")
		d := b.Stats().Requests.Load() - n
		if r.Transfer.State != Committed {
			t.Fatalf("%s->%s: %s", dir[0], dir[1], r.Transfer.State)
		}
		if d != 2 {
			t.Errorf("%s->%s: %d batch requests, want 2 (no read after the final transition)", dir[0], dir[1], d)
		}
		if row := h.get(r.Transfer.ReqID); r.Transfer != row {
			t.Errorf("%s->%s answered %+v, stored %+v", dir[0], dir[1], r.Transfer, row)
		}
	}
	plain := newHarness(t)
	plain.deposit(7, usdt, 1000)
	r := plain.create(plain.coord, 7, "FUNDING", "SPOT", "USDT", "0.0001", "")
	if row := plain.get(r.Transfer.ReqID); r.Transfer != row || row.State != Committed {
		t.Errorf("unbatched: answered %+v, stored %+v", r.Transfer, row)
	}
}

// TestBatchBalanceChangeProbesAndGuards: the batch's balance change finds
// each row by a primary-key probe and changes it by tid, generic plan or
// not, on a ledger of the transfer benchmark's size (1000 users; the
// previous UPDATE ... FROM unnest joined it by a sequential scan and a hash
// on every batch), and a row it does not find fails the statement instead
// of being skipped.
func TestBatchBalanceChangeProbesAndGuards(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(7, usdt, 1000)
	h.deposit(8, usdt, 1000)
	if _, err := h.pool.Exec(ctx, `INSERT INTO balances_tb (user_id, asset_id, available)
		SELECT u, $1, 1 FROM generate_series(1000, 1999) AS u`, int32(usdt)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.pool.Exec(ctx, `ANALYZE balances_tb`); err != nil {
		t.Fatal(err)
	}
	tx, err := h.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `PREPARE change_`+mode+` AS `+changeSQL); err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, `EXPLAIN (COSTS OFF) EXECUTE change_`+mode+`('{7,8}', '{1,1}', '{-5,5}', '{1,1}', 2)`)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "Tid Scan on balances_tb") ||
			!strings.Contains(plan, "Index Scan using balances_tb_pkey") {
			t.Fatalf("%s plan:\n%s", mode, plan)
		}
	}
	var n int64
	if err := tx.QueryRow(ctx, changeSQL, []int64{7, 8}, []int32{int32(usdt), int32(usdt)}, []int64{-5, 5}, []int64{1, 1}, int64(2)).Scan(&n); err != nil || n != 2 {
		t.Fatalf("change: %d %v", n, err)
	}
	var b7, b8 int64
	if err := tx.QueryRow(ctx, `SELECT (SELECT available FROM balances_tb WHERE user_id = 7 AND asset_id = $1),
		(SELECT available FROM balances_tb WHERE user_id = 8 AND asset_id = $1)`, int32(usdt)).Scan(&b7, &b8); err != nil || b7 != 995 || b8 != 1005 {
		t.Fatalf("balances %d %d %v, want 995 and 1005", b7, b8, err)
	}
	// User 9 has no row: the guard fails the statement.
	err = tx.QueryRow(ctx, changeSQL, []int64{7, 9}, []int32{int32(usdt), int32(usdt)}, []int64{1, 1}, []int64{1, 1}, int64(2)).Scan(&n)
	if err == nil || !strings.Contains(err.Error(), changedMark) {
		t.Fatalf("change of a missing row: %d %v", n, err)
	}
}
