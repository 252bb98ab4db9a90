package main

// The venue soak's history checker: what the client was told against what
// the venue holds, after every restart and at the end.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
)

func coreUser(u uint64) core.UserID    { return core.UserID(u) }
func coreMarket(m int64) core.MarketID { return core.MarketID(m) }

// svTerminal are the order statuses that never change again.
var svTerminal = map[string]bool{"FILLED": true, "CANCELLED": true, "EXPIRED": true, "REJECTED": true}

// check runs the whole history check; lost counts acknowledged operations
// missing, contra answers the venue contradicts.
func (v *soak) check(when string) {
	v.wsCheckpoint()
	v.t.Helper()
	lost := func(format string, args ...any) {
		v.t.Helper()
		v.lost++
		v.t.Errorf(when+": LOST: "+format, args...)
	}
	contra := func(format string, args ...any) {
		v.t.Helper()
		v.contra++
		v.t.Errorf(when+": CONTRADICTED: "+format, args...)
	}
	v.get200("/health/ready", 0) // the process is up
	// Automatic failover: the node the clients use is still the primary.
	if v.standby != nil {
		if st, err := replicationStatusTry(v.s); err != nil || st.Role != "primary" || !st.LeaseHeld {
			v.t.Fatalf("%s: the primary (%s) is no longer the primary, and the soak stopped neither node: %+v %v; %s",
				when, v.s.dataDir, st, err, v.pairStatus(v.s, v.standby))
		}
	}
	if _, h := v.get200("/api/v1/health/matching", 0); h["core_halted"] == true {
		v.coreHalted = true // a fault whose answer was lost, or a repair cut short
	}
	if v.coreHalted || v.desync != "" { // a fault's cycle cut short by the restart
		v.waitHalt(2 * time.Second)
		v.repair()
	}
	v.checkOrders(lost, contra)
	v.checkXfers(lost, contra)
	v.checkWithdrawals(lost, contra)
	v.checkP2P(lost, contra)
	v.checkMarkets(contra)
	if _, inv := v.get200("/admin/v1/invariants", svAdmin); inv["ok"] != true {
		contra("money not conserved: %v", inv)
	}
	if v.t.Failed() {
		v.t.FailNow()
	}
}

// get200 reads path (as user; 0 = no token) and requires 200, retrying a
// little (a fresh start's feature may still be warming).
func (v *soak) get200(path string, user uint64) (int, map[string]any) {
	v.t.Helper()
	var st int
	var b map[string]any
	var err error
	for i := 0; i < 50; i++ {
		st, b, err = v.call("GET", path, user, nil)
		if err == nil && st == 200 {
			return st, b
		}
		time.Sleep(100 * time.Millisecond)
	}
	v.t.Fatalf("GET %s: %d %v %v", path, st, b, err)
	return 0, nil
}

