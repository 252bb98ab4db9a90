package transfer

// These tests pin fused steps (fused.go, batch_fused.go), the one path:
// every terminal outcome in both directions with exact balances, records
// and state paths (recorded by a trigger, with the transaction of each
// state: the fused transitions share one); that a coordinator cannot be
// wired to anything else; lost CAS in one batch and across batches; two
// fused drivers racing on every transfer (one set of effects, every state
// once); and recovery from every state a crash (or an earlier release,
// which made its steps one transaction at a time) may leave.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/ulid"
)

// installHistory records every committed state a transfer takes (its
// INSERT and each state change) with the transaction that made it.
func installHistory(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for _, q := range []string{
		`CREATE TABLE xtest_state_history (id bigserial PRIMARY KEY, req_id text NOT NULL,
			state smallint NOT NULL, xid bigint NOT NULL DEFAULT txid_current())`,
		`CREATE FUNCTION xtest_state_history_fn() RETURNS trigger AS $$
		BEGIN
			IF TG_OP = 'INSERT' OR NEW.state IS DISTINCT FROM OLD.state THEN
				INSERT INTO xtest_state_history (req_id, state) VALUES (NEW.req_id, NEW.state);
			END IF;
			RETURN NEW;
		END $$ LANGUAGE plpgsql`,
		`CREATE TRIGGER xtest_state_history_tr AFTER INSERT OR UPDATE ON transfers_tb
			FOR EACH ROW EXECUTE FUNCTION xtest_state_history_fn()`,
	} {
		if _, err := pool.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
}

// history returns reqID's states as "INIT>SOURCE_PENDING>..." and, in the
// same notation, which transaction made each: "a>b>b>b>c" (the first
// transaction is a, the next new one b, ...).
func history(t *testing.T, pool *pgxpool.Pool, reqID string) (path, txs string) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT state, xid FROM xtest_state_history WHERE req_id = $1 ORDER BY id`, reqID)
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		State int16
		Xid   int64
	}
	recs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rec])
	if err != nil {
		t.Fatal(err)
	}
	var states, xs []string
	names := map[int64]string{}
	for _, r := range recs {
		states = append(states, State(r.State).String())
		if names[r.Xid] == "" {
			names[r.Xid] = string(rune('a' + len(names)))
		}
		xs = append(xs, names[r.Xid])
	}
	return strings.Join(states, ">"), strings.Join(xs, ">")
}

// records returns reqID's FUNDING operation records, "op:RESULT(code)" sorted by op.
// wantHistory checks reqID's recorded state path and FUNDING records.
func wantHistory(t *testing.T, pool *pgxpool.Pool, reqID, path, recs string) {
	t.Helper()
	if p, _ := history(t, pool, reqID); p != path {
		t.Errorf("%s: path %s, want %s", reqID, p, path)
	}
	if r := records(t, pool, reqID); r != recs {
		t.Errorf("%s: records %q, want %q", reqID, r, recs)
	}
}

func records(t *testing.T, pool *pgxpool.Pool, reqID string) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT op || ':' || result || COALESCE('(' || code || ')', '')
		FROM transfer_operations WHERE req_id = $1 ORDER BY op`, reqID)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(got, ",")
}

// newFusedHarness is newBatchedHarness with the history trigger and
// h.coord patient (MaxWait 20 s).
func newFusedHarness(t *testing.T, opt BatchOptions) (*harness, *Batcher) {
	t.Helper()
	h, b := newBatchedHarness(t, opt)
	installHistory(t, h.pool)
	h.coord = h.fusedCoordinator()
	return h, b
}

// fusedCoordinator returns another coordinator on h's sides, patient.
func (h *harness) fusedCoordinator() *Coordinator {
	return h.newCoordinator(func(cfg *Config) { cfg.MaxWait = 20 * time.Second })
}

