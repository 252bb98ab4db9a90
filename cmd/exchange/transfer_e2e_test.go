package main

// The internal-transfer acceptance tests of spec 000 §10 (FUNDING <-> SPOT,
// strict FSM), run against the real binary and a real Postgres database.
// Every §10 id is a subtest of TestTransfer named by its id:
//
//	go test -run 'TestTransfer/ATK-001' ./cmd/exchange/
//
// The tests that need no crash or special flags share one server (each uses
// its own users; faults are cleared before and after each); the crash
// tests, MON-003, CON-001 and the rate limits start their own servers on
// their own database. Every test checks exact balances of both sides and
// the answer's code and state; every test that moves funds also requires
// the server's conservation check (GET /admin/v1/invariants) to hold.
//
// Instruments: USDT scale 6 (min 0.01, max 10000000), BTC and ETH scale 8.
// The path a transfer took is read from a test-only trigger on transfers_tb
// (installHistory) that records every committed state change.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/pgtest"
)

const (
	F = "FUNDING"
	S = "SPOT"
)

// xflags returns xferFlags followed by extra (a fresh slice).
func xflags(extra ...string) []string {
	return append(append([]string(nil), xferFlags...), extra...)
}

// xferEnv is the server shared by the tests that do not crash it.
type xferEnv struct {
	owner *testing.T
	once  sync.Once
	s     *e2eServer
	pg    string
}

// shared returns a handle on the shared server (started on first use), with
// every fault cleared; at the test's end faults are cleared again.
func (e *xferEnv) shared(t *testing.T) *xt {
	e.once.Do(func() {
		pg := pgtest.NewDB(e.owner)
		s := e2eStart(e.owner, e.owner.TempDir(), pg, xflags("--invariant-interval", "1s")...)
		newXT(t, s, pg).installHistory()
		e.s, e.pg = s, pg
	})
	if e.s == nil {
		t.Fatal("the shared server did not start")
	}
	select {
	case <-e.s.exited:
		t.Fatalf("the shared server is gone:\n%s", e.s.Logs())
	default:
	}
	x := newXT(t, e.s, e.pg)
	x.clearFaults()
	t.Cleanup(func() {
		select {
		case <-e.s.exited:
		default:
			_, _, _ = e.s.tryDo("DELETE", "/admin/v1/faults", e.s.token(1, true), nil)
		}
	})
	return x
}

// crashXT starts a server of its own (own database and data dir) that the
// test may crash and restart.
func crashXT(t *testing.T, extra ...string) *xt {
	pg := pgtest.NewDB(t)
	dir := t.TempDir()
	flags := xflags(append([]string{"--invariant-interval", "1s"}, extra...)...)
	x := newXT(t, e2eStart(t, dir, pg, flags...), pg)
	x.dir, x.flags = dir, flags
	x.installHistory()
	return x
}

// restart starts the server again on the same data dir and database.
func (x *xt) restart() {
	x.Helper()
	x.use(e2eStart(x.T, x.dir, x.pg, x.flags...))
}

func TestTransfer(t *testing.T) {
	env := &xferEnv{owner: t}
	sh := func(f func(*xt)) func(*testing.T) {
		return func(t *testing.T) { f(env.shared(t)) }
	}
	// own: a test with servers of its own, run in parallel with the others
	// of its kind once the shared-server tests are done.
	own := func(f func(*testing.T)) func(*testing.T) {
		return func(t *testing.T) { t.Parallel(); f(t) }
	}
	tests := []struct {
		id string
		f  func(*testing.T)
	}{
		// 10.1 Fund conservation.
		{"INV-001", sh(invNormal)},
		{"INV-002", sh(invFailed)},
		{"INV-003", sh(invRollback)},
		{"INV-004", own(invCrash)},
		// 10.2 External attacks.
		{"ATK-001", sh(atkCrossUser)},
		{"ATK-002", sh(atkUserIDTampering)},
		{"ATK-003", sh(atkNegative)},
		{"ATK-004", sh(atkZero)},
		{"ATK-005", sh(atkPrecision)},
		{"ATK-006", sh(atkOverflow)},
		{"ATK-007", sh(atkSameAccount)},
		{"ATK-008", sh(atkInvalidAccountType)},
		{"ATK-009", sh(atkInvalidAsset)},
		{"ATK-010", sh(atkDuplicateCID)},
		{"ATK-011", sh(atkNoToken)},
		{"ATK-012", sh(atkExpiredToken)},
		{"ATK-013", sh(atkForgedToken)},
		// 10.3 Balance and status.
		{"BAL-001", sh(balInsufficient)},
		{"BAL-002", sh(balExact)},
		{"BAL-003", sh(balConcurrent)},
		{"BAL-004", sh(balFrozen)},
		{"BAL-005", sh(balDisabled)},
		// 10.4 FSM transitions.
		{"FSM-001", sh(fsmFundingToSpot)},
		{"FSM-002", sh(fsmSpotToFunding)},
		{"FSM-003", sh(fsmSourceFailure)},
		{"FSM-004", sh(fsmTargetFailure)},
		{"FSM-005", sh(fsmTargetTimeout)},
		{"FSM-006", sh(fsmCompensationFailure)},
		// 10.6 Concurrency.
		{"CON-002", sh(conSameAmount)},
		{"CON-003", sh(conTransferAndOrder)},
		{"CON-004", sh(conNoDoubleDeduction)},
		// 10.7 Idempotency.
		{"IDP-001", sh(idpWithdrawTwice)},
		{"IDP-002", sh(idpDepositTwice)},
		{"IDP-003", sh(idpRefundTwice)},
		{"IDP-004", sh(idpManyRetries)},
		// 10.8 Fund anomalies.
		{"FND-001", sh(fndDoubleSpend)},
		{"FND-002", sh(fndDisappearance)},
		{"FND-003", sh(fndMoneyFromNothing)},
		{"FND-006", sh(fndPartialCommit)},
		// 10.9 Monitoring.
		{"MON-001", sh(monStuck)},
		{"MON-002", sh(monCompensationFailing)},
		// Beyond the §10 ids: the remaining §1.5 checks.
		{"VALIDATION", sh(validationCodes)},
		{"RATE-LIMIT", rateLimits},
		// Own servers, in parallel.
		{"MON-003", own(monConservation)},
		{"ASSET-STATUS", own(assetStatus)},
		{"CON-001", own(conTwoProcesses)},
		{"CRA-001", own(craInit)},
		{"CRA-002", own(craSourcePendingBefore)},
		{"CRA-003", own(craSourcePendingAfter)},
		{"CRA-004", own(craSourceDone)},
		{"CRA-005", own(craTargetPending)},
		{"CRA-006", own(craCompensating)},
		{"FND-004", fndCrashAnyPoint},
		{"FND-005", own(fndWALParity)},
	}
	for _, c := range tests {
		t.Run(c.id, c.f)
	}
}

// --- 10.1 Fund conservation ---

// INV-001: after normal transfers both ways, FUNDING + SPOT is unchanged
// per asset, and the server's conservation check holds.
func invNormal(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "1000")
	x.deposit(u, "BTC", "2")
	x.wantBal(u, "USDT", 0, 1000_000000)
	x.commit(u, F, S, "USDT", "250.5")
	x.wantBal(u, "USDT", 250_500000, 749_500000)
	x.commit(u, S, F, "USDT", "100.25")
	x.wantBal(u, "USDT", 150_250000, 849_750000)
	x.commit(u, F, S, "BTC", "0.12345678")
	x.wantBal(u, "BTC", 12345678, 2_0000_0000-12345678)
	for asset, total := range map[string]int64{"USDT": 1000_000000, "BTC": 2_0000_0000} {
		b := x.bal(u)[asset]
		if b.Spot+b.Frozen+b.Funding != total {
			x.Fatalf("%s: spot %d + frozen %d + funding %d != %d", asset, b.Spot, b.Frozen, b.Funding, total)
		}
	}
	// The API's FUNDING balance is balances_tb's.
	if got := x.fundingRow(u, 1); got != 849_750000 {
		x.Fatalf("balances_tb USDT %d, want 849750000", got)
	}
	x.invariantOK()
}

// INV-002: a failed transfer moves nothing, whether refused by validation
// or by the source adapter (FAILED).
func invFailed(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "50")
	x.refused("more than available", u, xferBody(F, S, "USDT", "100.01"), 400, "INSUFFICIENT_BALANCE")

	x.inject("funding", "withdraw", "explicit_fail", 1)
	st, b := x.xfer(u, F, S, "USDT", "60")
	x.inFusedTransaction(wantFailed(x, "F->S, source refused", st, b, "FAILED", "INJECTED"), "withdraw")
	x.wantBal(u, "USDT", 50_000000, 100_000000)

	x.inject("spot", "withdraw", "explicit_fail", 1)
	st, b = x.xfer(u, S, F, "USDT", "20")
	wantFailed(x, "S->F, source refused", st, b, "FAILED", "INJECTED")
	x.wantBal(u, "USDT", 50_000000, 100_000000)
	x.invariantOK()
}

// wantFailed requires the answer of a transfer that ended FAILED or
// ROLLED_BACK: 400, the refusal's code, and the transfer's fields.
func wantFailed(x *xt, what string, st int, b map[string]any, state, code string) string {
	x.Helper()
	if st != 400 || b["code"] != code || b["state"] != state || b["failure_code"] != code {
		x.Fatalf("%s: got %d %v, want 400 %s %s", what, st, b, state, code)
	}
	if m, _ := b["message"].(string); m == "" {
		x.Fatalf("%s: no message: %v", what, b)
	}
	return reqIDOf(x.T, b)
}

// INV-003: after a rollback (target refused, source refunded) the source
// is fully restored, both directions.
func invRollback(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.inject("spot", "deposit", "explicit_fail", 1)
	st, b := x.xfer(u, F, S, "USDT", "40")
	r1 := wantFailed(x, "F->S, target refused", st, b, "ROLLED_BACK", "INJECTED")
	x.wantBal(u, "USDT", 0, 100_000000)
	if x.ops(r1, "withdraw", "SUCCESS") != 1 || x.ops(r1, "refund", "SUCCESS") != 1 {
		x.Fatalf("rollback %s: want one withdraw and one refund record", r1)
	}

	x.credit(u, "USDT", "70")
	x.inject("funding", "deposit", "explicit_fail", 1)
	st, b = x.xfer(u, S, F, "USDT", "30")
	wantFailed(x, "S->F, target refused", st, b, "ROLLED_BACK", "INJECTED")
	x.wantBal(u, "USDT", 70_000000, 100_000000)
	x.invariantOK()
}

// INV-004: several transfers in different states when the process is
// killed (one committed, one stuck in TARGET_PENDING, one stuck in
// COMPENSATING, one killed right after its SPOT deposit): after the
// restart every one finishes and every balance, and the total, is exact.
func invCrash(t *testing.T) {
	x := crashXT(t)
	a, b, c, d := x.user(), x.user(), x.user(), x.user()
	for _, u := range []uint64{a, b, c, d} {
		x.deposit(u, "USDT", "100")
	}
	x.credit(b, "USDT", "50")
	x.commit(a, F, S, "USDT", "30")

	// b: S->F stuck in TARGET_PENDING; c: F->S stuck in COMPENSATING.
	x.inject("funding", "deposit", "timeout_before_effect", 1_000_000)
	x.inject("spot", "deposit", "explicit_fail", 1)
	x.inject("funding", "refund", "network_error", 1_000_000)
	var wg sync.WaitGroup
	ans := make([]answer, 2)
	tb, tc := x.tok(b), x.tok(c)
	wg.Go(func() { ans[0] = x.post(tb, xferBody(S, F, "USDT", "20")) })
	wg.Go(func() { ans[1] = x.post(tc, xferBody(F, S, "USDT", "40")) })
	wg.Wait()
	if ans[0].st != 202 || ans[0].b["state"] != "TARGET_PENDING" || ans[1].st != 202 || ans[1].b["state"] != "COMPENSATING" {
		x.Fatalf("want 202 TARGET_PENDING and 202 COMPENSATING: %+v", ans)
	}
	rb, rc := reqIDOf(x.T, ans[0].b), reqIDOf(x.T, ans[1].b)
	total := func() int64 {
		var sum int64
		for _, u := range []uint64{a, b, c, d} {
			v := x.bal(u)["USDT"]
			sum += v.Spot + v.Frozen + v.Funding
		}
		return sum
	}
	// In flight: b's 20 left SPOT, c's 40 left FUNDING.
	if got := total(); got != 450_000000-60_000000 {
		x.Fatalf("total before the crash %d, want %d (60 in flight)", got, 450_000000-60_000000)
	}
	// d: killed right after its SPOT deposit took effect.
	x.inject("spot", "deposit", "crash_after", 1)
	x.postUntilCrash(d, F, S, "USDT", "25")
	rd := x.onlyTransfer(d)
	if st := x.dbState(rd); st != stTargetPending {
		x.Fatalf("d's transfer in state %d at the crash, want TARGET_PENDING", st)
	}
	x.restart()
	x.waitTerminal(b, rb, "COMMITTED")
	x.waitTerminal(c, rc, "ROLLED_BACK")
	x.waitTerminal(d, rd, "COMMITTED")
	x.wantBal(a, "USDT", 30_000000, 70_000000)
	x.wantBal(b, "USDT", 30_000000, 120_000000)
	x.wantBal(c, "USDT", 0, 100_000000)
	x.wantBal(d, "USDT", 25_000000, 75_000000)
	if got := total(); got != 450_000000 {
		x.Fatalf("total after recovery %d, want 450000000", got)
	}
	x.invariantOK()
}

