package transfer

// These tests pin the Batcher's answers in the cases that matter, each in
// ONE batch (queued before the writer starts, so the order is known):
// repeats of one (req_id, op) keep the first outcome and move the balance
// once; explicit refusals sit next to successes without disturbing them;
// racing CAS requests are won once; a transaction that fails answers every
// caller with an error and changes nothing; a record raced by a concurrent
// transaction of another process makes the batch run again and answer the recorded
// outcome; and the queue is bounded, cancellable and closable.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/transferfault"
)

// newBatchedHarness is newHarness with the coordinator's Store and FUNDING
// adapter going through a running Batcher.
func newBatchedHarness(t *testing.T, opt BatchOptions) (*harness, *Batcher) {
	t.Helper()
	return newHarnessWith(t, migratedPool(t), opt)
}

// oneBatch queues reqs in order on b before it starts, starts it and
// returns the answers: with MaxBatch >= len(reqs) they run as one batch
// (and, if a statement fails it, one by one after it).
func oneBatch(t *testing.T, b *Batcher, reqs ...*batchReq) []batchAnswer {
	t.Helper()
	for _, r := range reqs {
		if r.ctx == nil {
			r.ctx = context.Background()
		}
		r.done = make(chan batchAnswer, 1)
		if err := push(b, b.queue, r); err != nil {
			t.Fatal(err)
		}
	}
	b.Start()
	out := make([]batchAnswer, len(reqs))
	for i, r := range reqs {
		out[i] = <-r.done
	}
	want := int64(1)
	if b.Stats().Isolated.Load() == 1 { // the batch failed by a statement, then each request ran alone
		want += int64(len(reqs))
	}
	if n := b.Stats().Batches.Load() + b.Stats().Failed.Load(); n != want {
		t.Fatalf("%d transactions ran, want %d (one batch)", n, want)
	}
	return out
}

// fundingReq is a FUNDING operation alone on the one path (opReq), its
// holder transfer inserted.
func (h *harness) fundingReq(op model.Op, id string, user UserID, asset AssetID, amount Units) *batchReq {
	h.t.Helper()
	if err := hold(context.Background(), h.pool, id); err != nil {
		h.t.Fatal(err)
	}
	return opReq(op, id, user, asset, amount)
}

// stoppedBatcher returns a Batcher on h's database that is not started yet.
func stoppedBatcher(t *testing.T, h *harness, opt BatchOptions) *Batcher {
	b := NewBatcher(h.pool, opt)
	t.Cleanup(b.Close)
	return b
}