// The FSM's paths (every transition the coordinator makes, counted by
// Stats.CASWon) and the paths a fused coordinator leaves in transfers_tb: a
// fused step writes only the last state of its chain (queueFusedCAS), so the
// history skips the states inside one transaction, which no other
// transaction could ever see.
const (
	pathCommitted  = "INIT>SOURCE_PENDING>SOURCE_DONE>TARGET_PENDING>COMMITTED"
	pathFailed     = "INIT>SOURCE_PENDING>FAILED"
	pathRolledBack = "INIT>SOURCE_PENDING>SOURCE_DONE>TARGET_PENDING>COMPENSATING>ROLLED_BACK"

	fusedCommittedFS  = "INIT>TARGET_PENDING>COMMITTED"   // FUNDING withdraw + 3 moves in one tx
	fusedCommittedSF  = "INIT>SOURCE_PENDING>COMMITTED"   // FUNDING deposit + 3 moves in one tx
	fusedFailedFS     = "INIT>FAILED"                     // refused FUNDING withdraw + 2 moves
	fusedRolledBackFS = "INIT>TARGET_PENDING>ROLLED_BACK" // FUNDING refund + 2 moves
	fusedRolledBackSF = "INIT>SOURCE_PENDING>COMPENSATING>ROLLED_BACK"

	// Transfers Create makes without a cid are inserted in the state their
	// first fused step ends in (fusePlan.direct): INIT and the states after
	// it inside that transaction are never written.
	createdCommittedFS  = "TARGET_PENDING>COMMITTED"
	createdCommittedSF  = "SOURCE_PENDING>COMMITTED"
	createdRolledBackFS = "TARGET_PENDING>ROLLED_BACK"
	createdRolledBackSF = "SOURCE_PENDING>COMPENSATING>ROLLED_BACK"
)

// collapsedFrom reports whether path is full with some inner states left
// out: the same first and last state, and every state of path in full, in
// order.
func collapsedFrom(path, full string) bool {
	p, f := strings.Split(path, ">"), strings.Split(full, ">")
	if len(p) == 0 || p[0] != f[0] || p[len(p)-1] != f[len(f)-1] {
		return false
	}
	j := 0
	for _, st := range f {
		if j < len(p) && p[j] == st {
			j++
		}
	}
	return j == len(p)
}

