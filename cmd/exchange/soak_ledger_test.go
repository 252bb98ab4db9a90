package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/persist/pgtest"
)

// TestSoakAnswersMatchTheLedger (make test-long; issue 20) is the crash soak
// a newcomer ran, as a test: 30 users place, cancel and modify crossing
// orders and move funds FUNDING <-> SPOT both ways from 8 clients, while
// the server is SIGKILLed at random moments (or stopped) every round,
// Postgres goes away twice (every connection cut, pgtest.Proxy) and in two
// rounds ends every session of the exchange five times (pg_terminate_backend:
// FATAL 57P01, which can arrive after a COMMIT committed; issue 41). Every
// request carries its own idempotency key (client_order_id, cid), so each
// answer can be held against what the ledger finally shows:
//
//   - an order answered 200 exists with that id and client id, its final
//     state is at least what the answer said (the same, if it was final),
//     and the user's order history lists it; an order refused (4xx) does
//     not exist;
//   - a cancel answered 200 left the order CANCELLED with the filled
//     quantity it named; 409 ORDER_NOT_OPEN named the order's final state;
//   - a transfer answered 200 is COMMITTED; 202 ends terminal; FAILED or
//     ROLLED_BACK answers end so; a refusal or a "nothing happened" error
//     left no transfer with that cid;
//   - SPOT and FUNDING together hold exactly what was deposited.
//
// Answers that say the outcome is unknown (a 503 "may or may not", a
// transport error as the server dies) are free, but whatever they did
// must still satisfy the rest.
func TestSoakAnswersMatchTheLedger(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash soak runs in make test-long")
	}
	const (
		users    = 30
		clients  = 8
		rounds   = 6
		roundLen = 6 * time.Second
	)
	pg := pgtest.NewDB(t)
	proxy := pgtest.NewProxy(t, pg)
	dir := t.TempDir()
	flags := []string{"--transfer-stale-after", "1s", "--transfer-rate-per-second", "0", "--transfer-per-day", "0",
		"--invariant-interval", "500ms", "--history-window", "2000"}
	s := e2eStart(t, dir, proxy.URL(), flags...)
	admin := s.token(1000, true)
	tokens := map[int]string{}
	for u := 1; u <= users; u++ {
		tokens[u] = s.token(uint64(u), false)
		for _, a := range [][2]string{{"USDT", "100000"}, {"BTC", "10"}} {
			if st, b := s.do("POST", "/admin/v1/deposit", admin, map[string]any{"user_id": u, "asset": a[0], "amount": a[1],
				"tx_ref": fmt.Sprintf("soak-dep-%d-%s", u, a[0])}); st != 200 {
				t.Fatalf("deposit: %d %v", st, b)
			}
			if st, b := s.do("POST", "/admin/v1/adjust", admin, map[string]any{"user_id": u, "asset": a[0], "amount": a[1],
				"ref": fmt.Sprintf("soak-adj-%d-%s", u, a[0])}); st != 200 {
				t.Fatalf("adjust: %d %v", st, b)
			}
		}
	}

	var (
		mu      sync.Mutex
		log     soakLog
		counter int
	)
	next := func() int { mu.Lock(); defer mu.Unlock(); counter++; return counter }
	worker := func(srv *e2eServer, seed uint64, stop <-chan struct{}, wg *sync.WaitGroup) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 11))
		var live []uint64 // this client's orders answered open
		owner := map[uint64]int{}
		for {
			select {
			case <-stop:
				return
			default:
			}
			u := 1 + rng.IntN(users)
			switch k := rng.IntN(20); {
			case k < 9: // place
				side, price := "BUY", 49_900+rng.IntN(200)
				if rng.IntN(2) == 0 {
					side = "SELL"
				}
				coid, qty := fmt.Sprintf("s%d", next()), fmt.Sprintf("0.%03d", 1+rng.IntN(30))
				if rng.IntN(20) == 0 {
					qty = "50" // more than anyone holds: INSUFFICIENT_BALANCE
				}
				st, b, err := srv.tryDo("POST", "/api/v1/order", tokens[u], map[string]any{"market": "BTC-USDT", "side": side,
					"type": "LIMIT", "price": fmt.Sprint(price), "quantity": qty, "client_order_id": coid})
				mu.Lock()
				log.orders = append(log.orders, soakOrder{user: u, coid: coid, status: st, body: b, err: err})
				mu.Unlock()
				if err == nil && st == 200 && (b["status"] == "NEW" || b["status"] == "PARTIALLY_FILLED") {
					id := uint64(b["order_id"].(float64))
					live, owner[id] = append(live, id), u
				}
			case k < 12 && len(live) > 0: // cancel or modify one of ours
				i := rng.IntN(len(live))
				id := live[i]
				u := owner[id]
				method, body := "DELETE", any(nil)
				if k == 11 {
					method, body = "PATCH", map[string]any{"quantity": "0.001"}
				}
				st, b, err := srv.tryDo(method, fmt.Sprintf("/api/v1/order/%d", id), tokens[u], body)
				mu.Lock()
				log.changes = append(log.changes, soakChange{user: u, id: id, method: method, status: st, body: b, err: err})
				mu.Unlock()
				if method == "DELETE" || st == 409 {
					live = slices.Delete(live, i, i+1)
				}
			default: // transfer
				from, to := "FUNDING", "SPOT"
				if rng.IntN(2) == 0 {
					from, to = to, from
				}
				asset, amount := "USDT", fmt.Sprintf("%d.%02d", 1+rng.IntN(300), rng.IntN(100))
				if rng.IntN(3) == 0 {
					asset, amount = "BTC", fmt.Sprintf("0.%05d", 1+rng.IntN(9000))
				}
				cid := fmt.Sprintf("c%d", next())
				st, b, err := srv.tryDo("POST", "/api/v1/internal_transfer", tokens[u], map[string]any{"from": from, "to": to,
					"asset": asset, "amount": amount, "cid": cid})
				mu.Lock()
				log.transfers = append(log.transfers, soakTransfer{user: u, cid: cid, status: st, body: b, err: err})
				mu.Unlock()
			}
		}
	}

	rng := rand.New(rand.NewPCG(20, 20))
	outages := 0
	for r := range rounds {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go worker(s, uint64(r*clients+c+1), stop, &wg)
		}
		end := time.Now().Add(roundLen)
		switch r {
		case 1, 4: // Postgres away for 2 s in the middle of the round
			time.Sleep(roundLen / 3)
			proxy.Down()
			outages++
			time.Sleep(2 * time.Second)
			proxy.Up()
		case 2, 5: // Postgres ends every session of the exchange 5 times (FATAL 57P01, issue 41)
			for range 5 {
				time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
				terminateSessions(t, pg)
				outages++
			}
		}
		time.Sleep(time.Until(end) - time.Duration(rng.IntN(1500))*time.Millisecond)
		if r%3 == 2 {
			close(stop)
			wg.Wait()
			s.Stop()
		} else {
			s.Kill() // requests in flight
			close(stop)
			wg.Wait()
		}
		s = e2eStart(t, dir, proxy.URL(), flags...)
	}

	// Let every transfer finish and the sink catch up, then hold each answer
	// against the ledger.
	conn := e2eConn(t, pg)
	waitTransfersTerminal(t, conn, 60*time.Second)
	e2eWaitSink(t, s, pg)
	c := &soakChecker{t: t, conn: conn, s: s, tokens: tokens}
	c.orders(log.orders)
	c.changes(log.changes)
	c.transfers(log.transfers)
	if st, inv := s.do("GET", "/admin/v1/invariants", admin, nil); st != 200 || inv["ok"] != true {
		t.Fatalf("conservation check after the soak: %d %v", st, inv)
	}
	// SPOT was also credited by the operator adjustments (users x amount).
	ledgersBalance(t, conn, map[int]int64{1: users * 100000_000000, 2: users * 10_00000000})
	t.Logf("%d rounds, %d Postgres outages; %d orders, %d cancels/modifies, %d transfers answered; by status: orders %v, transfers %v",
		rounds, outages, len(log.orders), len(log.changes), len(log.transfers), c.byStatus["order"], c.byStatus["transfer"])
	if c.byStatus["order"][200] < 500 || c.byStatus["order"][409] < 20 || c.byStatus["transfer"][200] < 200 {
		t.Fatalf("too little traffic to mean anything: %v", c.byStatus)
	}
	s.Stop()
}