// --- 10.2 External attacks ---

// noRows requires that the user has no transfer at all (refused requests
// must not create one).
func (x *xt) noRows(user uint64) {
	x.Helper()
	if n := x.queryInt(`SELECT count(*) FROM transfers_tb WHERE user_id = $1`, int64(user)); n != 0 {
		x.Fatalf("user %d has %d transfers after refused requests", user, n)
	}
}

// ATK-001: user A cannot move, or see, user B's funds.
func atkCrossUser(x *xt) {
	a, b := x.user(), x.user()
	x.deposit(a, "USDT", "100")
	x.deposit(b, "USDT", "1000")
	x.credit(b, "USDT", "500")
	x.refused("A's token, B's user_id, B's FUNDING", a, xferBody(F, S, "USDT", "500", "user_id", b), 403, "FORBIDDEN")
	x.refused("A's token, B's user_id, B's SPOT", a, xferBody(S, F, "USDT", "500", "user_id", b), 403, "FORBIDDEN")
	x.wantBal(b, "USDT", 500_000000, 1000_000000)
	x.noRows(a)
	x.noRows(b)

	// B's transfer is invisible to A.
	rb := reqIDOf(x.T, x.commit(b, F, S, "USDT", "10"))
	x.s.expect("A reads B's transfer", "GET", "/api/v1/internal_transfer/"+rb, x.tok(a), nil, 404, "TRANSFER_NOT_FOUND")
	st, la := x.s.do("GET", "/api/v1/internal_transfers?page=1&size=20", x.tok(a), nil)
	if st != 200 || la["total"] != float64(0) {
		x.Fatalf("A's list: %d %v", st, la)
	}
	st, lb := x.s.do("GET", "/api/v1/internal_transfers?page=1&size=20", x.tok(b), nil)
	list, _ := lb["transfers"].([]any)
	if st != 200 || lb["total"] != float64(1) || len(list) != 1 || list[0].(map[string]any)["req_id"] != rb {
		x.Fatalf("B's list: %d %v", st, lb)
	}
	x.wantBal(b, "USDT", 510_000000, 990_000000)
	x.wantBal(a, "USDT", 0, 100_000000)
	x.invariantOK()
}

// ATK-002: any user_id in the body other than the token's is FORBIDDEN;
// the token's own id is accepted.
func atkUserIDTampering(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	for _, v := range []string{fmt.Sprint(u + 1), fmt.Sprint(u - 1), "0", "-1", fmt.Sprint(u) + ".5",
		"18446744073709551616", "1" + fmt.Sprint(u)} {
		body := fmt.Sprintf(`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"10","user_id":%s}`, v)
		x.refused("user_id "+v, u, body, 403, "FORBIDDEN")
	}
	// A user_id of the wrong JSON type is refused too (schema error).
	before := x.bal(u)
	st, b := x.s.do("POST", "/api/v1/internal_transfer", x.tok(u),
		fmt.Sprintf(`{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":"10","user_id":"%d"}`, u+1))
	if st < 400 || st > 499 || b["code"] == nil {
		x.Fatalf("user_id as a string: %d %v", st, b)
	}
	if fmt.Sprint(x.bal(u)) != fmt.Sprint(before) {
		x.Fatal("a string user_id moved funds")
	}
	x.noRows(u)
	// The caller's own id is fine.
	x.commit(u, F, S, "USDT", "10", "user_id", u)
	x.wantBal(u, "USDT", 10_000000, 90_000000)
}

// atkAmounts requires every amount to be refused with code, both directions.
func atkAmounts(x *xt, code string, assets map[string][]string) {
	u := x.user()
	x.deposit(u, "USDT", "1000")
	x.deposit(u, "BTC", "10")
	x.credit(u, "USDT", "1000")
	x.credit(u, "BTC", "10")
	for asset, amounts := range assets {
		for _, a := range amounts {
			for _, dir := range [][2]string{{F, S}, {S, F}} {
				// As a JSON string; as the raw JSON number text it is a
				// type error (decimals are strings), refused all the same.
				x.refused(fmt.Sprintf("%s %s %s->%s", a, asset, dir[0], dir[1]), u, xferBody(dir[0], dir[1], asset, a), 400, code)
				if a != "" && !strings.ContainsAny(a, "abcdefghijklmnopqrstuvwxyz ") {
					raw := fmt.Sprintf(`{"from":%q,"to":%q,"asset":%q,"amount":%s}`, dir[0], dir[1], asset, a)
					x.refused("number "+raw, u, raw, 400, "INVALID_FIELD_TYPE")
				}
			}
		}
	}
	x.noRows(u)
}

// ATK-003: negative amounts are INVALID_AMOUNT.
func atkNegative(x *xt) {
	atkAmounts(x, "INVALID_AMOUNT", map[string][]string{"USDT": {"-100", "-0.01", "-1000000"}, "BTC": {"-0.00000001"}})
}

// ATK-004: zero amounts are INVALID_AMOUNT.
func atkZero(x *xt) {
	atkAmounts(x, "INVALID_AMOUNT", map[string][]string{"USDT": {"0", "0.0", "0.000000", "-0"}, "BTC": {"0.00000000"}})
}

// ATK-005: more decimals than the asset's precision is PRECISION_OVERFLOW.
func atkPrecision(x *xt) {
	atkAmounts(x, "PRECISION_OVERFLOW", map[string][]string{
		"BTC":  {"0.000000001", "1.000000001", "0.000010001"},
		"USDT": {"0.0000001", "100.1234567"},
	})
}

// ATK-006: u64::MAX + 1 (and beyond) is OVERFLOW, not a wrapped amount.
func atkOverflow(x *xt) {
	atkAmounts(x, "OVERFLOW", map[string][]string{
		"USDT": {"18446744073709551616", "18446744073709551615", "9223372036854775808", "99999999999999999999999999999999"},
		"BTC":  {"18446744073709551616", "184467440737.09551616"},
	})
}

// ATK-007: from == to is SAME_ACCOUNT.
func atkSameAccount(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	x.refused("SPOT->SPOT", u, xferBody(S, S, "USDT", "10"), 400, "SAME_ACCOUNT")
	x.refused("FUNDING->FUNDING", u, xferBody(F, F, "USDT", "10"), 400, "SAME_ACCOUNT")
	x.noRows(u)
}

// ATK-008: an account type outside the enum is INVALID_ACCOUNT_TYPE; a
// known but unlaunched one is UNSUPPORTED_ACCOUNT_TYPE.
func atkInvalidAccountType(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	for _, c := range [][2]string{{"INVALID", S}, {F, "INVALID"}, {"", S}, {F, ""}, {"FUNDING' OR '1'='1", S}, {"SPOT ", F}} {
		x.refused(fmt.Sprintf("from %q to %q", c[0], c[1]), u, xferBody(c[0], c[1], "USDT", "10"), 400, "INVALID_ACCOUNT_TYPE")
	}
	x.refused("from missing", u, xferBody(F, S, "USDT", "10", "from", nil), 400, "INVALID_ACCOUNT_TYPE")
	for _, c := range [][2]string{{"FUTURE", S}, {F, "MARGIN"}, {"MARGIN", F}, {S, "FUTURE"}} {
		x.refused(fmt.Sprintf("from %s to %s", c[0], c[1]), u, xferBody(c[0], c[1], "USDT", "10"), 400, "UNSUPPORTED_ACCOUNT_TYPE")
	}
	x.noRows(u)
}

// ATK-009: an asset that does not exist is INVALID_ASSET.
func atkInvalidAsset(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	for _, a := range []string{"999999", "DOGE", "", "usdt", "USDT-OLD"} {
		x.refused("asset "+a, u, xferBody(F, S, a, "10"), 400, "INVALID_ASSET")
		x.refused("asset "+a+" S->F", u, xferBody(S, F, a, "10"), 400, "INVALID_ASSET")
	}
	x.noRows(u)
}

// ATK-010: the same cid again answers the first transfer ("duplicate":
// true, same req_id) and moves nothing, also when sent concurrently and
// when the repeat carries other parameters.
func atkDuplicateCID(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	first := x.commit(u, F, S, "USDT", "30", "cid", "order-1")
	r1 := reqIDOf(x.T, first)
	if first["cid"] != "order-1" || first["duplicate"] == true {
		x.Fatalf("first answer: %v", first)
	}
	for _, amount := range []string{"30", "50"} {
		st, b := x.xfer(u, F, S, "USDT", amount, "cid", "order-1")
		if st != 200 || b["duplicate"] != true || b["req_id"] != r1 || b["transfer_id"] != first["transfer_id"] ||
			dec(x.T, b["amount"], 6) != 30_000000 || b["state"] != "COMMITTED" {
			x.Fatalf("repeat of cid order-1 (amount %s): %d %v", amount, st, b)
		}
	}
	x.wantBal(u, "USDT", 30_000000, 70_000000)

	// Eight concurrent first submissions of one cid: one transfer.
	tok := x.tok(u)
	ans := make([]answer, 8)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range ans {
		wg.Go(func() { <-start; ans[i] = x.post(tok, xferBody(F, S, "USDT", "20", "cid", "order-2")) })
	}
	close(start)
	wg.Wait()
	// The first answers the transfer; every repeat answers that same
	// transfer (202 while it is still moving).
	ids := map[string]bool{}
	dups := 0
	for _, a := range ans {
		dup := a.b["duplicate"] == true
		if dup {
			dups++
		}
		if (a.st != 200 || a.b["state"] != "COMMITTED") && !(dup && a.st == 202) {
			x.Fatalf("concurrent cid order-2: %+v", ans)
		}
		ids[a.b["req_id"].(string)] = true
	}
	if len(ids) != 1 || dups != len(ans)-1 {
		x.Fatalf("concurrent cid order-2: %d req_ids, %d duplicates: %+v", len(ids), dups, ans)
	}
	for r := range ids {
		x.waitTerminal(u, r, "COMMITTED")
	}
	x.wantBal(u, "USDT", 50_000000, 50_000000)
	if n := x.queryInt(`SELECT count(*) FROM transfers_tb WHERE user_id = $1`, int64(u)); n != 2 {
		x.Fatalf("%d transfers for two cids", n)
	}
	// Another user's cid of the same value is theirs, independent.
	v := x.user()
	x.deposit(v, "USDT", "10")
	if b := x.commit(v, F, S, "USDT", "5", "cid", "order-1"); b["req_id"] == r1 || b["duplicate"] == true {
		x.Fatalf("another user's cid order-1 answered with u's transfer: %v", b)
	}
	x.invariantOK()
}