func TestFusedOutcomes(t *testing.T) {
	h, _ := newFusedHarness(t, BatchOptions{})
	ctx := context.Background()
	flows := []struct {
		name          string
		from, to      string
		setup         func(u UserID)
		want          State
		path, txs     string // txs: which transitions share a transaction
		records, code string
		funding, spot Units
	}{
		{"ok F->S", "FUNDING", "SPOT", func(u UserID) { h.deposit(u, usdt, 1000) },
			Committed, createdCommittedFS, "a>b", "withdraw:SUCCESS", "", 900, 100},
		{"insufficient F->S", "FUNDING", "SPOT", func(u UserID) { h.deposit(u, usdt, 50) },
			Failed, fusedFailedFS, "a>b", "withdraw:EXPLICIT_FAIL(INSUFFICIENT_BALANCE)", "INSUFFICIENT_BALANCE", 50, 0},
		{"SPOT refuses: FUNDING refund", "FUNDING", "SPOT", func(u UserID) {
			h.deposit(u, usdt, 1000)
			h.spot.SetStatus(u, model.Disabled)
		}, RolledBack, createdRolledBackFS, "a>b", "refund:SUCCESS,withdraw:SUCCESS", "ACCOUNT_DISABLED", 1000, 0},
		{"ok S->F", "SPOT", "FUNDING", func(u UserID) { h.deposit(u, usdt, 1000); h.spot.Credit(u, usdt, 1000) },
			Committed, createdCommittedSF, "a>b", "deposit:SUCCESS", "", 1100, 900},
		{"SPOT insufficient S->F", "SPOT", "FUNDING", func(u UserID) { h.deposit(u, usdt, 1000); h.spot.Credit(u, usdt, 50) },
			Failed, pathFailed, "a>b>c", "", "INSUFFICIENT_BALANCE", 1000, 50},
		{"FUNDING refuses: SPOT refund", "SPOT", "FUNDING", func(u UserID) {
			h.deposit(u, usdt, 1000)
			h.spot.Credit(u, usdt, 1000)
			if err := h.funding.SetStatus(ctx, u, usdt, model.Disabled); err != nil {
				t.Fatal(err)
			}
		}, RolledBack, createdRolledBackSF, "a>b>c", "deposit:EXPLICIT_FAIL(ACCOUNT_DISABLED)", "ACCOUNT_DISABLED", 1000, 1000},
	}
	for i, f := range flows {
		u := UserID(100 + i)
		f.setup(u)
		var tr Transfer
		if f.want == Failed {
			// Create refuses it up front: a transfer accepted earlier meets
			// a balance spent in the meantime.
			tr = h.insertAt(u, model.AccountType(f.from), model.AccountType(f.to), usdt, 100, Init)
			var err error
			if tr, err = h.coord.Drive(ctx, tr.ReqID); err != nil {
				t.Fatal(err)
			}
		} else {
			tr = h.create(h.coord, u, f.from, f.to, "USDT", "0.0001", "").Transfer
		}
		if tr.State != f.want {
			t.Fatalf("%s: %s, want %s (%s)", f.name, tr.State, f.want, tr.ErrorMessage)
		}
		path, txs := history(t, h.pool, tr.ReqID)
		if path != f.path || txs != f.txs {
			t.Errorf("%s: path %s in transactions %s, want %s in %s", f.name, path, txs, f.path, f.txs)
		}
		if got := records(t, h.pool, tr.ReqID); got != f.records {
			t.Errorf("%s: records %q, want %q", f.name, got, f.records)
		}
		if got := h.get(tr.ReqID); f.code != "" && !strings.Contains(got.ErrorMessage, f.code) {
			t.Errorf("%s: error_message %q lacks %s", f.name, got.ErrorMessage, f.code)
		}
		if fb, sb := h.fundingBalance(u, usdt), h.spot.Balance(u, usdt); fb != f.funding || sb != f.spot {
			t.Errorf("%s: funding %d spot %d, want %d and %d", f.name, fb, sb, f.funding, f.spot)
		}
	}
	st := h.coord.Stats()
	if st.Committed.Load() != 2 || st.Failed.Load() != 2 || st.RolledBack.Load() != 2 || st.Unknown.Load() != 0 ||
		st.CASWon.Load() != 2*4+2*2+2*5 || h.crit.N.Load() != 0 {
		t.Fatalf("committed %d failed %d rolled back %d unknown %d CAS won %d criticals %d", st.Committed.Load(),
			st.Failed.Load(), st.RolledBack.Load(), st.Unknown.Load(), st.CASWon.Load(), h.crit.N.Load())
	}
	h.conserved(usdt)
}

