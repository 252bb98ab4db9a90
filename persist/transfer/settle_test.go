package transfer

// Issue 20: once a transfer's row exists, Create never answers a bare error
// (the client would retry and move the funds twice); before it exists, an
// error means nothing was recorded. These tests cut the database (a TCP
// proxy, pgtest.Proxy) in the middle of a transfer and around its insert.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/testkit"
)

// newProxiedHarness is newHarness on a pool that reaches the database
// through a proxy the test can take down.
func newProxiedHarness(t *testing.T) (*harness, *pgtest.Proxy) {
	t.Helper()
	proxy := pgtest.NewProxy(t, pgtest.NewDB(t))
	h := newHarnessOn(t, testkit.MigratedPool(t, proxy.URL(), 8))
	h.coord = h.newCoordinator(func(c *Config) { c.CallTimeout, c.SettleWait = time.Second, 300*time.Millisecond })
	return h, proxy
}

// TestCreateAnswersTheTransferWhenTheDatabaseDiesMidway: the database goes
// away right after the SPOT deposit of a FUNDING->SPOT transfer (its CAS to
// COMMITTED cannot run, as in the soak's "transfer CAS failed ...
// TARGET_PENDING -> COMMITTED: FATAL: terminating connection"). Create
// answers the transfer in TARGET_PENDING with its req_id, not an error; once
// the database is back the worker commits it, and the funds moved once.
func TestCreateAnswersTheTransferWhenTheDatabaseDiesMidway(t *testing.T) {
	h, proxy := newProxiedHarness(t)
	h.deposit(7, usdt, 10_000)
	h.spotF.Crash = proxy.Down // "crash" = the database connection dies, the process lives
	h.spotF.Inject(model.OpDeposit, model.FaultCrashAfter, 1)
	r, err := h.coord.Create(context.Background(), model.Caller{Authenticated: true, UserID: 7},
		model.Request{From: "FUNDING", To: "SPOT", Asset: "USDT", Amount: "0.004"})
	if err != nil {
		t.Fatalf("Create answered an error for a transfer whose row exists: %v", err)
	}
	if r.Transfer.ReqID == "" || r.Transfer.State != TargetPending || r.Unconfirmed {
		t.Fatalf("answer %+v, want the transfer in TARGET_PENDING", r)
	}
	proxy.Up()
	w := NewWorker(h.newCoordinator(nil), WorkerConfig{StaleAfter: time.Hour})
	if _, err := w.RunInterrupted(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tr := h.get(r.Transfer.ReqID); tr.State != Committed {
		t.Fatalf("after recovery: %s", tr.State)
	}
	if f, s := h.fundingBalance(7, usdt), h.spot.Balance(7, usdt); f != 6_000 || s != 4_000 {
		t.Fatalf("funding %d spot %d, want 6000 4000", f, s)
	}
	h.conserved(usdt)
}

// TestCreateBeforeTheRowSaysNothingHappened: with the database away before
// anything is written, Create fails (SYSTEM_ERROR) and nothing exists.
func TestCreateBeforeTheRowSaysNothingHappened(t *testing.T) {
	h, proxy := newProxiedHarness(t)
	h.deposit(7, usdt, 10_000)
	proxy.Down()
	_, err := h.coord.Create(context.Background(), model.Caller{Authenticated: true, UserID: 7},
		model.Request{From: "FUNDING", To: "SPOT", Asset: "USDT", Amount: "0.004", CID: "c-down"})
	var te *model.Error
	if err == nil || errors.As(err, &te) {
		t.Fatalf("Create with the database away: %v, want a system error", err)
	}
	proxy.Up()
	if _, err := h.store.GetByCID(context.Background(), 7, "c-down"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a transfer exists after a failure before its row: %v", err)
	}
	if f := h.fundingBalance(7, usdt); f != 10_000 {
		t.Fatalf("funding %d moved", f)
	}
}

// TestSettleInsert: an insert whose outcome is unknown is settled before
// the answer: fenced as FAILED (SYSTEM_ERROR) when it did not land, so it
// never can; the row itself when it did; the original for a taken cid;
// Unconfirmed when the database cannot be asked; a Postgres ERROR that
// rolled the insert back is the plain "nothing recorded" error, a FATAL is
// settled like a lost connection.
func TestSettleInsert(t *testing.T) {
	h, proxy := newProxiedHarness(t)
	ctx := context.Background()
	lost := errors.New("unexpected EOF") // a connection dying around the commit
	mk := func(cid string) Transfer {
		id, err := h.coord.ids.New()
		if err != nil {
			t.Fatal(err)
		}
		return Transfer{ReqID: id, CID: cid, UserID: 9, From: model.AccountFunding, To: model.AccountSpot, Asset: usdt, Amount: 500, State: Init}
	}

	// Did not land: fenced, and the late insert can never commit.
	tr := mk("")
	r, _, err := h.coord.settleInsert(ctx, tr, lost)
	if err != nil || r.Transfer.State != Failed || FailureCode(r.Transfer) != string(model.CodeSystemError) || r.Unconfirmed {
		t.Fatalf("fence: %+v %v", r, err)
	}
	if _, ins, err := h.store.Insert(ctx, tr); err == nil || ins {
		t.Fatalf("the fenced req_id was inserted later (%v %v)", ins, err)
	}

	// Landed: the row is the answer, as it is.
	tr = mk("")
	if _, _, err := h.store.Insert(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if r, _, err = h.coord.settleInsert(ctx, tr, lost); err != nil || r.Transfer.ReqID != tr.ReqID || r.Transfer.State != Init || r.Duplicate {
		t.Fatalf("landed: %+v %v", r, err)
	}

	// The cid is another request's: that one, as a duplicate.
	first := mk("c-1")
	if _, _, err := h.store.Insert(ctx, first); err != nil {
		t.Fatal(err)
	}
	if r, _, err = h.coord.settleInsert(ctx, mk("c-1"), lost); err != nil || !r.Duplicate || r.Transfer.ReqID != first.ReqID {
		t.Fatalf("cid taken: %+v %v", r, err)
	}

	// Postgres refused: nothing recorded, an error.
	if _, _, err = h.coord.settleInsert(ctx, mk(""), &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "40001"}); err == nil {
		t.Fatal("a Postgres error was not reported as nothing recorded")
	}

	// A FATAL (57P01: pg_terminate_backend, a fast shutdown) proves nothing
	// (issue 41): it can come after the COMMIT committed. Settled like a
	// lost connection: the row when it landed, else fenced.
	fatal := &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01",
		Message: "terminating connection due to administrator command"}
	tr = mk("")
	if _, _, err := h.store.Insert(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if r, _, err = h.coord.settleInsert(ctx, tr, fatal); err != nil || r.Transfer.ReqID != tr.ReqID || r.Transfer.State != Init {
		t.Fatalf("FATAL after the insert committed: %+v %v, want the row", r, err)
	}
	if r, _, err = h.coord.settleInsert(ctx, mk(""), fatal); err != nil || r.Transfer.State != Failed || FailureCode(r.Transfer) != string(model.CodeSystemError) {
		t.Fatalf("FATAL, nothing landed: %+v %v, want fenced", r, err)
	}

	// The database cannot be asked: Unconfirmed, with the req_id to poll.
	proxy.Down()
	tr = mk("")
	if r, _, err = h.coord.settleInsert(ctx, tr, lost); err != nil || !r.Unconfirmed || r.Transfer.ReqID != tr.ReqID {
		t.Fatalf("database away: %+v %v", r, err)
	}
}