func TestBatchRepeatsKeepFirstOutcome(t *testing.T) {
	h := newHarness(t)
	h.deposit(7, usdt, 1000)
	a, c := newID(t, h), newID(t, h)
	// Each batch holds one operation of a req_id: a second fused step of a
	// transfer in a batch is LOST (checked at the end), as a racing driver's.
	batches := [][]*batchReq{{
		h.fundingReq(model.OpWithdraw, a, 7, usdt, 300),  // SUCCESS
		h.fundingReq(model.OpWithdraw, c, 7, usdt, 5000), // INSUFFICIENT_BALANCE, recorded
		h.fundingReq(model.OpDeposit, newID(t, h), 7, usdt, 9000),
	}, {
		h.fundingReq(model.OpWithdraw, a, 7, usdt, 300),  // repeat: SUCCESS, no second debit
		h.fundingReq(model.OpWithdraw, c, 7, usdt, 5000), // now affordable, but the refusal is sticky
	}, {
		h.fundingReq(model.OpRefund, a, 7, usdt, 300), // credits the withdraw back
	}, {
		h.fundingReq(model.OpRefund, a, 7, usdt, 300), // once
	}, {
		h.fundingReq(model.OpWithdraw, a, 7, usdt, 301), // same id and op, other amount
	}}
	want := [][]model.Outcome{{model.OK(), model.Fail(model.CodeInsufficientBalance), model.OK()},
		{model.OK(), model.Fail(model.CodeInsufficientBalance)}, {model.OK()}, {model.OK()},
		{model.UnknownOutcome(string(model.CodeReqIDConflict))}}
	for j, reqs := range batches {
		got := oneBatch(t, stoppedBatcher(t, h, BatchOptions{}), reqs...)
		for i := range want[j] {
			if got[i].err != nil || got[i].out != want[j][i] {
				t.Fatalf("batch %d, request %d: %+v, want %s", j, i, got[i], want[j][i])
			}
		}
	}
	if b := h.fundingBalance(7, usdt); b != 10_000 {
		t.Fatalf("balance %d, want 10000 (withdraw and refund once each)", b)
	}
	// Two operations of one req_id in one batch: the second is LOST, not run.
	got := oneBatch(t, stoppedBatcher(t, h, BatchOptions{}),
		h.fundingReq(model.OpRefund, a, 7, usdt, 300), h.fundingReq(model.OpWithdraw, a, 7, usdt, 301))
	if got[0].out != model.OK() || got[1].won || got[1].out != (model.Outcome{}) {
		t.Fatalf("two steps of one transfer in a batch: %+v, %+v; want the recorded SUCCESS, then lost", got[0], got[1])
	}
	// Later, one at a time (batches of one): the same first outcomes.
	wantOutcome(t, "plain repeat", h.funding.Withdraw(context.Background(), c, 7, usdt, 5000), model.ExplicitFail, model.CodeInsufficientBalance)
	wantOutcome(t, "plain repeat", h.funding.Refund(context.Background(), a, 7, usdt, 300), model.Success, "")
	if b := h.fundingBalance(7, usdt); b != 10_000 {
		t.Fatalf("balance %d after plain repeats", b)
	}
}