// TestCoordinatorOnlyOnOneBatcher: a coordinator runs the one path or
// none: its FUNDING side is the ledger of its Store's Batcher (derived, not
// configured), so a FUNDING operation and the transitions around it are one
// transaction, with that Batcher's FUNDING faults injected inside it; an
// incomplete wiring is refused at construction.
func TestCoordinatorOnlyOnOneBatcher(t *testing.T) {
	h, _ := newBatchedHarness(t, BatchOptions{})
	sb := NewBatcher(h.pool, BatchOptions{})
	t.Cleanup(sb.Close)
	base := Config{Store: h.store, Spot: h.spotF, Assets: lookupAsset}
	if _, err := NewCoordinator(base); err != nil {
		t.Fatalf("the harness's wiring refused: %v", err)
	}
	for _, c := range []struct {
		name string
		mod  func(*Config)
	}{
		{"no Store", func(c *Config) { c.Store = nil }},
		{"no SPOT", func(c *Config) { c.Spot = nil }},
		{"no assets", func(c *Config) { c.Assets = nil }},
	} {
		cfg := base
		c.mod(&cfg)
		if _, err := NewCoordinator(cfg); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	if c := h.newCoordinator(func(c *Config) { c.Store = NewStore(sb) }); c.funding.b != sb {
		t.Fatal("the coordinator's FUNDING side is not on its Store's Batcher")
	}
	// The harness's FUNDING faults fire inside the fused transaction the
	// coordinator runs: an injected refusal of the withdraw is recorded in
	// the transaction that moves the transfer to FAILED.
	installHistory(t, h.pool)
	h.deposit(7, usdt, 1000)
	h.fundF.Inject(model.OpWithdraw, model.FaultExplicitFail, 1)
	r := h.create(h.coord, 7, "FUNDING", "SPOT", "USDT", "0.0001", "")
	if r.Transfer.State != Failed || h.fundF.Calls(model.OpWithdraw) != 1 {
		t.Fatalf("state %s after %d FUNDING withdraws, want FAILED after 1 (the injected refusal)", r.Transfer.State, h.fundF.Calls(model.OpWithdraw))
	}
	if _, txs := history(t, h.pool, r.Transfer.ReqID); txs != "a" {
		t.Fatalf("transactions %q: the refusal and FAILED are not one fused transaction", txs)
	}
	wantHistory(t, h.pool, r.Transfer.ReqID, "FAILED", "withdraw:EXPLICIT_FAIL(INJECTED)")
}

// fusedReq is a fused FUNDING->SPOT withdraw step of tr from state at.
func fusedReq(tr Transfer, at State) *batchReq {
	plan := &fusePlan{at: at, op: model.OpWithdraw, ok: []fuseCAS{{to: SourceDone}, {to: TargetPending}},
		fail: []fuseCAS{{to: Failed, msg: "source withdraw: ", outcome: true}}}
	if at == Init {
		plan.pre = []fuseCAS{{to: SourcePending}}
	}
	return &batchReq{kind: kindFused, reqID: tr.ReqID, op: model.OpWithdraw, user: tr.UserID, asset: tr.Asset, amount: tr.Amount, plan: plan}
}

// repeatReq repeats tr's FUNDING operation op alone, as a fused step with no
// transition at the state tr is in (opReq).
func repeatReq(tr Transfer, op model.Op) *batchReq {
	r := opReq(op, tr.ReqID, tr.UserID, tr.Asset, tr.Amount)
	r.plan.at = tr.State
	return r
}

func TestFusedLostInOneBatch(t *testing.T) {
	h := newHarness(t)
	installHistory(t, h.pool)
	h.deposit(7, usdt, 1000)
	x := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 100, Init)
	y := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 200, SourceDone)
	z := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 300, Init)
	w := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 5000, SourcePending)
	got := oneBatch(t, stoppedBatcher(t, h, BatchOptions{}),
		fusedReq(x, Init),          // wins: x to TARGET_PENDING, debited once
		fusedReq(x, Init),          // a racing driver: lost
		fusedReq(x, SourcePending), // lost too (the first fused step of x owns it)
		fusedReq(y, Init),          // y is elsewhere: lost, no effect
		&batchReq{kind: kindCAS, reqID: z.ReqID, from: Init, to: SourcePending}, // a CAS of another driver moves z first
		fusedReq(z, Init), // lost
		fusedReq(w, SourcePending),
	)
	type want struct {
		won   bool
		out   model.Outcome
		state State
		cas   int
	}
	for i, w := range []want{{true, model.OK(), TargetPending, 3}, {}, {}, {}, {won: true}, {},
		{true, model.Fail(model.CodeInsufficientBalance), Failed, 1}} {
		a := got[i]
		if a.err != nil || a.won != w.won || a.out != w.out || a.state != w.state || a.cas != w.cas {
			t.Errorf("request %d: %+v, want %+v", i, a, w)
		}
	}
	if b := h.fundingBalance(7, usdt); b != 900 {
		t.Fatalf("balance %d, want 900", b)
	}
	// A repeat of x's withdraw alone, in a later batch: the fused outcome.
	if rep := oneBatch(t, stoppedBatcher(t, h, BatchOptions{}), repeatReq(h.get(x.ReqID), model.OpWithdraw)); rep[0].out != model.OK() {
		t.Fatalf("repeat of x's withdraw: %+v, want the recorded SUCCESS", rep[0])
	}
	if b := h.fundingBalance(7, usdt); b != 900 {
		t.Fatalf("balance %d after the repeat, want 900", b)
	}
	for _, c := range []struct {
		tr         Transfer
		path, recs string
	}{
		{x, "INIT>TARGET_PENDING", "withdraw:SUCCESS"},
		{y, "INIT>SOURCE_DONE", ""},
		{z, "INIT>SOURCE_PENDING", ""},
		{w, "INIT>SOURCE_PENDING>FAILED", "withdraw:EXPLICIT_FAIL(INSUFFICIENT_BALANCE)"},
	} {
		wantHistory(t, h.pool, c.tr.ReqID, c.path, c.recs)
	}
	if m := h.get(w.ReqID).ErrorMessage; m != "source withdraw: EXPLICIT_FAIL(INSUFFICIENT_BALANCE)" {
		t.Errorf("error_message %q", m)
	}
}