type soakLog struct {
	orders    []soakOrder
	changes   []soakChange
	transfers []soakTransfer
}

type soakOrder struct {
	user   int
	coid   string
	status int
	body   map[string]any
	err    error // transport error: the server died
}

type soakChange struct {
	user   int
	id     uint64
	method string
	status int
	body   map[string]any
	err    error
}

type soakTransfer struct {
	user   int
	cid    string
	status int
	body   map[string]any
	err    error
}

// soakChecker holds answers against the final ledger (Postgres after the
// sink caught up, and the server's own answers now).
type soakChecker struct {
	t        *testing.T
	conn     *pgx.Conn
	s        *e2eServer
	tokens   map[int]string
	byStatus map[string]map[int]int
	errs     int
}

func (c *soakChecker) count(kind string, st int) {
	if c.byStatus == nil {
		c.byStatus = map[string]map[int]int{}
	}
	if c.byStatus[kind] == nil {
		c.byStatus[kind] = map[int]int{}
	}
	c.byStatus[kind][st]++
}

func (c *soakChecker) fail(format string, args ...any) {
	c.t.Helper()
	c.errs++
	if c.errs <= 30 {
		c.t.Errorf(format, args...)
	}
}

var finalOrder = map[string]bool{"FILLED": true, "CANCELLED": true, "EXPIRED": true}