// authRefused requires 401 UNAUTHORIZED with token on every transfer route,
// and that nothing moved.
func authRefused(x *xt, what, token string, victim uint64) {
	x.Helper()
	before := x.bal(victim)
	for _, body := range []map[string]any{xferBody(F, S, "USDT", "10"), xferBody(S, F, "USDT", "10")} {
		x.s.expect(what+" POST", "POST", "/api/v1/internal_transfer", token, body, 401, "UNAUTHORIZED")
	}
	x.s.expect(what+" GET one", "GET", "/api/v1/internal_transfer/"+newULID(x.T), token, nil, 401, "UNAUTHORIZED")
	x.s.expect(what+" GET list", "GET", "/api/v1/internal_transfers", token, nil, 401, "UNAUTHORIZED")
	if after := x.bal(victim); fmt.Sprint(after) != fmt.Sprint(before) {
		x.Fatalf("%s: balances moved: %v -> %v", what, before, after)
	}
	x.noRows(victim)
}

func atkVictim(x *xt) uint64 {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	return u
}

// ATK-011: no token (or an empty / malformed Authorization) is UNAUTHORIZED.
func atkNoToken(x *xt) {
	u := atkVictim(x)
	authRefused(x, "no token", "", u)
	authRefused(x, "malformed token", "not-a-jwt", u)
	authRefused(x, "three empty parts", "..", u)
}

// ATK-012: an expired token is UNAUTHORIZED.
func atkExpiredToken(x *xt) {
	u := atkVictim(x)
	expired, err := x.s.auth.Mint(u, false, time.Minute, time.Now().Add(-time.Hour))
	if err != nil {
		x.Fatal(err)
	}
	authRefused(x, "expired", expired, u)
	// Expired 10 s ago: beyond the 5 s clock-skew leeway.
	justExpired, err := x.s.auth.Mint(u, false, time.Minute, time.Now().Add(-70*time.Second))
	if err != nil {
		x.Fatal(err)
	}
	authRefused(x, "just expired", justExpired, u)
}

// ATK-013: a token with an invalid signature is UNAUTHORIZED: another
// secret, alg none, a payload swapped under a valid signature.
func atkForgedToken(x *xt) {
	u := atkVictim(x)
	other, err := gatewayAuthenticator("another-secret-0123456789abcdef0123456789")
	if err != nil {
		x.Fatal(err)
	}
	forged, _ := other.Mint(u, true, time.Hour, time.Now())
	authRefused(x, "other secret", forged, u)
	none := b64(`{"alg":"none","typ":"JWT"}`) + "." + b64(fmt.Sprintf(`{"sub":"%d","exp":%d}`, u, time.Now().Add(time.Hour).Unix())) + "."
	authRefused(x, "alg none", none, u)
	// A valid token of another user with u's id pasted into its payload.
	mallory := x.user()
	parts := strings.Split(x.tok(mallory), ".")
	if len(parts) != 3 {
		x.Fatalf("token %q", x.tok(mallory))
	}
	parts[1] = b64(fmt.Sprintf(`{"sub":"%d","exp":%d}`, u, time.Now().Add(time.Hour).Unix()))
	authRefused(x, "swapped payload", strings.Join(parts, "."), u)
	// A flipped signature byte.
	good := x.tok(u)
	flipped := []byte(good)
	i := len(flipped) - 2
	if flipped[i] == 'A' {
		flipped[i] = 'B'
	} else {
		flipped[i] = 'A'
	}
	authRefused(x, "flipped signature", string(flipped), u)
}

// --- 10.3 Balance and status ---

// BAL-001: amount > available is INSUFFICIENT_BALANCE and changes nothing.
func balInsufficient(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "10")
	x.refused("F->S 100.000001 of 100", u, xferBody(F, S, "USDT", "100.000001"), 400, "INSUFFICIENT_BALANCE")
	x.refused("S->F 10.000001 of 10", u, xferBody(S, F, "USDT", "10.000001"), 400, "INSUFFICIENT_BALANCE")
	x.refused("F->S BTC without any", u, xferBody(F, S, "BTC", "1"), 400, "INSUFFICIENT_BALANCE")
	x.refused("S->F BTC without any", u, xferBody(S, F, "BTC", "1"), 400, "INSUFFICIENT_BALANCE")
	x.wantBal(u, "USDT", 10_000000, 100_000000)
}

// BAL-002: amount == available succeeds and leaves exactly 0.
func balExact(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "123.456789")
	x.commit(u, F, S, "USDT", "123.456789")
	x.wantBal(u, "USDT", 123_456789, 0)
	if got := x.fundingRow(u, 1); got != 0 {
		x.Fatalf("balances_tb %d, want 0", got)
	}
	x.commit(u, S, F, "USDT", "123.456789")
	x.wantBal(u, "USDT", 0, 123_456789)
	x.commit(u, F, S, "USDT", "123.456789")
	x.refused("one more cent", u, xferBody(F, S, "USDT", "0.01"), 400, "INSUFFICIENT_BALANCE")
	x.wantBal(u, "USDT", 123_456789, 0)
	x.invariantOK()
}

// answer is one concurrent request's result.
type answer struct {
	st  int
	b   map[string]any
	err error
}

// post sends a transfer without failing on transport errors (safe off the
// test goroutine).
func (x *xt) post(token string, body any) answer {
	st, b, err := x.s.tryDo("POST", "/api/v1/internal_transfer", token, body)
	return answer{st, b, err}
}

// race sends n transfers of user at once and returns the answers.
func (x *xt) race(user uint64, n int, body func(i int) map[string]any) []answer {
	x.Helper()
	tok := x.tok(user)
	out := make([]answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { <-start; out[i] = x.post(tok, body(i)) })
	}
	close(start)
	wg.Wait()
	for _, a := range out {
		if a.err != nil {
			x.Fatalf("concurrent transfer: %v", a.err)
		}
	}
	return out
}

// tally counts COMMITTED answers and INSUFFICIENT_BALANCE refusals, and
// fails on anything else.
func (x *xt) tally(ans []answer) (ok, insufficient int) {
	x.Helper()
	for _, a := range ans {
		switch {
		case a.st == 200 && a.b["state"] == "COMMITTED":
			ok++
		case a.st == 400 && a.b["code"] == "INSUFFICIENT_BALANCE":
			insufficient++
		default:
			x.Fatalf("unexpected answer %d %v (all: %+v)", a.st, a.b, ans)
		}
	}
	return ok, insufficient
}

// BAL-003: two concurrent transfers whose total exceeds the balance: one
// succeeds, the other is INSUFFICIENT_BALANCE, both directions.
func balConcurrent(x *xt) {
	for round := 0; round < 3; round++ {
		u := x.user()
		x.deposit(u, "USDT", "100")
		ok, no := x.tally(x.race(u, 2, func(int) map[string]any { return xferBody(F, S, "USDT", "60") }))
		if ok != 1 || no != 1 {
			x.Fatalf("F->S 2 x 60 of 100: %d committed, %d insufficient", ok, no)
		}
		x.wantBal(u, "USDT", 60_000000, 40_000000)
		ok, no = x.tally(x.race(u, 2, func(int) map[string]any { return xferBody(S, F, "USDT", "40") }))
		if ok != 1 || no != 1 {
			x.Fatalf("S->F 2 x 40 of 60: %d committed, %d insufficient", ok, no)
		}
		x.wantBal(u, "USDT", 20_000000, 80_000000)
	}
	x.invariantOK()
}

// setStatus sets a FUNDING (asset "" = all of the user's) or SPOT account status.
func (x *xt) setStatus(side string, user uint64, asset, status string) {
	x.Helper()
	var st int
	var b map[string]any
	if side == F {
		body := map[string]any{"status": status}
		if asset != "" {
			body["asset"] = asset
		}
		st, b = x.s.do("POST", fmt.Sprintf("/admin/v1/funding/%d/status", user), x.admin, body)
	} else {
		st, b = x.s.do("POST", fmt.Sprintf("/admin/v1/accounts/%d/status", user), x.admin, map[string]any{"status": status})
	}
	if st != 200 {
		x.Fatalf("set %s status of %d to %s: %d %v", side, user, status, st, b)
	}
}

// balStatus: a FROZEN or DISABLED source refuses with code; a DISABLED
// target refuses too (rolled back or refused, never a loss); ACTIVE again
// works.
func balStatus(x *xt, status, code string) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")

	x.setStatus(F, u, "USDT", status)
	if got := x.bal(u)["USDT"].Status; got != status {
		x.Fatalf("FUNDING status shown %q, want %s", got, status)
	}
	x.refused("F->S from a "+status+" FUNDING account", u, xferBody(F, S, "USDT", "10"), 400, code)
	if status == "DISABLED" {
		x.refused("S->F into a DISABLED FUNDING account", u, xferBody(S, F, "USDT", "10"), 400, code)
	}
	x.setStatus(F, u, "USDT", "ACTIVE")
	x.setStatus(F, u, "", status) // every asset of the user
	x.refused("F->S from a "+status+" FUNDING account (all assets)", u, xferBody(F, S, "USDT", "10"), 400, code)
	x.setStatus(F, u, "", "ACTIVE")
	x.commit(u, F, S, "USDT", "10")

	x.setStatus(S, u, "", status)
	x.refused("S->F from a "+status+" SPOT account", u, xferBody(S, F, "USDT", "10"), 400, code)
	if status == "DISABLED" {
		x.refused("F->S into a DISABLED SPOT account", u, xferBody(F, S, "USDT", "10"), 400, code)
	}
	x.setStatus(S, u, "", "ACTIVE")
	x.commit(u, S, F, "USDT", "10")
	x.wantBal(u, "USDT", 100_000000, 100_000000)
	x.invariantOK()
}

// BAL-004: transfers out of a frozen account are ACCOUNT_FROZEN.
func balFrozen(x *xt) { balStatus(x, "FROZEN", "ACCOUNT_FROZEN") }

// BAL-005: transfers out of (and into) a disabled account are ACCOUNT_DISABLED.
func balDisabled(x *xt) { balStatus(x, "DISABLED", "ACCOUNT_DISABLED") }

// --- 10.4 FSM transitions ---

var (
	flowCommitted  = []string{"INIT", "SOURCE_PENDING", "SOURCE_DONE", "TARGET_PENDING", "COMMITTED"}
	flowRolledBack = []string{"INIT", "SOURCE_PENDING", "SOURCE_DONE", "TARGET_PENDING", "COMPENSATING", "ROLLED_BACK"}
	flowFailed     = []string{"INIT", "SOURCE_PENDING", "FAILED"}
)

// checkAnswer requires the §8 fields of a COMMITTED answer and that GET
// returns the same transfer.
func (x *xt) checkCommitted(user uint64, b map[string]any) string {
	x.Helper()
	r := reqIDOf(x.T, b)
	if b["retry_count"] != float64(0) || b["error_message"] != nil || b["transfer_id"] == nil ||
		b["created_at"] == nil || b["updated_at"] == nil {
		x.Fatalf("committed answer fields: %v", b)
	}
	created, err1 := time.Parse(time.RFC3339Nano, b["created_at"].(string))
	updated, err2 := time.Parse(time.RFC3339Nano, b["updated_at"].(string))
	if err1 != nil || err2 != nil || updated.Before(created) {
		x.Fatalf("timestamps %v %v", b["created_at"], b["updated_at"])
	}
	g := x.get(user, r)
	for _, k := range []string{"transfer_id", "req_id", "from", "to", "asset", "amount", "state", "state_id", "user_id"} {
		if fmt.Sprint(g[k]) != fmt.Sprint(b[k]) {
			x.Fatalf("GET %s: %s %v, POST said %v", r, k, g[k], b[k])
		}
	}
	return r
}

// FSM-001: FUNDING->SPOT goes INIT > SOURCE_PENDING > SOURCE_DONE >
// TARGET_PENDING > COMMITTED (read from the committed state changes).
func fsmFundingToSpot(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	r := x.checkCommitted(u, x.commit(u, F, S, "USDT", "40.5"))
	x.wantFlow(r, flowCommitted...)
	if x.ops(r, "withdraw", "SUCCESS") != 1 || x.ops(r, "refund", "SUCCESS") != 0 {
		x.Fatalf("%s: want exactly one FUNDING withdraw record", r)
	}
	// A JSON number amount is a type error, as on every endpoint but spec
	// 003's (decimals are strings): refused, nothing moves.
	x.refused("number amount", u, xferBody(F, S, "USDT", json.Number("9.5")), 400, "INVALID_FIELD_TYPE")
	x.commit(u, F, S, "USDT", "9.5")
	x.wantBal(u, "USDT", 50_000000, 50_000000)
	x.invariantOK()
}