// TestFusedRacingDrivers: two fused drivers on every transfer of every
// flow, through one or two batch writers (separate transactions then wait
// on each other's row locks): every state is taken once, every effect
// happens once.
func TestFusedRacingDrivers(t *testing.T) {
	for _, writers := range []int{1, 2} {
		t.Run(fmt.Sprintf("writers=%d", writers), func(t *testing.T) {
			h, _ := newFusedHarness(t, BatchOptions{Writers: writers})
			ctx := context.Background()
			type flow struct {
				name          string
				first         UserID
				from, to      model.AccountType
				setup         func(u UserID)
				want          State
				path          string // as recorded
				fsm           string // as the FSM made it (CASWon)
				funding, spot Units
				transfer      []Transfer
			}
			flows := []*flow{
				{name: "ok F->S", first: 1, from: model.AccountFunding, to: model.AccountSpot, want: Committed, path: fusedCommittedFS, fsm: pathCommitted,
					setup: func(u UserID) { h.deposit(u, usdt, 1000) }, funding: 900, spot: 100},
				{name: "ok S->F", first: 11, from: model.AccountSpot, to: model.AccountFunding, want: Committed, path: fusedCommittedSF, fsm: pathCommitted,
					setup: func(u UserID) { h.deposit(u, usdt, 1000); h.spot.Credit(u, usdt, 1000) }, funding: 1100, spot: 900},
				{name: "insufficient", first: 21, from: model.AccountFunding, to: model.AccountSpot, want: Failed, path: fusedFailedFS, fsm: pathFailed,
					setup: func(u UserID) { h.deposit(u, usdt, 50) }, funding: 50},
				{name: "disabled SPOT target", first: 41, from: model.AccountFunding, to: model.AccountSpot, want: RolledBack,
					path: fusedRolledBackFS, fsm: pathRolledBack, setup: func(u UserID) {
						h.deposit(u, usdt, 1000)
						h.spot.SetStatus(u, model.Disabled)
					}, funding: 1000},
				{name: "disabled FUNDING target", first: 51, from: model.AccountSpot, to: model.AccountFunding, want: RolledBack,
					path: fusedRolledBackSF, fsm: pathRolledBack, setup: func(u UserID) {
						h.deposit(u, usdt, 1000)
						h.spot.Credit(u, usdt, 1000)
						if err := h.funding.SetStatus(ctx, u, usdt, model.Disabled); err != nil {
							t.Fatal(err)
						}
					}, funding: 1000, spot: 1000},
			}
			for _, f := range flows {
				for u := f.first; u < f.first+6; u++ {
					f.setup(u)
					f.transfer = append(f.transfer, h.insertAt(u, f.from, f.to, usdt, 100, Init))
				}
			}
			drivers := []*Coordinator{h.fusedCoordinator(), h.fusedCoordinator()}
			var wg sync.WaitGroup
			for _, f := range flows {
				for _, tr := range f.transfer {
					for _, c := range drivers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
							defer cancel()
							if got, err := c.Drive(dctx, tr.ReqID); err != nil || got.State != f.want {
								t.Errorf("%s: drive %s: %s %v, want %s", f.name, tr.ReqID, got.State, err, f.want)
							}
						}()
					}
				}
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			var wantCAS, won int64
			for _, f := range flows {
				for _, tr := range f.transfer {
					p, _ := history(t, h.pool, tr.ReqID)
					if p != f.path {
						t.Errorf("%s: path %s, want %s", f.name, p, f.path)
					}
					wantCAS += int64(strings.Count(f.fsm, ">"))
					if fb, sb := h.fundingBalance(tr.UserID, usdt), h.spot.Balance(tr.UserID, usdt); fb != f.funding || sb != f.spot {
						t.Errorf("%s: user %d funding %d spot %d, want %d and %d", f.name, tr.UserID, fb, sb, f.funding, f.spot)
					}
				}
			}
			for _, c := range drivers {
				won += c.Stats().CASWon.Load()
			}
			if won != wantCAS {
				t.Fatalf("%d CAS won across the two drivers, want %d: every state change exactly once", won, wantCAS)
			}
			h.conserved(usdt)
		})
	}
}