func TestBatchRefusalsBesideSuccesses(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(1, usdt, 1000)
	h.deposit(2, usdt, 1000)
	h.deposit(3, usdt, 1000)
	h.deposit(4, btc, 10) // has an account, no USDT row
	if err := h.funding.SetStatus(ctx, 2, usdt, model.Frozen); err != nil {
		t.Fatal(err)
	}
	if err := h.funding.SetStatus(ctx, 3, usdt, model.Disabled); err != nil {
		t.Fatal(err)
	}
	got := oneBatch(t, stoppedBatcher(t, h, BatchOptions{}),
		h.fundingReq(model.OpWithdraw, newID(t, h), 1, usdt, 400),
		h.fundingReq(model.OpWithdraw, newID(t, h), 2, usdt, 1), // frozen: may not send
		h.fundingReq(model.OpDeposit, newID(t, h), 2, usdt, 50), // ... but may receive
		h.fundingReq(model.OpWithdraw, newID(t, h), 3, usdt, 1), // disabled
		h.fundingReq(model.OpDeposit, newID(t, h), 3, usdt, 1),
		h.fundingReq(model.OpWithdraw, newID(t, h), 1, usdt, 601), // 600 left
		h.fundingReq(model.OpWithdraw, newID(t, h), 1, usdt, 600),
		h.fundingReq(model.OpDeposit, newID(t, h), 4, usdt, 70),  // creates the row
		h.fundingReq(model.OpWithdraw, newID(t, h), 4, usdt, 20), // from the row just created
		h.fundingReq(model.OpDeposit, newID(t, h), 9, usdt, 1),   // no account
		h.fundingReq(model.OpWithdraw, newID(t, h), 9, usdt, 1),
		h.fundingReq(model.OpRefund, newID(t, h), 1, usdt, 5), // nothing withdrawn
	)
	want := []model.Outcome{model.OK(), model.Fail(model.CodeAccountFrozen), model.OK(), model.Fail(model.CodeAccountDisabled), model.Fail(model.CodeAccountDisabled),
		model.Fail(model.CodeInsufficientBalance), model.OK(), model.OK(), model.OK(), model.Fail(model.CodeTargetAccountNotFound), model.Fail(model.CodeSourceAccountNotFound),
		model.Fail(model.CodeRefundWithoutWithdraw)}
	for i := range want {
		if got[i].err != nil || got[i].out != want[i] {
			t.Fatalf("request %d: %+v, want %s", i, got[i], want[i])
		}
	}
	for _, c := range []struct {
		user UserID
		want Units
	}{{1, 0}, {2, 1050}, {3, 1000}, {4, 50}} {
		if b := h.fundingBalance(c.user, usdt); b != c.want {
			t.Fatalf("user %d: balance %d, want %d", c.user, b, c.want)
		}
	}
	var version int64
	if err := h.pool.QueryRow(ctx, `SELECT version FROM balances_tb WHERE user_id = 4 AND asset_id = $1`, int32(usdt)).Scan(&version); err != nil || version != 1 {
		t.Fatalf("created row version %d (%v), want 1: created at 0, +1 for the withdraw", version, err)
	}
	var records int
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM transfer_operations`).Scan(&records); err != nil || records != len(want) {
		t.Fatalf("%d records (%v), want %d: every decided outcome, refusals included", records, err, len(want))
	}
}

func TestBatchCASRaceWonOnce(t *testing.T) {
	h := newHarness(t)
	tr := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 10, Init)
	other := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 10, Init)
	cas := func(id string, from, to State) *batchReq {
		return &batchReq{kind: kindCAS, reqID: id, from: from, to: to}
	}
	got := oneBatch(t, stoppedBatcher(t, h, BatchOptions{}),
		cas(tr.ReqID, Init, SourcePending),
		cas(tr.ReqID, Init, SourcePending), // a second driver: lost
		cas(other.ReqID, Init, SourcePending),
		cas(tr.ReqID, SourcePending, SourceDone), // chains on the first
		&batchReq{kind: kindNote, reqID: tr.ReqID, from: SourceDone, msg: "noted"},
		&batchReq{kind: kindNote, reqID: tr.ReqID, from: SourceDone, msg: "noted again"},
		cas(tr.ReqID, SourcePending, Failed), // too late: lost
		cas(other.ReqID, Init, SourcePending),
	)
	for i, want := range []bool{true, false, true, true, false, false, false, false} {
		if got[i].err != nil || got[i].won != want {
			t.Fatalf("request %d: %+v, want won=%v", i, got[i], want)
		}
	}
	if g := h.get(tr.ReqID); g.State != SourceDone || g.RetryCount != 2 || g.ErrorMessage != "noted again" {
		t.Fatalf("transfer %s retries %d msg %q", g.State, g.RetryCount, g.ErrorMessage)
	}
	if g := h.get(other.ReqID); g.State != SourcePending {
		t.Fatalf("other transfer %s", g.State)
	}
}

// TestBatchFailedStatementIsolatesRequests: when a statement fails the
// batch's transaction (here a trigger refusing every FUNDING record), it
// rolls back with no effect and its requests run again one by one: the
// ones that fail alone get an error (UNKNOWN for funding) and change
// nothing, the others (a CAS of another transfer) take effect, as each
// would have in a batch of its own; the failed requests later get
// their true outcomes.
func TestBatchFailedStatementIsolatesRequests(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(7, usdt, 1000)
	tr := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 10, Init)
	if _, err := h.pool.Exec(ctx, `CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE EXCEPTION 'injected'; END $$;
		CREATE TRIGGER boom BEFORE INSERT ON transfer_operations FOR EACH ROW EXECUTE FUNCTION boom();`); err != nil {
		t.Fatal(err)
	}
	a, c := newID(t, h), newID(t, h)
	b := stoppedBatcher(t, h, BatchOptions{})
	got := oneBatch(t, b,
		&batchReq{kind: kindCAS, reqID: tr.ReqID, from: Init, to: SourcePending},
		h.fundingReq(model.OpWithdraw, a, 7, usdt, 300),
		h.fundingReq(model.OpWithdraw, c, 7, usdt, 5000))
	if got[0].err != nil || !got[0].won {
		t.Fatalf("the CAS sharing a failed batch: %+v, want it won on its own", got[0])
	}
	for i, g := range got[1:] {
		if g.err == nil {
			t.Fatalf("funding request %d answered %+v although its record cannot be written", i+1, g)
		}
	}
	if st := b.Stats(); st.Isolated.Load() != 1 || st.Failed.Load() != 3 || st.Batches.Load() != 1 {
		t.Fatalf("isolated %d, failed %d, committed %d; want 1, 3 (the batch, then each withdraw alone), 1 (the CAS alone)",
			st.Isolated.Load(), st.Failed.Load(), st.Batches.Load())
	}
	if bal, st := h.fundingBalance(7, usdt), h.get(tr.ReqID).State; bal != 1000 || st != SourcePending {
		t.Fatalf("after the failed batch: balance %d (want 1000), state %s (want SOURCE_PENDING)", bal, st)
	}
	// Through the adapter API the error is an unknown outcome, never a refusal.
	fb := NewFunding(b)
	wantOutcome(t, "withdraw in a failing batch", fb.Withdraw(ctx, a, 7, usdt, 300), model.Unknown, "")
	if _, err := h.pool.Exec(ctx, `DROP TRIGGER boom ON transfer_operations`); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "retry", fb.Withdraw(ctx, a, 7, usdt, 300), model.Success, "")
	wantOutcome(t, "retry refusal", fb.Withdraw(ctx, c, 7, usdt, 5000), model.ExplicitFail, model.CodeInsufficientBalance)
	if bal := h.fundingBalance(7, usdt); bal != 700 {
		t.Fatalf("balance %d, want 700", bal)
	}
}

// TestBatchRecordRaceRunsAgain: another process's deposit into a row that
// does not exist yet (nothing to lock) commits the same (req_id, op) while
// the batch writes it. The batch must not apply it twice: it rolls back,
// runs again, and answers the recorded first outcome. A FUNDING fault armed
// once and drawn by the run that rolled back is injected again in the run
// after it (it is the request's, not the run's): the withdraw beside the
// raced deposit answers NETWORK_ERROR and moves nothing.
func TestBatchRecordRaceRunsAgain(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(7, btc, 1) // the account exists; its USDT row does not
	id := newID(t, h)
	// The concurrent first call, held open: row and record inserted, not committed.
	other, err := h.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }() // after Commit a no-op
	if _, err := other.Exec(ctx, `INSERT INTO balances_tb (user_id, asset_id, available) VALUES (7, $1, 500)`, int32(usdt)); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `INSERT INTO transfer_operations (req_id, adapter, op, result, user_id, asset_id, amount)
		VALUES ($1, 'funding', 'deposit', 'SUCCESS', 7, $2, 500)`, id, int32(usdt)); err != nil {
		t.Fatal(err)
	}
	b := stoppedBatcher(t, h, BatchOptions{})
	faults := transferfault.New(nil)
	faults.Inject(model.OpWithdraw, model.FaultNetworkError, 1)
	b.SetFaults(faults)
	r := h.fundingReq(model.OpDeposit, id, 7, usdt, 500)
	w := h.fundingReq(model.OpWithdraw, newID(t, h), 7, btc, 1)
	for _, q := range []*batchReq{r, w} {
		q.ctx, q.done = ctx, make(chan batchAnswer, 1)
		if err := push(b, b.queue, q); err != nil {
			t.Fatal(err)
		}
	}
	b.Start()
	waitFor(t, "the batch to wait on the uncommitted record", func() bool {
		var n int
		_ = h.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE 'WITH rec AS%'`).Scan(&n)
		return n == 1
	})
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if a := <-r.done; a.err != nil || a.out != model.OK() {
		t.Fatalf("answer %+v, want the recorded SUCCESS", a)
	}
	if bal := h.fundingBalance(7, usdt); bal != 500 {
		t.Fatalf("balance %d, want 500 (credited once)", bal)
	}
	if a := <-w.done; a.err != nil || a.out.Kind != model.NetworkError {
		t.Fatalf("withdraw with a fault armed once: %+v, want the injected NETWORK_ERROR on the run again too", a)
	}
	if bal := h.fundingBalance(7, btc); bal != 1 || faults.Calls(model.OpWithdraw) != 1 {
		t.Fatalf("btc balance %d, faults drawn %d; want 1 and 1", bal, faults.Calls(model.OpWithdraw))
	}
	if b.Stats().Retries.Load() != 1 {
		t.Fatalf("retries %d, want 1", b.Stats().Retries.Load())
	}
}