// FSM-002: SPOT->FUNDING takes the same path.
func fsmSpotToFunding(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "1")
	x.credit(u, "USDT", "100")
	r := x.checkCommitted(u, x.commit(u, S, F, "USDT", "60.000001"))
	x.wantFlow(r, flowCommitted...)
	if x.ops(r, "deposit", "SUCCESS") != 1 {
		x.Fatalf("%s: want exactly one FUNDING deposit record", r)
	}
	x.wantBal(u, "USDT", 39_999999, 61_000001)
	x.invariantOK()
}

// FSM-003: a source refusal goes INIT > SOURCE_PENDING > FAILED, nothing moved.
func fsmSourceFailure(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	x.inject("funding", "withdraw", "explicit_fail", 1)
	st, b := x.xfer(u, F, S, "USDT", "10")
	r1 := wantFailed(x, "F->S source refused", st, b, "FAILED", "INJECTED")
	x.wantFlow(r1, flowFailed...)
	if m, _ := b["error_message"].(string); !strings.Contains(m, "INJECTED") {
		x.Fatalf("error_message %q", m)
	}
	x.inject("spot", "withdraw", "explicit_fail", 1)
	st, b = x.xfer(u, S, F, "USDT", "10")
	r2 := wantFailed(x, "S->F source refused", st, b, "FAILED", "INJECTED")
	x.wantFlow(r2, flowFailed...)
	for _, r := range []string{r1, r2} {
		if g := x.get(u, r); g["state"] != "FAILED" || g["state_id"] != float64(stFailed) || g["failure_code"] != "INJECTED" {
			x.Fatalf("GET %s: %v", r, g)
		}
	}
	// A FUNDING refusal (injected below the fused path) is recorded as
	// refusals are: EXPLICIT_FAIL, no effect.
	if n := x.queryInt(`SELECT count(*) FROM transfer_operations WHERE (req_id = $1 OR req_id = $2) AND result <> 'EXPLICIT_FAIL'`, r1, r2); n != 0 {
		x.Fatalf("%d FUNDING operations took effect for refused transfers", n)
	}
	x.wantBal(u, "USDT", 100_000000, 100_000000)
	x.invariantOK()
}

// FSM-004: an explicit target refusal goes ... > TARGET_PENDING >
// COMPENSATING > ROLLED_BACK and the source is restored.
func fsmTargetFailure(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	x.inject("spot", "deposit", "explicit_fail", 1)
	st, b := x.xfer(u, F, S, "USDT", "10")
	r1 := wantFailed(x, "F->S target refused", st, b, "ROLLED_BACK", "INJECTED")
	x.wantFlow(r1, flowRolledBack...)
	x.wantBal(u, "USDT", 100_000000, 100_000000)
	x.inject("funding", "deposit", "explicit_fail", 1)
	st, b = x.xfer(u, S, F, "USDT", "10")
	r2 := wantFailed(x, "S->F target refused", st, b, "ROLLED_BACK", "INJECTED")
	x.wantFlow(r2, flowRolledBack...)
	if g := x.get(u, r2); g["state"] != "ROLLED_BACK" || g["state_id"] != float64(stRolledBack) {
		x.Fatalf("GET %s: %v", r2, g)
	}
	x.wantBal(u, "USDT", 100_000000, 100_000000)
	x.invariantOK()
}

// stays polls a transfer until its retry_count passes min, requiring it
// to stay in state meanwhile (an unknown outcome never moves it).
func (x *xt) stays(user uint64, reqID, state string, min int) map[string]any {
	x.Helper()
	return x.waitFor(user, reqID, fmt.Sprintf("retried %d times in %s", min, state), 20*time.Second, func(b map[string]any) bool {
		if b["state"] != state {
			x.Fatalf("transfer %s left %s on an unknown outcome: %v", reqID, state, b)
		}
		return b["retry_count"].(float64) >= float64(min)
	})
}

// postPair sends two transfers concurrently (the coordinator answers
// non-terminal ones after ~2 s) and returns the answers.
func (x *xt) postPair(u1 uint64, b1 map[string]any, u2 uint64, b2 map[string]any) (answer, answer) {
	x.Helper()
	t1, t2 := x.tok(u1), x.tok(u2)
	var a1, a2 answer
	var wg sync.WaitGroup
	wg.Go(func() { a1 = x.post(t1, b1) })
	wg.Go(func() { a2 = x.post(t2, b2) })
	wg.Wait()
	if a1.err != nil || a2.err != nil {
		x.Fatalf("post: %v %v", a1.err, a2.err)
	}
	return a1, a2
}

func (x *xt) want202(what string, a answer, state string) string {
	x.Helper()
	if a.st != 202 || a.b["state"] != state {
		x.Fatalf("%s: got %d %v, want 202 %s", what, a.st, a.b, state)
	}
	return reqIDOf(x.T, a.b)
}

// FSM-005: a target that times out (or fails on the network) keeps the
// transfer in TARGET_PENDING, retried without end and never compensated;
// once the target answers, it commits.
func fsmTargetTimeout(x *xt) {
	u1, u2 := x.user(), x.user()
	x.deposit(u1, "USDT", "100")
	x.deposit(u2, "USDT", "100")
	x.credit(u2, "USDT", "100")
	x.inject("spot", "deposit", "timeout_before_effect", 1_000_000)
	x.inject("funding", "deposit", "network_error", 1_000_000)
	a1, a2 := x.postPair(u1, xferBody(F, S, "USDT", "30"), u2, xferBody(S, F, "USDT", "30"))
	r1 := x.want202("F->S target timeout", a1, "TARGET_PENDING")
	r2 := x.want202("S->F target network error", a2, "TARGET_PENDING")
	// Funds in flight: out of the source, not in the target.
	x.wantBal(u1, "USDT", 0, 70_000000)
	x.wantBal(u2, "USDT", 70_000000, 100_000000)
	g1 := x.stays(u1, r1, "TARGET_PENDING", 3)
	g2 := x.stays(u2, r2, "TARGET_PENDING", 3)
	n1 := int(g1["retry_count"].(float64))
	x.stays(u1, r1, "TARGET_PENDING", n1+1) // the recovery worker keeps retrying after the request returned
	if m, _ := g1["error_message"].(string); !strings.Contains(m, "TIMEOUT") {
		x.Fatalf("error_message %q, want the TIMEOUT", m)
	}
	if m, _ := g2["error_message"].(string); !strings.Contains(m, "NETWORK_ERROR") {
		x.Fatalf("error_message %q, want the NETWORK_ERROR", m)
	}
	x.wantFlow(r1, flowCommitted[:4]...)
	x.wantFlow(r2, flowCommitted[:4]...)
	x.invariantOK() // in flight is accounted for
	x.clearFaults()
	x.waitTerminal(u1, r1, "COMMITTED")
	x.waitTerminal(u2, r2, "COMMITTED")
	x.wantFlow(r1, flowCommitted...)
	x.wantFlow(r2, flowCommitted...)
	x.wantBal(u1, "USDT", 30_000000, 70_000000)
	x.wantBal(u2, "USDT", 70_000000, 130_000000)
	x.invariantOK()
}

// FSM-006: a refund that keeps failing keeps the transfer in COMPENSATING,
// retried without end; once the source answers, it is ROLLED_BACK.
func fsmCompensationFailure(x *xt) {
	u1, u2 := x.user(), x.user()
	x.deposit(u1, "USDT", "100")
	x.deposit(u2, "USDT", "100")
	x.credit(u2, "USDT", "100")
	x.inject("spot", "deposit", "explicit_fail", 1)
	x.inject("funding", "refund", "timeout_before_effect", 1_000_000)
	x.inject("funding", "deposit", "explicit_fail", 1)
	x.inject("spot", "refund", "network_error", 1_000_000)
	a1, a2 := x.postPair(u1, xferBody(F, S, "USDT", "30"), u2, xferBody(S, F, "USDT", "30"))
	r1 := x.want202("F->S refund timeout", a1, "COMPENSATING")
	r2 := x.want202("S->F refund network error", a2, "COMPENSATING")
	x.wantBal(u1, "USDT", 0, 70_000000)
	x.wantBal(u2, "USDT", 70_000000, 100_000000)
	g := x.stays(u1, r1, "COMPENSATING", 3)
	x.stays(u2, r2, "COMPENSATING", 3)
	x.stays(u1, r1, "COMPENSATING", int(g["retry_count"].(float64))+1)
	x.wantFlow(r1, flowRolledBack[:5]...)
	x.wantFlow(r2, flowRolledBack[:5]...)
	if x.ops(r1, "refund", "SUCCESS") != 0 {
		x.Fatal("a refund recorded while every refund call failed before its effect")
	}
	x.invariantOK()
	x.clearFaults()
	// The refusal that decided the rollback stays the transfer's failure
	// code, however many refund retries came after it.
	for _, c := range []struct {
		u uint64
		r string
	}{{u1, r1}, {u2, r2}} {
		if g := x.waitTerminal(c.u, c.r, "ROLLED_BACK"); g["failure_code"] != "INJECTED" {
			x.Errorf("%s rolled back after refund retries: failure_code %v, want INJECTED (the target's refusal): %v", c.r, g["failure_code"], g)
		}
	}
	x.wantFlow(r1, flowRolledBack...)
	x.wantFlow(r2, flowRolledBack...)
	if x.ops(r1, "refund", "SUCCESS") != 1 {
		x.Fatal("want one refund record")
	}
	x.wantBal(u1, "USDT", 0, 100_000000)
	x.wantBal(u2, "USDT", 100_000000, 100_000000)
	x.invariantOK()
}

// --- 10.5 Crash recovery ---

// crashPoint is a crash injected at one adapter call. On the fused path a
// FUNDING call is a fused step: its transitions and its effect commit in
// ONE transaction, so a FUNDING crash_before dies before that COMMIT
// (nothing of the step is durable: a transfer inserted by it does not
// exist) and a crash_after dies after it (the step's last state durable).
type crashPoint struct {
	from, to          string
	adapter, op, mode string // the call that kills the process, crash_before or crash_after
	targetFail        bool   // refuse the target deposit first, so the crash is in the refund
	atState           int    // transfers_tb.state when the process died; stNone: no transfer at all
	want              string // the terminal state after the restart ("": COMMITTED, ROLLED_BACK with targetFail)
	edit              func(x *xt, reqID string)
}

// stNone is crashPoint.atState of a crash before the COMMIT that would
// have inserted the transfer: it never existed.
const stNone = 99

func (p crashPoint) String() string {
	return fmt.Sprintf("%s->%s %s %s %s", p.from, p.to, p.adapter, p.op, p.mode)
}

// terminal is the state the transfer must end in after the restart.
func (p crashPoint) terminal() string {
	switch {
	case p.want != "":
		return p.want
	case p.targetFail:
		return "ROLLED_BACK"
	}
	return "COMMITTED"
}

// moved is how much of the 25 USDT ends in the target (0 if nothing moved).
func (p crashPoint) moved() int64 {
	if p.atState == stNone || p.terminal() != "COMMITTED" {
		return 0
	}
	return 25_000000
}