// TestFusedRecoversEveryState leaves transfers in every state a crash may
// leave, or an earlier release that made each step a transaction of its
// own (with and without the call of that state made, explicit refusals
// included), then finishes them on the one path: each ends in the state
// its effects imply, with the funds moved exactly once (both sides'
// balances exact, one record per operation), nothing unknown, and the
// ledger conserved.
func TestFusedRecoversEveryState(t *testing.T) {
	type scenario struct {
		from    model.AccountType
		state   State
		effects []model.Op // made before the crash (refusals included)
		refuse  bool       // the target refuses (disabled)
		poor    bool       // the source holds too little
		want    State
	}
	var all []scenario
	for _, from := range []model.AccountType{model.AccountFunding, model.AccountSpot} {
		all = append(all,
			scenario{from: from, state: Init, want: Committed},
			scenario{from: from, state: SourcePending, want: Committed},
			scenario{from: from, state: SourcePending, effects: []model.Op{model.OpWithdraw}, want: Committed},
			scenario{from: from, state: SourcePending, poor: true, want: Failed},
			scenario{from: from, state: SourcePending, effects: []model.Op{model.OpWithdraw}, poor: true, want: Failed},
			scenario{from: from, state: SourceDone, effects: []model.Op{model.OpWithdraw}, want: Committed},
			scenario{from: from, state: SourceDone, effects: []model.Op{model.OpWithdraw}, refuse: true, want: RolledBack},
			scenario{from: from, state: TargetPending, effects: []model.Op{model.OpWithdraw}, want: Committed},
			scenario{from: from, state: TargetPending, effects: []model.Op{model.OpWithdraw, model.OpDeposit}, want: Committed},
			scenario{from: from, state: TargetPending, effects: []model.Op{model.OpWithdraw}, refuse: true, want: RolledBack},
			scenario{from: from, state: TargetPending, effects: []model.Op{model.OpWithdraw, model.OpDeposit}, refuse: true, want: RolledBack},
			scenario{from: from, state: Compensating, effects: []model.Op{model.OpWithdraw}, want: RolledBack},
			scenario{from: from, state: Compensating, effects: []model.Op{model.OpWithdraw, model.OpRefund}, want: RolledBack},
		)
	}
	h, _ := newFusedHarness(t, BatchOptions{})
	ids := ulid.NewGen()
	ctx := context.Background()
	type made struct {
		sc   scenario
		id   string
		user UserID
	}
	var transfers []made
	for i, sc := range all {
		id, err := ids.New()
		if err != nil {
			t.Fatal(err)
		}
		user := UserID(100 + i)
		to := model.AccountSpot
		if sc.from == model.AccountSpot {
			to = model.AccountFunding
		}
		{
			fund, spot := Units(1000), Units(1000)
			if sc.poor && sc.from == model.AccountFunding {
				fund = 50
			} else if sc.poor {
				spot = 50
			}
			h.deposit(user, usdt, fund)
			h.spot.Credit(user, usdt, spot)
			if sc.refuse && to == model.AccountSpot {
				h.spot.SetStatus(user, model.Disabled)
			} else if sc.refuse {
				if err := h.funding.SetStatus(ctx, user, usdt, model.Disabled); err != nil {
					t.Fatal(err)
				}
			}
			tr, _, err := h.store.Insert(ctx, Transfer{ReqID: id, UserID: user, From: sc.from, To: to, Asset: usdt, Amount: 100, State: Init})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.pool.Exec(ctx, `UPDATE transfers_tb SET state = $2 WHERE req_id = $1`, id, int16(sc.state)); err != nil {
				t.Fatal(err)
			}
			for _, op := range sc.effects {
				side, target := model.Side(h.funding), model.Side(h.spot)
				if sc.from == model.AccountSpot {
					side, target = h.spot, h.funding
				}
				if op == model.OpDeposit {
					side = target
				}
				call(ctx, side, op, tr) // the call made before the crash; a refusal is recorded too
			}
		}
		transfers = append(transfers, made{sc, id, user})
	}
	for _, m := range transfers {
		name := fmt.Sprintf("%s %s->? effects %v refuse %v poor %v", m.sc.state, m.sc.from, m.sc.effects, m.sc.refuse, m.sc.poor)
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		got, err := h.coord.Drive(dctx, m.id)
		cancel()
		if err != nil || got.State != m.sc.want {
			t.Fatalf("%s: %s %v, want %s (%s)", name, got.State, err, m.sc.want, got.ErrorMessage)
		}
		fund, spot := Units(1000), Units(1000) // as seeded, and after FAILED or ROLLED_BACK
		if m.sc.poor && m.sc.from == model.AccountFunding {
			fund = 50
		} else if m.sc.poor {
			spot = 50
		}
		if m.sc.want == Committed && m.sc.from == model.AccountFunding {
			fund, spot = fund-100, spot+100
		} else if m.sc.want == Committed {
			fund, spot = fund+100, spot-100
		}
		if gf, gs := h.fundingBalance(m.user, usdt), h.spot.Balance(m.user, usdt); gf != fund || gs != spot {
			t.Errorf("%s: FUNDING %d SPOT %d, want %d and %d (moved exactly once)", name, gf, gs, fund, spot)
		}
		if p, _ := history(t, h.pool, m.id); !strings.HasSuffix(p, m.sc.want.String()) {
			t.Errorf("%s: path %s", name, p)
		}
	}
	if st := h.coord.Stats(); st.Unknown.Load() != 0 || h.crit.N.Load() != 0 {
		t.Fatalf("%d unknown outcomes, %d criticals", st.Unknown.Load(), h.crit.N.Load())
	}
	h.conserved(usdt)
}