// TestTwoBatchersShareIdempotency: first calls of the same operations race
// through two Batchers on one database at once (two processes, each with
// its writer); each operation moves the balance once.
func TestTwoBatchersShareIdempotency(t *testing.T) {
	h, b := newBatchedHarness(t, BatchOptions{})
	ob := NewBatcher(h.pool, BatchOptions{})
	ob.Start()
	t.Cleanup(ob.Close)
	other := NewFunding(ob)
	ctx := context.Background()
	h.deposit(7, usdt, 10_000)
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = newID(t, h)
	}
	var wg sync.WaitGroup
	var bad atomic.Int32
	for _, f := range []*Funding{other, h.funding, other, h.funding} {
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := f.Withdraw(ctx, id, 7, usdt, 100)
				for o.Kind == model.Unknown { // a batch that lost the record race batchAttempts times: retry
					o = f.Withdraw(ctx, id, 7, usdt, 100)
				}
				if o.Kind != model.Success {
					bad.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d calls did not succeed", bad.Load())
	}
	if bal := h.fundingBalance(7, usdt); bal != 8_000 {
		t.Fatalf("balance %d, want 8000 (20 withdraws of 100, once each)", bal)
	}
	if b.Stats().Batches.Load() == 0 || ob.Stats().Batches.Load() == 0 {
		t.Fatal("a Batcher ran no batch")
	}
}