// runCrash makes a user with 100 USDT on both sides, transfers 25 with the
// crash armed, checks the database at the moment of death (state, FUNDING
// balance agreeing with the FUNDING records), restarts, and requires the
// transfer to finish exactly once (COMMITTED, or ROLLED_BACK for refund
// points) with exact balances, an FSM path that is the spec's with only
// the states the fused path keeps inside one transaction left out, and
// the invariant holding. A crash before the COMMIT that inserts the
// transfer leaves none: nothing moved, nothing moves after the restart.
func (x *xt) runCrash(p crashPoint) (uint64, string) {
	x.Helper()
	x.Logf("crash point %s", p)
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	const amt = 25_000000
	if p.targetFail {
		target := "spot"
		if p.to == F {
			target = "funding"
		}
		x.inject(target, "deposit", "explicit_fail", 1)
	}
	x.inject(p.adapter, p.op, p.mode, 1)
	x.postUntilCrash(u, p.from, p.to, "USDT", "25")

	if p.atState == stNone {
		if n := x.queryInt(`SELECT count(*) FROM transfers_tb WHERE user_id = $1`, int64(u)); n != 0 {
			x.Fatalf("%s: %d transfers after a crash before the COMMIT that inserts one", p, n)
		}
		if n := x.queryInt(`SELECT count(*) FROM transfer_operations WHERE user_id = $1`, int64(u)); n != 0 {
			x.Fatalf("%s: %d FUNDING records after a crash before their COMMIT", p, n)
		}
		x.restart()
		x.wantBal(u, "USDT", 100_000000, 100_000000)
		x.invariantOK()
		return u, ""
	}
	r := x.onlyTransfer(u)
	if st := x.dbState(r); st != p.atState {
		x.Fatalf("%s: state %d when the process died, want %d", p, st, p.atState)
	}
	// FUNDING is one transaction per operation: the balance moved exactly
	// by the operations recorded, whatever the crash point.
	w, d, rf := x.ops(r, "withdraw", "SUCCESS"), x.ops(r, "deposit", "SUCCESS"), x.ops(r, "refund", "SUCCESS")
	if got, want := x.fundingRow(u, 1), 100_000000-amt*w+amt*d+amt*rf; got != want {
		x.Fatalf("%s: balances_tb %d but the records say %d (withdraw %d deposit %d refund %d)", p, got, want, w, d, rf)
	}
	if p.adapter == "funding" {
		n := x.ops(r, p.op, "SUCCESS")
		if (p.mode == "crash_before") != (n == 0) {
			x.Fatalf("%s: %d %s records at the crash", p, n, p.op)
		}
	}
	if p.edit != nil {
		p.edit(x, r)
	} else {
		x.neverDurable(r, "SOURCE_DONE") // the fused path never commits it
	}
	x.restart()
	want, flow := p.terminal(), flowCommitted
	if want == "ROLLED_BACK" {
		flow = flowRolledBack
	}
	x.waitTerminal(u, r, want)
	x.wantFlow(r, flow...)
	switch {
	case want == "ROLLED_BACK":
		x.wantBal(u, "USDT", 100_000000, 100_000000)
	case p.from == F:
		x.wantBal(u, "USDT", 100_000000+amt, 100_000000-amt)
	default:
		x.wantBal(u, "USDT", 100_000000-amt, 100_000000+amt)
	}
	if p.from == F {
		if x.ops(r, "withdraw", "SUCCESS") != 1 {
			x.Fatalf("%s: want one FUNDING withdraw record", p)
		}
		if n := x.ops(r, "refund", "SUCCESS"); (n == 1) != (want == "ROLLED_BACK") || n > 1 {
			x.Fatalf("%s: %d FUNDING refund records", p, n)
		}
	} else if n := x.ops(r, "deposit", "SUCCESS"); (n == 1) != (want == "COMMITTED") || n > 1 {
		x.Fatalf("%s: %d FUNDING deposit records", p, n)
	}
	x.invariantOK()
	return u, r
}

// CRA-001: a transfer persisted in INIT whose process died before the
// SOURCE_PENDING CAS is resumed from INIT. No adapter fault can stop the
// process between the INSERT and that CAS (on the fused path a transfer
// without a cid is not even inserted in INIT: its row is born in the state
// its first fused step ends in), so the test makes that state itself:
// with the server stopped it inserts transfers_tb rows in state 0 (fresh
// ULIDs, both directions), as a crash of an earlier version could leave
// them. The crash before and after the first fused COMMIT is CRA-002/003;
// here a transfer made after the restart is shown never to have had INIT
// or SOURCE_DONE durable.
func craInit(t *testing.T) {
	x := crashXT(t)
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "50")
	x.s.Kill()
	r1, r2 := newULID(t), newULID(t)
	ins := `INSERT INTO transfers_tb (req_id, user_id, asset_id, amount, transfer_type, source_type, from_account, to_account, state)
		VALUES ($1, $2, 1, $3, $4, $4, $5, $6, 0)`
	x.exec(ins, r1, int64(u), int64(30_000000), 1, F, S)
	x.exec(ins, r2, int64(u), int64(20_000000), 2, S, F)
	x.restart()
	x.waitTerminal(u, r1, "COMMITTED")
	x.waitTerminal(u, r2, "COMMITTED")
	x.wantFlow(r1, flowCommitted...)
	x.wantFlow(r2, flowCommitted...)
	x.wantBal(u, "USDT", 60_000000, 90_000000)
	for _, dir := range [][2]string{{F, S}, {S, F}} {
		r := x.commit(u, dir[0], dir[1], "USDT", "1")
		x.neverDurable(reqIDOf(x.T, r), "INIT", "SOURCE_DONE")
	}
	x.invariantOK()
}

// CRA-002: killed in SOURCE_PENDING before the source call: the call is
// made on recovery, once. A FUNDING source's call is the transfer's first
// fused step: killed before its COMMIT, the transfer was never inserted and
// nothing moved.
func craSourcePendingBefore(t *testing.T) {
	x := crashXT(t)
	x.runCrash(crashPoint{from: F, to: S, adapter: "funding", op: "withdraw", mode: "crash_before", atState: stNone})
	x.runCrash(crashPoint{from: S, to: F, adapter: "spot", op: "withdraw", mode: "crash_before", atState: stSourcePending})
}

// CRA-003: killed after the source call took effect: the repeat on
// recovery is answered from the adapter's record, nothing twice. A FUNDING
// source's withdraw commits with SOURCE_DONE and TARGET_PENDING.
func craSourcePendingAfter(t *testing.T) {
	x := crashXT(t)
	x.runCrash(crashPoint{from: F, to: S, adapter: "funding", op: "withdraw", mode: "crash_after", atState: stTargetPending})
	x.runCrash(crashPoint{from: S, to: F, adapter: "spot", op: "withdraw", mode: "crash_after", atState: stSourcePending})
}

// CRA-004: SOURCE_DONE. On the fused path it is never durable: it exists
// only inside the fused transaction of the FUNDING call next to it (the
// FUNDING withdraw of FUNDING->SPOT, the FUNDING deposit of SPOT->FUNDING).
// Killed before and after each of those COMMITs, the transfer is found
// where the last COMMIT left it, never in SOURCE_DONE (runCrash checks the
// state history), and ends COMMITTED exactly once. A row left in
// SOURCE_DONE by an earlier version (moved there by hand, the server
// down, after the SPOT withdraw took effect) is recovered too.
func craSourceDone(t *testing.T) {
	x := crashXT(t)
	toSourceDone := func(x *xt, r string) {
		if n := x.exec(`UPDATE transfers_tb SET state = 20, updated_at = now() WHERE req_id = $1 AND state = 10`, r); n != 1 {
			x.Fatalf("move %s to SOURCE_DONE: %d rows", r, n)
		}
	}
	x.runCrash(crashPoint{from: F, to: S, adapter: "funding", op: "withdraw", mode: "crash_before", atState: stNone})
	x.runCrash(crashPoint{from: F, to: S, adapter: "funding", op: "withdraw", mode: "crash_after", atState: stTargetPending})
	x.runCrash(crashPoint{from: S, to: F, adapter: "funding", op: "deposit", mode: "crash_before", atState: stSourcePending})
	x.runCrash(crashPoint{from: S, to: F, adapter: "funding", op: "deposit", mode: "crash_after", atState: stCommitted})
	x.runCrash(crashPoint{from: S, to: F, adapter: "spot", op: "withdraw", mode: "crash_after", atState: stSourcePending, edit: toSourceDone})
}

// CRA-005: killed in TARGET_PENDING, before or after the target call: the
// deposit is made, once. A FUNDING target's deposit commits with the
// transitions around it: before its COMMIT the transfer is still where the
// SPOT withdraw left it, after it COMMITTED.
func craTargetPending(t *testing.T) {
	x := crashXT(t)
	x.runCrash(crashPoint{from: F, to: S, adapter: "spot", op: "deposit", mode: "crash_before", atState: stTargetPending})
	x.runCrash(crashPoint{from: F, to: S, adapter: "spot", op: "deposit", mode: "crash_after", atState: stTargetPending})
	x.runCrash(crashPoint{from: S, to: F, adapter: "funding", op: "deposit", mode: "crash_after", atState: stCommitted})
}

// CRA-006: killed in COMPENSATING, before or after the refund: the refund
// is made, once. A FUNDING refund commits with COMPENSATING and
// ROLLED_BACK: killed after it, the transfer is ROLLED_BACK.
func craCompensating(t *testing.T) {
	x := crashXT(t)
	x.runCrash(crashPoint{from: F, to: S, adapter: "funding", op: "refund", mode: "crash_after", targetFail: true, atState: stRolledBack})
	x.runCrash(crashPoint{from: S, to: F, adapter: "spot", op: "refund", mode: "crash_before", targetFail: true, atState: stCompensating})
}

// --- 10.6 Concurrency ---

// CON-001: several drivers on one req_id, in two processes. Server A's
// SPOT->FUNDING transfers are stuck in TARGET_PENDING (FUNDING deposit
// timing out); A is killed, and two processes start at once on the same
// database: A again (its data dir) and B (a data dir of its own; the
// FUNDING target is in the shared Postgres). Both recovery workers find the
// same stale transfers at start and drive them concurrently. Each transfer
// changes TARGET_PENDING -> COMMITTED exactly once (the trigger's record),
// its FUNDING deposit takes effect once, and the two processes together
// count exactly one commit per transfer: the other drivers' CAS lost.
func conTwoProcesses(t *testing.T) {
	x := crashXT(t)
	const users, per = 4, 15
	us := make([]uint64, users)
	for i := range us {
		us[i] = x.user()
		x.deposit(us[i], "USDT", "1")
		x.credit(us[i], "USDT", "100")
	}
	x.inject("funding", "deposit", "timeout_before_effect", 1_000_000)
	type stuck struct {
		u uint64
		r string
	}
	ans := make([]answer, users*per)
	var posts sync.WaitGroup
	for i := range ans {
		tok := x.tok(us[i%users])
		posts.Go(func() { ans[i] = x.post(tok, xferBody(S, F, "USDT", "2")) })
	}
	posts.Wait()
	var all []stuck
	for i, a := range ans {
		all = append(all, stuck{us[i%users], x.want202(fmt.Sprintf("stuck S->F #%d", i), a, "TARGET_PENDING")})
	}
	x.s.Kill()
	time.Sleep(1200 * time.Millisecond) // every transfer is stale for both workers at their first scan
	var a, b *e2eServer
	var wg sync.WaitGroup
	wg.Go(func() { a = e2eStart(t, x.dir, x.pg, x.flags...) })
	wg.Go(func() { b = e2eStart(t, t.TempDir(), x.pg, xflags("--invariant-interval", "0")...) })
	wg.Wait()
	if a == nil || b == nil {
		t.FailNow()
	}
	x.use(a)
	for _, s := range all {
		x.waitTerminal(s.u, s.r, "COMMITTED")
	}
	for _, s := range all {
		x.wantFlow(s.r, flowCommitted...)
		if x.ops(s.r, "deposit", "SUCCESS") != 1 {
			x.Fatalf("%s: want one FUNDING deposit record", s.r)
		}
	}
	for _, u := range us {
		x.wantBal(u, "USDT", 100_000000-per*2_000000, 1_000000+per*2_000000)
	}
	ca, cb := a.with(t).metric("ubs_transfers_committed_total"), b.with(t).metric("ubs_transfers_committed_total")
	if int(ca+cb) != len(all) {
		x.Fatalf("commits counted: A %v + B %v, want %d (one CAS wins per transfer)", ca, cb, len(all))
	}
	t.Logf("commits: A %v, B %v; CAS lost: A %v, B %v", ca, cb,
		a.with(t).metric("ubs_transfers_cas_lost_total"), b.with(t).metric("ubs_transfers_cas_lost_total"))
	b.Kill()
	x.invariantOK()
}

// CON-002: two (and more) identical concurrent transfers without a cid are
// separate transfers, each executed.
func conSameAmount(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	ans := x.race(u, 5, func(int) map[string]any { return xferBody(F, S, "USDT", "10") })
	ids := map[string]bool{}
	for _, a := range ans {
		if a.st != 200 || a.b["state"] != "COMMITTED" || a.b["duplicate"] == true {
			x.Fatalf("identical concurrent transfers: %+v", ans)
		}
		ids[a.b["req_id"].(string)] = true
	}
	if len(ids) != 5 {
		x.Fatalf("%d req_ids for 5 transfers", len(ids))
	}
	x.wantBal(u, "USDT", 50_000000, 50_000000)
	ans = x.race(u, 2, func(int) map[string]any { return xferBody(S, F, "USDT", "25") })
	if ok, _ := x.tally(ans); ok != 2 || ans[0].b["req_id"] == ans[1].b["req_id"] {
		x.Fatalf("identical concurrent S->F: %+v", ans)
	}
	x.wantBal(u, "USDT", 0, 100_000000)
	x.invariantOK()
}