// orderRow is an order as the sink finally wrote it.
type orderRow struct {
	id             int64
	status, filled string
	found          bool
}

func (c *soakChecker) orderByClientID(user int, coid string) orderRow {
	var r orderRow
	var filled int64
	err := c.conn.QueryRow(context.Background(), `SELECT order_id, status, filled_quantity FROM orders
		WHERE user_id = $1 AND client_order_id = $2`, user, coid).Scan(&r.id, &r.status, &filled)
	if errors.Is(err, pgx.ErrNoRows) {
		return r
	}
	if err != nil {
		c.t.Fatal(err)
	}
	r.found, r.filled = true, fmt.Sprintf("%d.%08d", filled/1e8, filled%1e8)
	return r
}

func (c *soakChecker) orders(orders []soakOrder) {
	listed := map[int]map[uint64]bool{}
	for _, o := range orders {
		if o.err != nil {
			c.count("order", 0)
			continue
		}
		c.count("order", o.status)
		row := c.orderByClientID(o.user, o.coid)
		switch {
		case o.status == 200:
			id := int64(o.body["order_id"].(float64))
			switch {
			case !row.found || row.id != id:
				c.fail("order %s of user %d answered 200 as #%d; the ledger has %+v", o.coid, o.user, id, row)
			case finalOrder[o.body["status"].(string)] && (row.status != o.body["status"] || row.filled != o.body["filled_quantity"]):
				c.fail("order #%d answered %v filled %v; the ledger says %s filled %s", id, o.body["status"],
					o.body["filled_quantity"], row.status, row.filled)
			case units(c.t, "BTC", row.filled) < units(c.t, "BTC", o.body["filled_quantity"].(string)):
				c.fail("order #%d answered filled %v; the ledger has less: %s", id, o.body["filled_quantity"], row.filled)
			}
			if listed[o.user] == nil {
				listed[o.user] = c.history(o.user)
			}
			if !listed[o.user][uint64(id)] {
				c.fail("order #%d of user %d answered 200 but its order history does not list it", id, o.user)
			}
		case o.status >= 400 && o.status < 500:
			if row.found {
				c.fail("order %s of user %d refused %d %v, but the ledger has it: %+v", o.coid, o.user, o.status, o.body, row)
			}
		case o.status == 503:
		default:
			c.fail("order %s answered %d %v", o.coid, o.status, o.body)
		}
	}
}

// history is the ids of every order the user's history lists.
func (c *soakChecker) history(user int) map[uint64]bool {
	out := map[uint64]bool{}
	cursor := ""
	for {
		path := "/api/v1/orders?status=all&limit=1000"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		st, page := c.s.do("GET", path, c.tokens[user], nil)
		if st != 200 {
			c.t.Fatalf("history of user %d: %d %v", user, st, page)
		}
		for _, it := range page["orders"].([]any) {
			out[uint64(it.(map[string]any)["order_id"].(float64))] = true
		}
		cur, _ := page["next_cursor"].(string)
		if cur == "" {
			return out
		}
		cursor = cur
	}
}