// TestFusedCreateRepeatedCID: Create inserts and makes the first move in
// one transaction; concurrent requests with one cid make one transfer and
// one set of effects, the others answer it as a duplicate.
func TestFusedCreateRepeatedCID(t *testing.T) {
	h, _ := newFusedHarness(t, BatchOptions{})
	h.deposit(9, usdt, 1000)
	h.spot.Credit(9, usdt, 1000)
	for _, dir := range [][2]string{{"FUNDING", "SPOT"}, {"SPOT", "FUNDING"}} {
		cid := "cid-" + dir[0]
		var wg sync.WaitGroup
		var mu sync.Mutex
		ids, dups := map[string]bool{}, 0
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := h.coord.Create(context.Background(), model.Caller{Authenticated: true, UserID: 9},
					model.Request{From: dir[0], To: dir[1], Asset: "USDT", Amount: "0.0001", CID: cid})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				ids[r.Transfer.ReqID] = true
				if r.Duplicate {
					dups++
				}
			}()
		}
		wg.Wait()
		if len(ids) != 1 || dups != 7 {
			t.Fatalf("%v: %d transfers, %d duplicates", dir, len(ids), dups)
		}
		for id := range ids {
			waitFor(t, "commit", func() bool { return h.get(id).State == Committed })
			want := fusedCommittedFS
			if dir[0] == "SPOT" {
				want = fusedCommittedSF
			}
			if p, _ := history(t, h.pool, id); p != want {
				t.Fatalf("%v: path %s", dir, p)
			}
		}
	}
	if f, s := h.fundingBalance(9, usdt), h.spot.Balance(9, usdt); f != 1000 || s != 1000 {
		t.Fatalf("funding %d spot %d, want 1000 each (one transfer each way)", f, s)
	}
	h.conserved(usdt)
}