// CON-003: a transfer out of SPOT racing an order that freezes the same
// funds (the SPOT side's "external withdraw"): never both, never negative.
func conTransferAndOrder(x *xt) {
	const rounds = 6
	users := make([]uint64, rounds)
	for i := range users {
		users[i] = x.user()
		x.deposit(users[i], "USDT", "1")
		x.credit(users[i], "USDT", "100")
	}
	type res struct{ xfer, order answer }
	out := make([]res, rounds)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, u := range users {
		tok := x.tok(u)
		wg.Go(func() { <-start; out[i].xfer = x.post(tok, xferBody(S, F, "USDT", "60")) })
		wg.Go(func() {
			<-start
			st, b, err := x.s.tryDo("POST", "/api/v1/order", tok, map[string]any{"market": "BTC-USDT", "side": "BUY",
				"type": "LIMIT", "time_in_force": "GTC", "price": "50000", "quantity": "0.0012"}) // 60 USDT
			out[i].order = answer{st, b, err}
		})
	}
	close(start)
	wg.Wait()
	for i, u := range users {
		o := out[i]
		if o.xfer.err != nil || o.order.err != nil {
			x.Fatalf("round %d: %v %v", i, o.xfer.err, o.order.err)
		}
		xferOK := o.xfer.st == 200 && o.xfer.b["state"] == "COMMITTED"
		orderOK := o.order.st == 200
		if xferOK == orderOK {
			x.Fatalf("round %d: transfer %d %v, order %d %v: want exactly one to succeed", i, o.xfer.st, o.xfer.b, o.order.st, o.order.b)
		}
		if !xferOK && (o.xfer.st != 400 || o.xfer.b["code"] != "INSUFFICIENT_BALANCE") {
			x.Fatalf("round %d: refused transfer %d %v", i, o.xfer.st, o.xfer.b)
		}
		if !orderOK && o.order.b["code"] != "INSUFFICIENT_BALANCE" {
			x.Fatalf("round %d: refused order %d %v", i, o.order.st, o.order.b)
		}
		b := x.bal(u)["USDT"]
		moved := int64(0)
		if xferOK {
			moved = 60_000000
		}
		if b.Spot < 0 || b.Frozen < 0 || b.Spot+b.Frozen+moved != 100_000000 || b.Funding != 1_000000+moved {
			x.Fatalf("round %d: spot %d frozen %d funding %d (transfer ok %v)", i, b.Spot, b.Frozen, b.Funding, xferOK)
		}
		if orderOK && b.Frozen < 60_000000 {
			x.Fatalf("round %d: order accepted but only %d frozen", i, b.Frozen)
		}
	}
	x.invariantOK()
}

// CON-004: twenty concurrent transfers of 10 from 100 (each passes the
// unlocked pre-check alone): exactly ten succeed, the balance is never
// deducted twice nor goes negative, both directions.
func conNoDoubleDeduction(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	ok, no := x.tally(x.race(u, 20, func(int) map[string]any { return xferBody(F, S, "USDT", "10") }))
	if ok != 10 || no != 10 {
		x.Fatalf("F->S: %d committed, %d insufficient; want 10 and 10", ok, no)
	}
	x.wantBal(u, "USDT", 100_000000, 0)
	ok, no = x.tally(x.race(u, 20, func(int) map[string]any { return xferBody(S, F, "USDT", "10") }))
	if ok != 10 || no != 10 {
		x.Fatalf("S->F: %d committed, %d insufficient; want 10 and 10", ok, no)
	}
	x.wantBal(u, "USDT", 0, 100_000000)
	if n := x.queryInt(`SELECT count(*) FROM transfers_tb WHERE user_id = $1 AND state = 40`, int64(u)); n != 20 {
		x.Fatalf("%d COMMITTED rows, want 20", n)
	}
	x.invariantOK()
}

// --- 10.7 Idempotency ---

// IDP-001: a withdraw called again after it took effect (its answer was
// lost: TIMEOUT after the effect) answers SUCCESS and deducts once.
func idpWithdrawTwice(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	// On the fused path the FUNDING withdraw's COMMIT carries the transfer
	// to TARGET_PENDING: its lost answer is followed by a re-read, never by
	// a second withdraw (nothing to retry), and the record is there once.
	x.inject("funding", "withdraw", "timeout_after_effect", 1)
	b := x.commitRetried(u, F, S, "40", 0)
	if x.ops(reqIDOf(x.T, b), "withdraw", "SUCCESS") != 1 {
		x.Fatal("want one FUNDING withdraw record")
	}
	x.inject("spot", "withdraw", "timeout_after_effect", 2)
	x.commitRetried(u, S, F, "30", 2)
	x.wantBal(u, "USDT", 110_000000, 90_000000)
	x.invariantOK()
}

// commitRetried posts a transfer that must end COMMITTED (at once or after
// the worker's retries) with at least retries unknown outcomes on the way.
func (x *xt) commitRetried(u uint64, from, to, amount string, retries int) map[string]any {
	x.Helper()
	st, b := x.xfer(u, from, to, "USDT", amount)
	if st != 200 && st != 202 {
		x.Fatalf("%s->%s %s: %d %v", from, to, amount, st, b)
	}
	r := reqIDOf(x.T, b)
	b = x.waitTerminal(u, r, "COMMITTED")
	if b["retry_count"].(float64) < float64(retries) {
		x.Fatalf("%s: retry_count %v, want >= %d (the faults were not exercised)", r, b["retry_count"], retries)
	}
	x.wantFlow(r, flowCommitted...)
	return b
}

// IDP-002: a deposit called again after it took effect credits once.
func idpDepositTwice(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	x.inject("spot", "deposit", "timeout_after_effect", 2)
	x.commitRetried(u, F, S, "40", 2)
	x.wantBal(u, "USDT", 140_000000, 60_000000)
	// The FUNDING deposit's COMMIT carries the transfer to COMMITTED (fused):
	// its lost answer is re-read, not retried.
	x.inject("funding", "deposit", "timeout_after_effect", 1)
	b := x.commitRetried(u, S, F, "30", 0)
	if x.ops(reqIDOf(x.T, b), "deposit", "SUCCESS") != 1 {
		x.Fatal("want one FUNDING deposit record")
	}
	x.wantBal(u, "USDT", 110_000000, 90_000000)
	x.invariantOK()
}

// IDP-003: a refund called again after it took effect credits back once.
func idpRefundTwice(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	x.inject("spot", "deposit", "explicit_fail", 1)
	x.inject("funding", "refund", "timeout_after_effect", 1) // fused with ROLLED_BACK: re-read, not retried
	x.inject("funding", "deposit", "explicit_fail", 1)
	x.inject("spot", "refund", "timeout_after_effect", 2)
	a1, a2 := x.postPair(u, xferBody(F, S, "USDT", "40"), u, xferBody(S, F, "USDT", "30"))
	for i, a := range []answer{a1, a2} {
		if a.st != 202 && a.st != 400 && a.st != 409 { // the code is FSM-006's concern
			x.Fatalf("refund twice: %d %v", a.st, a.b)
		}
		r := reqIDOf(x.T, a.b)
		g := x.waitTerminal(u, r, "ROLLED_BACK")
		if i == 1 && g["retry_count"].(float64) < 2 {
			x.Fatalf("%s: retry_count %v, want >= 2", r, g["retry_count"])
		}
		x.wantFlow(r, flowRolledBack...)
	}
	if x.ops(reqIDOf(x.T, a1.b), "refund", "SUCCESS") != 1 {
		x.Fatal("want one FUNDING refund record")
	}
	x.wantBal(u, "USDT", 100_000000, 100_000000)
	x.invariantOK()
}

// IDP-004: many recovery retries of a deposit that takes effect every time
// but whose answer is always lost: the balance is credited once throughout,
// and the final state is consistent.
func idpManyRetries(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.inject("spot", "deposit", "timeout_after_effect", 1_000_000)
	st, b := x.xfer(u, F, S, "USDT", "40")
	if st != 202 || b["state"] != "TARGET_PENDING" {
		x.Fatalf("want 202 TARGET_PENDING: %d %v", st, b)
	}
	r := reqIDOf(x.T, b)
	g := x.stays(u, r, "TARGET_PENDING", 6)
	x.wantBal(u, "USDT", 40_000000, 60_000000) // credited by the first call, never again
	x.stays(u, r, "TARGET_PENDING", int(g["retry_count"].(float64))+2)
	x.wantBal(u, "USDT", 40_000000, 60_000000)
	x.invariantOK()
	x.clearFaults()
	x.waitTerminal(u, r, "COMMITTED")
	x.wantFlow(r, flowCommitted...)
	x.wantBal(u, "USDT", 40_000000, 60_000000)
	x.invariantOK()
}

// --- 10.8 Fund anomalies ---

// FND-001: the source is never deducted twice, however often its withdraw
// is repeated.
func fndDoubleSpend(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	// The FUNDING withdraw's lost answer is re-read (fused with
	// TARGET_PENDING), never repeated; the SPOT one is retried 5 times.
	x.inject("funding", "withdraw", "timeout_after_effect", 1)
	x.inject("spot", "withdraw", "timeout_after_effect", 5)
	a1, a2 := x.postPair(u, xferBody(F, S, "USDT", "70"), u, xferBody(S, F, "USDT", "80"))
	for i, a := range []answer{a1, a2} {
		if a.st != 200 && a.st != 202 {
			x.Fatalf("double spend: %d %v", a.st, a.b)
		}
		r := reqIDOf(x.T, a.b)
		if g := x.waitTerminal(u, r, "COMMITTED"); i == 1 && g["retry_count"].(float64) < 5 {
			x.Fatalf("%s: retry_count %v, want >= 5", r, g["retry_count"])
		}
	}
	if x.ops(reqIDOf(x.T, a1.b), "withdraw", "SUCCESS") != 1 {
		x.Fatal("want one FUNDING withdraw record")
	}
	x.wantBal(u, "USDT", 100_000000+70_000000-80_000000, 100_000000-70_000000+80_000000)
	x.invariantOK()
}

// FND-002: after the source succeeded, the funds never vanish: an explicit
// target failure is compensated, an unknown one retried until it commits;
// while in flight they are accounted for.
func fndDisappearance(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.inject("spot", "deposit", "explicit_fail", 1)
	st, b := x.xfer(u, F, S, "USDT", "30")
	wantFailed(x, "target refused", st, b, "ROLLED_BACK", "INJECTED")
	x.wantBal(u, "USDT", 0, 100_000000)

	x.inject("spot", "deposit", "network_error", 1_000_000)
	st, b = x.xfer(u, F, S, "USDT", "30")
	if st != 202 || b["state"] != "TARGET_PENDING" {
		x.Fatalf("want 202 TARGET_PENDING: %d %v", st, b)
	}
	r := reqIDOf(x.T, b)
	x.stays(u, r, "TARGET_PENDING", 3)
	rep := x.invariantOK()
	for _, a := range rep["assets"].([]any) {
		m := a.(map[string]any)
		if m["asset"] == "USDT" {
			if f, ok := m["in_flight"].(float64); ok && f < 30_000000 {
				x.Fatalf("in_flight %v while 30 USDT are in flight: %v", f, m)
			}
		}
	}
	x.clearFaults()
	x.waitTerminal(u, r, "COMMITTED")
	x.wantBal(u, "USDT", 30_000000, 70_000000)
	x.invariantOK()
}