func TestBatcherBoundsAndLifecycle(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	h.deposit(7, usdt, 1000)
	b := NewBatcher(h.pool, BatchOptions{MaxQueue: 2})
	f := NewFunding(b)

	// A caller that gives up before its batch starts: answered with its
	// context's error, and its request never runs.
	gone, cancel := context.WithCancel(ctx)
	id := newID(t, h)
	r := h.fundingReq(model.OpWithdraw, id, 7, usdt, 100)
	r.ctx, r.done = gone, make(chan batchAnswer, 1)
	if err := push(b, b.queue, r); err != nil {
		t.Fatal(err)
	}
	cancel()
	// The queue is bounded: it refuses instead of growing.
	waiting := h.fundingReq(model.OpWithdraw, newID(t, h), 7, usdt, 1)
	waiting.ctx, waiting.done = ctx, make(chan batchAnswer, 1)
	if err := push(b, b.queue, waiting); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, "full queue", f.Withdraw(ctx, newID(t, h), 7, usdt, 1), model.Unknown, "")
	if err := push(b, b.queue, h.fundingReq(model.OpWithdraw, newID(t, h), 7, usdt, 1)); !errors.Is(err, ErrBatcherFull) {
		t.Fatalf("enqueue on a full queue: %v", err)
	}
	b.Start()
	if a := <-r.done; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("cancelled caller answered %+v", a)
	}
	if a := <-waiting.done; a.err != nil || a.out != model.OK() {
		t.Fatalf("waiting request answered %+v", a)
	}
	wantOutcome(t, "running", f.Withdraw(ctx, newID(t, h), 7, usdt, 10), model.Success, "")
	if bal := h.fundingBalance(7, usdt); bal != 989 {
		t.Fatalf("balance %d, want 989: the cancelled withdraw never ran", bal)
	}
	b.Close()
	b.Close() // idempotent
	s := NewStore(b)
	tr := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 10, Init)
	if _, err := s.Transition(ctx, tr.ReqID, Init, SourcePending, ""); !errors.Is(err, ErrBatcherClosed) {
		t.Fatalf("CAS after Close: %v", err)
	}
	if _, err := s.Transition(ctx, tr.ReqID, Init, Committed, ""); err == nil || errors.Is(err, ErrBatcherClosed) {
		t.Fatalf("illegal transition reached the batcher: %v", err)
	}
	ctxShort, cancelShort := context.WithTimeout(ctx, time.Millisecond)
	defer cancelShort()
	<-ctxShort.Done()
	wantOutcome(t, "closed, caller timed out", f.Withdraw(ctxShort, newID(t, h), 7, usdt, 1), model.Timeout, "")
}