func (c *soakChecker) changes(changes []soakChange) {
	for _, ch := range changes {
		if ch.err != nil {
			c.count("change", 0)
			continue
		}
		c.count("change", ch.status)
		var status string
		var filled int64
		if err := c.conn.QueryRow(context.Background(), `SELECT status, filled_quantity FROM orders WHERE order_id = $1`,
			int64(ch.id)).Scan(&status, &filled); err != nil {
			c.fail("%s #%d answered %d: the order is not in the ledger: %v", ch.method, ch.id, ch.status, err)
			continue
		}
		f := fmt.Sprintf("%d.%08d", filled/1e8, filled%1e8)
		switch {
		case ch.status == 200 && ch.method == "DELETE":
			if status != "CANCELLED" || f != ch.body["filled_quantity"] {
				c.fail("cancel #%d answered 200 filled %v; the ledger says %s filled %s", ch.id, ch.body["filled_quantity"], status, f)
			}
		case ch.status == 409 && ch.body["code"] == "ORDER_NOT_OPEN":
			o := ch.body["order"].(map[string]any)
			if status != o["status"] || f != o["filled_quantity"] {
				c.fail("%s #%d: ORDER_NOT_OPEN named %v filled %v; the ledger says %s filled %s", ch.method, ch.id, o["status"],
					o["filled_quantity"], status, f)
			}
		case ch.status == 200, ch.status == 503, ch.status == 409, ch.method == "PATCH" && ch.status == 400:
			// a modify; unknown; a business refusal; a quantity the order cannot take
		default:
			c.fail("%s #%d answered %d %v", ch.method, ch.id, ch.status, ch.body)
		}
	}
}

func (c *soakChecker) transfers(transfers []soakTransfer) {
	for _, tr := range transfers {
		if tr.err != nil {
			c.count("transfer", 0)
			continue
		}
		c.count("transfer", tr.status)
		var state int
		var reqID string
		err := c.conn.QueryRow(context.Background(), `SELECT req_id, state FROM transfers_tb WHERE user_id = $1 AND cid = $2`,
			tr.user, tr.cid).Scan(&reqID, &state)
		found := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			c.t.Fatal(err)
		}
		answered, _ := tr.body["req_id"].(string)
		if answered != "" && (!found && tr.body["state"] != "UNKNOWN" || found && answered != reqID) {
			c.fail("transfer %s answered %d with req_id %s; the ledger has %q (found %v)", tr.cid, tr.status, answered, reqID, found)
			continue
		}
		switch {
		case tr.status == 200:
			if state != stCommitted {
				c.fail("transfer %s answered COMMITTED; the ledger says %s", tr.cid, stateName[state])
			}
		case tr.status == 202:
			if found && state != stCommitted && state != stFailed && state != stRolledBack {
				c.fail("transfer %s answered 202; it never finished: %s", tr.cid, stateName[state])
			}
		case answered != "": // a FAILED / ROLLED_BACK answer (4xx, or 500 SYSTEM_ERROR for a fenced insert)
			if !found || stateName[state] != tr.body["state"] {
				c.fail("transfer %s answered %d %v; the ledger says %s", tr.cid, tr.status, tr.body["state"], stateName[state])
			}
		case tr.status >= 400: // refused, or "nothing happened"
			if found {
				c.fail("transfer %s answered %d %v (nothing happened), but the ledger has it in %s", tr.cid, tr.status, tr.body,
					stateName[state])
			}
			if tr.status >= 500 && tr.status != 503 && !strings.Contains(fmt.Sprint(tr.body["message"]), "nothing happened") {
				c.fail("transfer %s: an error answer that does not say what happened: %d %v", tr.cid, tr.status, tr.body)
			}
		}
	}
}

// terminateSessions ends every session of the database of pgURL but its own
// (pg_terminate_backend: FATAL 57P01 to each, as a fast shutdown sends).
func terminateSessions(t *testing.T, pgURL string) {
	t.Helper()
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()`, strings.TrimPrefix(u.Path, "/")); err != nil {
		t.Fatal(err)
	}
}