// FND-003: the target is never credited twice; an external deposit replayed
// credits once (and a tx_ref reused otherwise is a conflict).
func fndMoneyFromNothing(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	// The FUNDING deposit's lost answer is re-read (fused with COMMITTED),
	// never repeated; the SPOT one is retried 5 times.
	x.inject("spot", "deposit", "timeout_after_effect", 5)
	x.inject("funding", "deposit", "timeout_after_effect", 1)
	a1, a2 := x.postPair(u, xferBody(F, S, "USDT", "70"), u, xferBody(S, F, "USDT", "80"))
	for i, a := range []answer{a1, a2} {
		if a.st != 200 && a.st != 202 {
			x.Fatalf("money from nothing: %d %v", a.st, a.b)
		}
		r := reqIDOf(x.T, a.b)
		if g := x.waitTerminal(u, r, "COMMITTED"); i == 0 && g["retry_count"].(float64) < 5 {
			x.Fatalf("%s: retry_count %v, want >= 5", r, g["retry_count"])
		}
	}
	if x.ops(reqIDOf(x.T, a2.b), "deposit", "SUCCESS") != 1 {
		x.Fatal("want one FUNDING deposit record")
	}
	x.wantBal(u, "USDT", 100_000000+70_000000-80_000000, 100_000000-70_000000+80_000000)

	// External deposits: once per tx_ref.
	v := x.user()
	dep := map[string]any{"user_id": v, "asset": "USDT", "amount": "50", "tx_ref": fmt.Sprintf("chain-tx-%d", v)}
	for i, want := range []bool{true, false, false} {
		st, b := x.s.do("POST", "/admin/v1/deposit", x.admin, dep)
		if st != 200 || b["credited"] != want {
			x.Fatalf("deposit #%d: %d %v, want credited %v", i+1, st, b, want)
		}
	}
	dep["amount"] = "60"
	x.s.expect("same tx_ref, other amount", "POST", "/admin/v1/deposit", x.admin, dep, 409, "DEPOSIT_CONFLICT")
	dep["amount"], dep["user_id"] = "50", x.user()
	x.s.expect("same tx_ref, other user", "POST", "/admin/v1/deposit", x.admin, dep, 409, "DEPOSIT_CONFLICT")
	x.s.expect("deposit without admin", "POST", "/admin/v1/deposit", x.tok(v),
		map[string]any{"user_id": v, "asset": "USDT", "amount": "50", "tx_ref": "self-made"}, 403, "FORBIDDEN")
	x.wantBal(v, "USDT", 0, 50_000000)
	x.invariantOK()
}

// FND-004: killed at any adapter call of either direction (before or after
// each withdraw, deposit and refund), recovery restores integrity. Two
// chains of crashes (one per direction) run in parallel.
func fndCrashAnyPoint(t *testing.T) {
	t.Parallel()
	// The SPOT target's injected refusal lives in the memory of the process
	// that dies before the fused COMMIT of COMPENSATING and the refund: it
	// was never durable, and after the restart the deposit succeeds.
	chains := map[string][]crashPoint{
		"FUNDING-SPOT": {
			{from: F, to: S, adapter: "funding", op: "withdraw", mode: "crash_before", atState: stNone},
			{from: F, to: S, adapter: "funding", op: "withdraw", mode: "crash_after", atState: stTargetPending},
			{from: F, to: S, adapter: "spot", op: "deposit", mode: "crash_before", atState: stTargetPending},
			{from: F, to: S, adapter: "spot", op: "deposit", mode: "crash_after", atState: stTargetPending},
			{from: F, to: S, adapter: "funding", op: "refund", mode: "crash_before", targetFail: true, atState: stTargetPending, want: "COMMITTED"},
			{from: F, to: S, adapter: "funding", op: "refund", mode: "crash_after", targetFail: true, atState: stRolledBack},
		},
		"SPOT-FUNDING": {
			{from: S, to: F, adapter: "spot", op: "withdraw", mode: "crash_before", atState: stSourcePending},
			{from: S, to: F, adapter: "spot", op: "withdraw", mode: "crash_after", atState: stSourcePending},
			{from: S, to: F, adapter: "funding", op: "deposit", mode: "crash_before", atState: stSourcePending},
			{from: S, to: F, adapter: "funding", op: "deposit", mode: "crash_after", atState: stCommitted},
			{from: S, to: F, adapter: "spot", op: "refund", mode: "crash_before", targetFail: true, atState: stCompensating},
			{from: S, to: F, adapter: "spot", op: "refund", mode: "crash_after", targetFail: true, atState: stCompensating},
		},
	}
	for name, points := range chains {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			x := crashXT(t)
			var users []uint64
			for _, p := range points {
				u, _ := x.runCrash(p)
				users = append(users, u)
			}
			// Every earlier user is still exact after all the later crashes.
			for i, u := range users {
				want := points[i].moved()
				if points[i].from == S {
					want = -want
				}
				x.wantBal(u, "USDT", 100_000000+want, 100_000000-want)
			}
		})
	}
}

// FND-005: the SPOT side's effect is durable in the core's WAL while
// transfers_tb still shows the call pending (SOURCE_PENDING after the SPOT
// withdraw, TARGET_PENDING after the SPOT deposit): after the restart the
// core's replayed idempotency records answer the repeat (no second effect),
// and the SQL read model derived from the WAL agrees with the core.
func fndWALParity(t *testing.T) {
	x := crashXT(t)
	u1, _ := x.runCrash(crashPoint{from: S, to: F, adapter: "spot", op: "withdraw", mode: "crash_after", atState: stSourcePending})
	u2, _ := x.runCrash(crashPoint{from: F, to: S, adapter: "spot", op: "deposit", mode: "crash_after", atState: stTargetPending})
	e2eWaitSink(t, x.s, x.pg)
	for _, u := range []uint64{u1, u2} {
		b := x.bal(u)["USDT"]
		if got := x.queryInt(`SELECT coalesce(sum(d_available), 0)::bigint FROM spot_ledger WHERE user_id = $1 AND asset_id = 1`, int64(u)); got != b.Spot {
			x.Fatalf("user %d: spot_ledger says %d, the core %d", u, got, b.Spot)
		}
	}
}

// FND-006: a FUNDING operation is one Postgres transaction: when it fails
// after its balance UPDATE (a test trigger makes the idempotency record's
// INSERT raise for this user), nothing of it stays, the transfer stays
// pending and retries; once the failure is gone it takes effect once. On
// the fused path the FUNDING->SPOT transfer is inserted by its withdraw's
// transaction: that rolled back (proven), so nothing was recorded and the
// answer is SYSTEM_ERROR (retry); the SPOT->FUNDING one stays in
// SOURCE_PENDING (its SOURCE_DONE and TARGET_PENDING commit only with the
// deposit).
func fndPartialCommit(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.credit(u, "USDT", "100")
	fn := fmt.Sprintf("xtest_fail_ops_%d", u)
	x.exec(fmt.Sprintf(`CREATE FUNCTION %s() RETURNS trigger AS $$
		BEGIN
			IF NEW.user_id = %d THEN RAISE EXCEPTION 'xtest: the record fails after the balance update'; END IF;
			RETURN NEW;
		END $$ LANGUAGE plpgsql`, fn, u))
	x.exec(fmt.Sprintf(`CREATE TRIGGER %s BEFORE INSERT ON transfer_operations FOR EACH ROW EXECUTE FUNCTION %s()`, fn, fn))
	dropped := false
	drop := func() {
		if !dropped {
			dropped = true
			x.exec(fmt.Sprintf(`DROP TRIGGER IF EXISTS %s ON transfer_operations`, fn))
			x.exec(fmt.Sprintf(`DROP FUNCTION IF EXISTS %s()`, fn))
		}
	}
	x.Cleanup(func() {
		if !dropped {
			drop()
		}
	})
	version := func() int64 {
		return x.queryInt(`SELECT version FROM balances_tb WHERE user_id = $1 AND asset_id = 1`, int64(u))
	}
	v0 := version()
	a1, a2 := x.postPair(u, xferBody(F, S, "USDT", "40"), u, xferBody(S, F, "USDT", "30"))
	if a1.st != 500 || a1.b["code"] != "SYSTEM_ERROR" {
		x.Fatalf("F->S with failing FUNDING transactions: %d %v, want 500 SYSTEM_ERROR (nothing happened)", a1.st, a1.b)
	}
	if n := x.queryInt(`SELECT count(*) FROM transfers_tb WHERE user_id = $1 AND from_account = 'FUNDING'`, int64(u)); n != 0 {
		x.Fatalf("%d FUNDING->SPOT transfers after their only transaction rolled back", n)
	}
	r2 := x.want202("S->F with failing FUNDING transactions", a2, "SOURCE_PENDING")
	x.stays(u, r2, "SOURCE_PENDING", 3)
	if got := x.fundingRow(u, 1); got != 100_000000 || version() != v0 {
		x.Fatalf("balances_tb %d version %d (was %d): a failed FUNDING transaction left its balance change", got, version(), v0)
	}
	if n := x.queryInt(`SELECT count(*) FROM transfer_operations WHERE user_id = $1`, int64(u)); n != 0 {
		x.Fatalf("%d records", n)
	}
	x.wantBal(u, "USDT", 70_000000, 100_000000) // the SPOT withdraw of r2 is in flight
	drop()
	x.waitTerminal(u, r2, "COMMITTED")
	r1 := reqIDOf(x.T, x.commit(u, F, S, "USDT", "40")) // the client's retry
	if x.ops(r1, "withdraw", "SUCCESS") != 1 || x.ops(r2, "deposit", "SUCCESS") != 1 {
		x.Fatal("want one record per operation")
	}
	x.wantBal(u, "USDT", 110_000000, 90_000000)
	if version() != v0+2 {
		x.Fatalf("balances_tb version %d, want %d (two changes)", version(), v0+2)
	}
	x.invariantOK()
}

// --- 10.9 Monitoring ---

// waitUntil polls cond every 50 ms for d.
func (x *xt) waitUntil(what string, d time.Duration, cond func() bool) {
	x.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			x.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// MON-001: a transfer stuck in TARGET_PENDING beyond the staleness
// threshold (1 s here, 1 min by default) raises a CRITICAL alert naming it
// and counts in ubs_transfers_stuck_total.
func monStuck(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	before := x.metric("ubs_transfers_stuck_total")
	x.inject("spot", "deposit", "timeout_before_effect", 1_000_000)
	st, b := x.xfer(u, F, S, "USDT", "10")
	if st != 202 || b["state"] != "TARGET_PENDING" {
		x.Fatalf("want 202 TARGET_PENDING: %d %v", st, b)
	}
	r := reqIDOf(x.T, b)
	x.waitUntil("MON-001 alert", 15*time.Second, func() bool {
		return criticals(x.s, "transfer stuck with funds in flight", r) > 0 && x.metric("ubs_transfers_stuck_total") > before
	})
	if criticals(x.s, "", r) == 0 {
		x.Fatal("no CRITICAL record names the transfer")
	}
	x.clearFaults()
	x.waitTerminal(u, r, "COMMITTED")
	x.wantBal(u, "USDT", 10_000000, 90_000000)
	x.invariantOK()
}

// MON-002: a refund failing 3 times raises the CRITICAL "compensation
// failed" alert and counts in ubs_transfers_mon002_alerts_total.
func monCompensationFailing(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "100")
	before := x.metric("ubs_transfers_mon002_alerts_total")
	x.inject("spot", "deposit", "explicit_fail", 1)
	x.inject("funding", "refund", "timeout_before_effect", 1_000_000)
	st, b := x.xfer(u, F, S, "USDT", "10")
	if st != 202 || b["state"] != "COMPENSATING" {
		x.Fatalf("want 202 COMPENSATING: %d %v", st, b)
	}
	r := reqIDOf(x.T, b)
	g := x.stays(u, r, "COMPENSATING", 3)
	x.waitUntil("MON-002 alert", 15*time.Second, func() bool {
		return criticals(x.s, "compensation failed", r) > 0 && x.metric("ubs_transfers_mon002_alerts_total") > before
	})
	g = x.get(u, r)
	if m, _ := g["error_message"].(string); !strings.Contains(m, "compensation failed") {
		x.Fatalf("error_message %q", m)
	}
	x.clearFaults()
	x.waitTerminal(u, r, "ROLLED_BACK")
	x.wantBal(u, "USDT", 0, 100_000000)
	x.invariantOK()
}