// checkOrders: every order answered 200 is there, as answered if it was
// final, filled at least as far if it was open; no refused order exists.
func (v *soak) checkOrders(lost, contra func(string, ...any)) {
	ids := make([]uint64, 0, len(v.orders))
	for oid := range v.orders {
		ids = append(ids, oid)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	open := v.openOrders[:0]
	for _, oid := range ids {
		told := v.orders[oid]
		// An order found final as told stays so: after a restart only a
		// sample of those is read again (all of them at the end).
		if v.verified[oid] && !v.final && rand.IntN(20) != 0 {
			continue
		}
		st, o, err := v.call("GET", fmt.Sprint("/api/v1/order/", oid), told.user, nil)
		if err != nil || st != 200 {
			lost("order %d (told %s filled %d): %d %v %v", oid, told.status, told.filled, st, o, err)
			continue
		}
		status, _ := o["status"].(string)
		filled := rmFilled(v.t, o)
		if v.final {
			v.atEnd[oid] = [2]any{status, filled}
		}
		switch {
		case svTerminal[told.status] && (status != told.status || filled != told.filled):
			contra("order %d: told %s filled %d, now %s filled %d", oid, told.status, told.filled, status, filled)
		case filled < told.filled:
			contra("order %d: told filled %d, now %d", oid, told.filled, filled)
		}
		if !svTerminal[status] {
			open = append(open, oid)
		} else if svTerminal[told.status] {
			v.verified[oid] = true
		}
	}
	v.openOrders = open
	seen := map[uint64]string{}
	for _, u := range svTraders {
		var all strings.Builder
		for _, p := range []string{"/api/v1/orders", "/api/v1/my-trades"} {
			_, b := v.get200(p, u)
			j, _ := json.Marshal(b)
			all.Write(j)
		}
		seen[u] = all.String()
	}
	for _, r := range v.refused {
		if strings.Contains(seen[r.user], `"`+r.cid+`"`) {
			contra("order %s was refused (%d %s), yet user %d's orders or trades show it", r.cid, r.status, r.code, r.user)
		}
	}
}

// svList reads every page of a paginated list of user (size 100) and
// returns its entries.
func (v *soak) svList(path, member string, user uint64) []map[string]any {
	v.t.Helper()
	var out []map[string]any
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	for page := 1; page < 1000; page++ {
		_, b := v.get200(fmt.Sprintf("%s%spage=%d&size=100", path, sep, page), user)
		items, _ := b[member].([]any)
		for _, it := range items {
			out = append(out, it.(map[string]any))
		}
		if len(items) < 100 {
			return out
		}
	}
	return out
}

// checkXfers: internal transfers as told, by cid.
func (v *soak) checkXfers(lost, contra func(string, ...any)) {
	state := map[string]string{}
	for _, u := range svTraders {
		for _, e := range v.svList("/api/v1/internal_transfers", "transfers", u) {
			if c, ok := e["cid"].(string); ok {
				state[c] = fmt.Sprint(e["state"])
			}
		}
	}
	for cid, x := range v.xfers {
		got, ok := state[cid]
		switch x.told {
		case "COMMITTED":
			if got != "COMMITTED" {
				lost("internal transfer %s of user %d told COMMITTED: %q", cid, x.user, got)
			}
		case "ACCEPTED":
			if !ok {
				lost("internal transfer %s of user %d told 202 in progress: absent", cid, x.user)
			}
		case "FAILED":
			if ok && got != "FAILED" && got != "ROLLED_BACK" {
				contra("internal transfer %s of user %d told failed: %s", cid, x.user, got)
			}
		case "NONE":
			if ok {
				contra("internal transfer %s of user %d told nothing happened: %s", cid, x.user, got)
			}
		}
	}
}

// checkWithdrawals: every withdrawal answered 202 exists, none refused does.
func (v *soak) checkWithdrawals(lost, contra func(string, ...any)) {
	seen := map[string]string{}
	for _, u := range svTraders {
		for _, w := range v.svList("/api/v1/withdrawals", "withdrawals", u) {
			if c, ok := w["cid"].(string); ok {
				seen[c] = fmt.Sprint(w["state"])
			}
		}
	}
	for cid, told := range v.wds {
		got, ok := seen[cid]
		switch {
		case told == "ACCEPTED" && !ok:
			lost("withdrawal %s of user %d answered 202: absent", cid, v.wdUser[cid])
		case told == "NONE" && ok:
			contra("withdrawal %s of user %d refused: it exists (%s)", cid, v.wdUser[cid], got)
		}
	}
}

// checkP2P: every spec 003 transfer as told (read from every user's
// history pages); the ones not told about are at most those whose answer
// was lost.
func (v *soak) checkP2P(lost, contra func(string, ...any)) {
	seen := v.p2pSeen()
	for tid, p := range v.p2p {
		got, ok := seen[tid]
		switch {
		case !ok:
			lost("spec 003 transfer %s told %s: absent", tid, p.told)
		case p.told == "CANCELLED" && got != "CANCELLED", p.told == "COMPLETED" && got != "COMPLETED":
			contra("spec 003 transfer %s told %s: %s", tid, p.told, got)
		case p.told == "PENDING" && got == "COMPLETED":
			p.told = "COMPLETED"
		}
	}
	if extra := len(seen) - len(v.p2p); extra > v.p2pMaybe {
		contra("%d spec 003 transfers no client was told about, %d answers lost", extra, v.p2pMaybe)
	}
}

// p2pSeen is every spec 003 transfer in its users' history pages: id ->
// status. The pages of one user must list each of its transfers once,
// newest (highest id) first, across the boundary between what the core
// retains and what only Postgres holds (--p2p-retention 1s: the soak's
// transfers are forgotten while it runs).
func (v *soak) p2pSeen() map[string]string {
	seen := map[string]string{}
	for _, h := range v.p2pHandles {
		last := math.Inf(1)
		for page := 1; page < 1000; page++ {
			_, b := v.get200(fmt.Sprintf("/transfers?userId=%s&page=%d&size=100", h, page), svAdmin)
			content, _ := b["content"].([]any)
			for _, c := range content {
				m := c.(map[string]any)
				id, _ := m["transferId"].(float64)
				if id >= last {
					v.contra++
					v.t.Errorf("spec 003 history of %s, page %d: transfer %v after %v (want each once, newest first)", h, page, id, last)
				}
				last = id
				seen[fmt.Sprint(m["transferId"])] = fmt.Sprint(m["status"])
			}
			if len(content) < 100 {
				break
			}
		}
	}
	return seen
}

// checkP2PRetention (at the end, the sink caught up): the core forgot the
// transfers finished more than --p2p-retention (1 s) ago — it retains
// fewer than were made — and the history pages, now served from Postgres
// across the boundary, still list every one (checkPostgresP2P again).
func (v *soak) checkP2PRetention() {
	made := len(v.p2p)
	if made < 5 {
		v.t.Logf("p2p retention: only %d transfers made; not checked", made)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		retained := v.s.metric("ubs_p2p_retained")
		if retained < float64(made) {
			v.t.Logf("p2p retention: %d transfers made, %v retained by the core, %v forgotten by this process",
				made, retained, v.s.metric("ubs_p2p_forgotten_total"))
			break
		}
		if time.Now().After(deadline) {
			v.contra++
			v.t.Errorf("p2p retention: the core still retains %v transfers of the %d made, 1 s retention", retained, made)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	v.checkPostgresP2P()
}

// checkPostgresP2P (once the sink caught up): the spec 003 tables equal
// what the API answers: every transfer with its status, every balance.
func (v *soak) checkPostgresP2P() {
	t := v.t
	conn := e2eConn(t, v.pg)
	ctx := context.Background()
	rows, err := conn.Query(ctx, "SELECT id, status FROM p2p_transfers")
	if err != nil {
		t.Fatal(err)
	}
	pg := map[string]string{}
	for rows.Next() {
		var id int64
		var st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		pg[fmt.Sprint(id)] = st
	}
	rows.Close()
	if api := v.p2pSeen(); fmt.Sprint(api) != fmt.Sprint(pg) {
		v.contra++
		t.Errorf("p2p_transfers (id -> status) differ from the API's history:\npostgres %v\napi      %v", pg, api)
	}
	for _, h := range v.p2pHandles {
		_, b := v.get200("/balance-service/users/"+h+"/balance", svAdmin)
		f, _ := b["balance"].(float64)
		var bal int64
		if err := conn.QueryRow(ctx, "SELECT balance FROM user_balances WHERE user_id = $1", h).Scan(&bal); err != nil {
			t.Fatal(err)
		}
		if want := int64(math.Round(f * 100)); bal != want {
			v.contra++
			t.Errorf("user_balances %s: %d, the API says %v", h, bal, b)
		}
	}
}

// checkMarkets: binary markets in the status told; health/matching lists
// every spot market and every live binary one with its status, and
// ubs_markets counts them.
func (v *soak) checkMarkets(contra func(string, ...any)) {
	_, h := v.get200("/api/v1/health/matching", 0)
	markets, _ := h["markets"].(map[string]any)
	status := func(key string) string {
		m, _ := markets[key].(map[string]any)
		if m == nil {
			return "absent"
		}
		if m["orderbook_loaded"] != true {
			contra("health/matching market %s: book not loaded: %v", key, m)
		}
		return fmt.Sprint(m["status"])
	}
	for sym, told := range v.spotMarkets {
		got := status(sym)
		if told == "?" {
			v.spotMarkets[sym] = got
		} else if got != told {
			contra("spot market %s: told %s, health/matching says %s", sym, told, got)
		}
	}
	for _, m := range v.binaries {
		if m.status == "ABSENT" {
			continue
		}
		st, b, err := v.call("GET", fmt.Sprint("/api/v1/binary-markets/", m.id), svAdmin, nil)
		if m.status == "ARCHIVED" {
			if err != nil || st != 400 || b["code"] != "NOT_BINARY" {
				contra("binary market %d told ARCHIVED: %d %v %v", m.id, st, b, err)
			}
			continue
		}
		got := fmt.Sprint(b["status"])
		switch {
		case err != nil || (st != 200 && !m.unknown):
			contra("binary market %d told %s: %d %v %v", m.id, m.status, st, b, err)
			continue
		case st != 200: // created with its answer lost, and not there
			m.status, m.unknown = "ABSENT", false // never touched again
			continue
		case m.unknown:
			m.status, m.unknown, m.settling = got, false, b["settling"] == true
		case got != m.status:
			contra("binary market %d: told %s, now %s", m.id, m.status, got)
		}
		switch m.status {
		case "ACTIVE", "SUSPENDED", "HALTED":
			if hs := status(fmt.Sprint(m.id)); hs != m.status {
				contra("health/matching binary market %d: %s, want %s", m.id, hs, m.status)
			}
		}
	}
	count := map[string]float64{}
	for _, m := range markets {
		count[fmt.Sprint(m.(map[string]any)["status"])]++
	}
	for _, s := range []string{"ACTIVE", "SUSPENDED", "HALTED"} {
		if got := v.s.metric(`ubs_markets{status="` + s + `"}`); got != count[s] {
			contra(`ubs_markets{status=%q} = %v, health/matching lists %v`, s, got, count[s])
		}
	}
}

// checkRepeats (at the end: a repeat of an unknown one would apply it):
// every deposit answered credited and every adjustment answered 200 is in
// the state: sent again with its tx_ref / ref, it answers that it was
// applied before ("credited": false, "repeat": true) and nothing moves.
func (v *soak) checkRepeats() {
	for _, d := range v.deposits {
		if st, b, err := v.call("POST", "/admin/v1/deposit", svAdmin, d); err != nil || st != 200 || b["credited"] != false {
			v.lost++
			v.t.Errorf("LOST: deposit %v answered credited, sent again: %d %v %v, want credited false", d, st, b, err)
		}
	}
	for _, a := range v.adjusts {
		if st, b, err := v.call("POST", "/admin/v1/adjust", svAdmin, a); err != nil || st != 200 || b["repeat"] != true {
			v.lost++
			v.t.Errorf("LOST: adjustment %v answered 200, sent again: %d %v %v, want repeat true", a, st, b, err)
		}
	}
	if _, inv := v.get200("/admin/v1/invariants", svAdmin); inv["ok"] != true {
		v.contra++
		v.t.Errorf("money not conserved after the repeats: %v", inv)
	}
}

// checkWithdrawn (at the end): every withdrawal ends, COMPLETED or
// CANCELLED (refunded), and the chain holds exactly what the COMPLETED ones
// sent: 0.001 ETH each, at the soak's addresses.
func (v *soak) checkWithdrawn() {
	t := v.t
	var completed int64
	deadline := time.Now().Add(60 * time.Second)
	for {
		completed = 0
		pending := 0
		for _, u := range svTraders {
			for _, w := range v.svList("/api/v1/withdrawals", "withdrawals", u) {
				switch w["state"] {
				case "PENDING":
					pending++
				case "COMPLETED":
					completed++
				}
			}
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			v.lost++
			t.Errorf("%d withdrawals still PENDING 60 s after the end", pending)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	onChain := new(big.Int)
	for i := 0; i < 8; i++ {
		b, err := v.node.Balance(anviltest.Addr(0x3200 + i))
		if err != nil {
			t.Fatal(err)
		}
		onChain.Add(onChain, b)
	}
	if want := new(big.Int).Mul(big.NewInt(completed), big.NewInt(1_000_000_000_000_000)); onChain.Cmp(want) != 0 {
		v.contra++
		t.Errorf("on chain the withdrawal addresses hold %v wei, want %v (%d withdrawals COMPLETED)", onChain, want, completed)
	}
	v.events["withdrawals completed on chain"] = int(completed)
}

// checkPostgresPositions (after the last stop, the sink caught up): the
// positions table equals the core's binary positions, recovered offline
// from the data dir: every position of the core is a row with its
// volumes, costs and pending sells, and every row of a market the core
// still lists with something in it is a position of the core.
func (v *soak) checkPostgresPositions() {
	t := v.t
	rec, err := journal.Recover(journal.RecoverConfig{Dir: v.dir, ReadOnly: true, Logger: quietLogger(),
		Core: core.Config{AllowFaults: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.WAL.Close()
	p := rec.Proc
	inCore := map[[2]int64][6]int64{}
	for _, u := range svTraders {
		for _, pv := range p.Positions(core.UserID(u), nil) {
			inCore[[2]int64{int64(pv.Market), int64(pv.User)}] = [6]int64{int64(pv.YesVolume), int64(pv.NoVolume),
				int64(pv.YesCostSum), int64(pv.NoCostSum), int64(pv.YesPending), int64(pv.NoPending)}
		}
	}
	conn := e2eConn(t, v.pg)
	rows, err := conn.Query(context.Background(), `SELECT market_id, user_id, yes_volume, no_volume, yes_cost_sum, no_cost_sum,
		yes_pending_sell, no_pending_sell FROM positions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var k [2]int64
		var r [6]int64
		if err := rows.Scan(&k[0], &k[1], &r[0], &r[1], &r[2], &r[3], &r[4], &r[5]); err != nil {
			t.Fatal(err)
		}
		want, ok := inCore[k]
		_, live := p.Binary(core.MarketID(k[0]))
		switch {
		case ok && want != r:
			v.contra++
			t.Errorf("positions market %d user %d: postgres %v, core %v", k[0], k[1], r, want)
		case ok:
			seen++
		case live && r != [6]int64{}:
			v.contra++
			t.Errorf("positions market %d user %d: postgres %v, the core has none", k[0], k[1], r)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != len(inCore) {
		v.lost++
		t.Errorf("positions: %d of the core's %d in postgres", seen, len(inCore))
	}
	v.events["positions compared"] = len(inCore)
}

// checkPostgresOrders (the sink caught up): every spot order the client was
// told about is a row of the orders table with the status and filled
// quantity the API answered at the end.
func (v *soak) checkPostgresOrders() {
	t := v.t
	ids := make([]int64, 0, len(v.spot))
	for oid := range v.spot {
		ids = append(ids, int64(oid))
	}
	conn := e2eConn(t, v.pg)
	rows, err := conn.Query(context.Background(), "SELECT order_id, status, filled_quantity FROM orders WHERE order_id = ANY($1)", ids)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var oid, filled int64
		var status string
		if err := rows.Scan(&oid, &status, &filled); err != nil {
			t.Fatal(err)
		}
		seen++
		if want := v.atEnd[uint64(oid)]; want != [2]any{status, filled} {
			v.contra++
			t.Errorf("orders row %d: %s filled %d, the API answered %v", oid, status, filled, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != len(ids) {
		v.lost++
		t.Errorf("orders: %d of the %d spot orders answered 200 are rows", seen, len(ids))
	}
	v.events["orders compared with postgres"] = seen
}