// MON-003: funds created behind the ledger's back (a FUNDING row changed
// directly in Postgres) fail the conservation check: CRITICAL alert,
// counted, new transfers halted (503 TRANSFERS_HALTED) even after the row
// is fixed, until an operator resumes.
func monConservation(t *testing.T) {
	x := crashXT(t, "--invariant-interval", "300ms") // the later flag wins
	u := x.user()
	x.deposit(u, "USDT", "100")
	x.commit(u, F, S, "USDT", "40")
	x.invariantOK()
	if x.metric("ubs_transfers_halted") != 0 || x.metric("ubs_conservation_violations_total") != 0 {
		x.Fatal("halted before any violation")
	}
	x.s.expect("invariants without admin", "GET", "/admin/v1/invariants", x.tok(u), nil, 403, "FORBIDDEN")
	x.s.expect("resume without admin", "POST", "/admin/v1/transfers/resume", x.tok(u), nil, 403, "FORBIDDEN")

	x.exec(`UPDATE balances_tb SET available = available + 1 WHERE user_id = $1 AND asset_id = 1`, int64(u))
	// The periodic check finds it on its own.
	x.waitUntil("periodic conservation check halts", 15*time.Second, func() bool { return x.metric("ubs_transfers_halted") == 1 })
	if x.metric("ubs_conservation_violations_total") < 1 {
		x.Fatal("violation not counted")
	}
	if criticals(x.s, "conservation", "") == 0 {
		x.Fatal("no CRITICAL conservation record")
	}
	st, rep := x.s.do("GET", "/admin/v1/invariants", x.admin, nil)
	if st != 200 || rep["ok"] != false || rep["transfers_halted"] != true || rep["violations_total"].(float64) < 1 {
		x.Fatalf("invariants: %d %v", st, rep)
	}
	for _, a := range rep["assets"].([]any) {
		m := a.(map[string]any)
		if m["asset"] == "USDT" && (m["ok"] != false || m["diff"] == float64(0)) {
			x.Fatalf("USDT not flagged: %v", m)
		}
		if m["asset"] != "USDT" && m["ok"] != true {
			x.Fatalf("%v flagged: %v", m["asset"], m)
		}
	}
	before := x.bal(u)
	for _, body := range []map[string]any{xferBody(F, S, "USDT", "1"), xferBody(S, F, "USDT", "1")} {
		x.s.expect("transfer while halted", "POST", "/api/v1/internal_transfer", x.tok(u), body, 503, "TRANSFERS_HALTED")
	}
	if after := x.bal(u); fmt.Sprint(after) != fmt.Sprint(before) {
		x.Fatalf("halted transfers moved funds: %v -> %v", before, after)
	}
	x.exec(`UPDATE balances_tb SET available = available - 1 WHERE user_id = $1 AND asset_id = 1`, int64(u))
	st, rep = x.s.do("GET", "/admin/v1/invariants", x.admin, nil)
	if st != 200 || rep["ok"] != true || rep["transfers_halted"] != true {
		x.Fatalf("after the fix, before resume: %d %v (the halt must stay until an operator lifts it)", st, rep)
	}
	x.s.expect("transfer while halted, fixed", "POST", "/api/v1/internal_transfer", x.tok(u), xferBody(F, S, "USDT", "1"), 503, "TRANSFERS_HALTED")
	x.wantBal(u, "USDT", 40_000000, 60_000000)
	if st, b := x.s.do("POST", "/admin/v1/transfers/resume", x.admin, nil); st != 200 || b["transfers_halted"] != false {
		x.Fatalf("resume: %d %v", st, b)
	}
	if x.metric("ubs_transfers_halted") != 0 {
		x.Fatal("still halted after resume")
	}
	x.commit(u, F, S, "USDT", "10")
	x.wantBal(u, "USDT", 50_000000, 50_000000)
	x.invariantOK()
}

// --- beyond the §10 ids ---

// VALIDATION: the other §1.5 codes: amount range, malformed amounts,
// account existence.
func validationCodes(x *xt) {
	u := x.user()
	x.deposit(u, "USDT", "10000000")
	x.deposit(u, "BTC", "1000")
	x.credit(u, "USDT", "100")
	x.refused("0.009 USDT", u, xferBody(F, S, "USDT", "0.009"), 400, "AMOUNT_TOO_SMALL")
	x.refused("0.000009 BTC", u, xferBody(F, S, "BTC", "0.000009"), 400, "AMOUNT_TOO_SMALL")
	x.refused("10000000.000001 USDT", u, xferBody(F, S, "USDT", "10000000.000001"), 400, "AMOUNT_TOO_LARGE")
	x.refused("1000.00000001 BTC", u, xferBody(F, S, "BTC", "1000.00000001"), 400, "AMOUNT_TOO_LARGE")
	for _, a := range []string{"abc", "", "1.2.3", "1,5", "0x10", "--1"} {
		x.refused("amount "+a, u, xferBody(F, S, "USDT", a), 400, "INVALID_AMOUNT")
	}
	x.refused("amount missing", u, xferBody(F, S, "USDT", nil, "amount", nil), 400, "INVALID_AMOUNT")
	// The bounds themselves are accepted.
	x.commit(u, F, S, "USDT", "0.01")
	x.commit(u, F, S, "BTC", "1000")
	x.commit(u, F, S, "USDT", "9999999.99")
	x.wantBal(u, "USDT", 10000100_000000, 0)
	x.noRowsBut(u, 3)

	// Account existence: FUNDING exists only after a deposit; SPOT is
	// created by the first transfer into it.
	v := x.user()
	x.refused("F->S without a FUNDING account", v, xferBody(F, S, "USDT", "1"), 400, "SOURCE_ACCOUNT_NOT_FOUND")
	x.credit(v, "USDT", "10")
	x.refused("S->F without a FUNDING account", v, xferBody(S, F, "USDT", "1"), 400, "TARGET_ACCOUNT_NOT_FOUND")
	w := x.user()
	x.deposit(w, "USDT", "10")
	x.refused("S->F without a SPOT account", w, xferBody(S, F, "USDT", "1"), 400, "SOURCE_ACCOUNT_NOT_FOUND")
	x.commit(w, F, S, "USDT", "4") // lazily creates SPOT
	x.commit(w, S, F, "USDT", "1")
	x.wantBal(w, "USDT", 3_000000, 7_000000)
	// A FUNDING account with no row for this asset yet receives it.
	x.credit(w, "BTC", "1")
	x.commit(w, S, F, "BTC", "0.5")
	x.wantBal(w, "BTC", 5000_0000, 5000_0000)
	x.invariantOK()
}

// noRowsBut requires the user to have exactly n transfers.
func (x *xt) noRowsBut(user uint64, n int64) {
	x.Helper()
	if got := x.queryInt(`SELECT count(*) FROM transfers_tb WHERE user_id = $1`, int64(user)); got != n {
		x.Fatalf("user %d has %d transfers, want %d", user, got, n)
	}
}

// RATE-LIMIT (§1.5.6, P2): the 11th request of a user within a second is
// RATE_LIMIT_EXCEEDED; beyond --transfer-per-day transfers a day,
// DAILY_LIMIT_EXCEEDED. Refusals move nothing. Without
// --enable-fault-injection the fault routes do not exist.
func rateLimits(t *testing.T) {
	pg := pgtest.NewDB(t)
	s := e2eStart(t, t.TempDir(), pg, "--transfer-rate-per-second", "10", "--transfer-per-day", "12", "--invariant-interval", "0")
	x := newXT(t, s, pg)
	x.s.expect("faults without the flag", "POST", "/admin/v1/faults", x.admin,
		map[string]any{"adapter": "spot", "op": "deposit", "mode": "explicit_fail", "count": 1}, 404, "NOT_FOUND")
	x.s.expect("faults without the flag", "DELETE", "/admin/v1/faults", x.admin, nil, 404, "NOT_FOUND")

	// Per second: 11 requests as fast as they go; when they fit in a
	// second, the 11th is refused. (A fresh user per attempt: each has its
	// own daily count.)
	limited := false
	for attempt := 0; attempt < 3 && !limited; attempt++ {
		u := x.user()
		x.deposit(u, "USDT", "100")
		tok := x.tok(u)
		start := time.Now()
		var codes []string
		for i := 0; i < 11; i++ {
			st, b := x.s.do("POST", "/api/v1/internal_transfer", tok, xferBody(F, S, "USDT", "1"))
			switch {
			case st == 200 && b["state"] == "COMMITTED":
				codes = append(codes, "OK")
			case st == 429 && b["code"] == "RATE_LIMIT_EXCEEDED":
				codes = append(codes, "RATE")
			default:
				x.Fatalf("request %d: %d %v", i+1, st, b)
			}
		}
		elapsed := time.Since(start)
		ok := strings.Count(strings.Join(codes, ","), "OK")
		if elapsed < 900*time.Millisecond {
			if strings.Join(codes, ",") != strings.Repeat("OK,", 10)+"RATE" {
				x.Fatalf("11 requests in %v: %v, want 10 OK then RATE_LIMIT_EXCEEDED", elapsed, codes)
			}
			limited = true
		} else {
			t.Logf("11 requests took %v (%v): too slow to test the per-second limit; again", elapsed, codes)
		}
		x.wantBal(u, "USDT", int64(ok)*1_000000, int64(100-ok)*1_000000)
	}
	if !limited {
		x.Fatal("could not send 11 requests within a second")
	}

	// Per day: spaced requests (under the per-second limit) until refused.
	w := x.user()
	x.deposit(w, "USDT", "100")
	tok := x.tok(w)
	ok := 0
	for {
		st, b := x.s.do("POST", "/api/v1/internal_transfer", tok, xferBody(F, S, "USDT", "1"))
		if st == 429 && b["code"] == "DAILY_LIMIT_EXCEEDED" {
			break
		}
		if st != 200 || ok > 20 {
			x.Fatalf("daily: %d %v after %d transfers", st, b, ok)
		}
		ok++
		time.Sleep(120 * time.Millisecond)
	}
	if ok != 12 {
		x.Fatalf("%d transfers before DAILY_LIMIT_EXCEEDED, want 12", ok)
	}
	time.Sleep(1100 * time.Millisecond)
	x.s.expect("13th of the day", "POST", "/api/v1/internal_transfer", tok, xferBody(F, S, "USDT", "1"), 429, "DAILY_LIMIT_EXCEEDED")
	x.wantBal(w, "USDT", 12_000000, 88_000000)
	x.invariantOK()
}

// ASSET-STATUS (§1.5.4): a SUSPENDED asset is ASSET_SUSPENDED; an asset
// whose internal transfers are disabled is TRANSFER_NOT_ALLOWED.
func assetStatus(t *testing.T) {
	cfg := `{"assets": [
	{"symbol": "USDT", "id": 1, "scale": 6, "min_transfer": "0.01", "max_transfer": "10000000", "status": "ACTIVE", "internal_transfer_enabled": true},
	{"symbol": "BTC", "id": 2, "scale": 8, "min_transfer": "0.00001", "max_transfer": "1000", "status": "ACTIVE", "internal_transfer_enabled": true},
	{"symbol": "ETH", "id": 3, "scale": 8, "min_transfer": "0.0001", "max_transfer": "10000", "status": "ACTIVE", "internal_transfer_enabled": true},
	{"symbol": "SUS", "id": 4, "scale": 8, "status": "SUSPENDED", "internal_transfer_enabled": true},
	{"symbol": "NOX", "id": 5, "scale": 8, "status": "ACTIVE", "internal_transfer_enabled": false}],
 "markets": [{"symbol": "BTC-USDT", "id": 1, "base": "BTC", "quote": "USDT", "tick": "0.01", "lot": "0.0001",
	"min_qty": "0.0001", "max_qty": "1000", "maker_fee_ppm": 1000, "taker_fee_ppm": 2000}]}`
	path := filepath.Join(t.TempDir(), "instruments.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	x := crashXT(t, "--config", path)
	u := x.user()
	for _, a := range []string{"USDT", "SUS", "NOX"} {
		x.deposit(u, a, "10")
		x.credit(u, a, "10")
	}
	x.refused("suspended asset", u, xferBody(F, S, "SUS", "1"), 400, "ASSET_SUSPENDED")
	x.refused("suspended asset S->F", u, xferBody(S, F, "SUS", "1"), 400, "ASSET_SUSPENDED")
	x.refused("transfer-disabled asset", u, xferBody(F, S, "NOX", "1"), 400, "TRANSFER_NOT_ALLOWED")
	x.refused("transfer-disabled asset S->F", u, xferBody(S, F, "NOX", "1"), 400, "TRANSFER_NOT_ALLOWED")
	x.commit(u, F, S, "USDT", "1")
	x.noRowsBut(u, 1)
}
