package main

// The history of a replicated venue under fail-overs (issue 38): load
// clients send orders (each with its own client_order_id) and cancels to
// whichever node they believe is the primary, and record every operation
// with the class of its answer. The checker then reads the final primary's
// order history and requires what each answer promised:
//
//	ok (200)         the order is there, once, in the acknowledged state or a
//	                 later one; an acknowledged cancel left it CANCELLED
//	refused (4xx, 503 NOT_PRIMARY / REPLICATION_UNAVAILABLE)
//	                 the order does not exist; a refused cancel cancelled nothing
//	unknown (any other 5xx, a timeout, a connection error)
//	                 either, but at most once
//
// Buyers and sellers are different users (odd users buy, even users sell),
// so self-trade prevention never cancels an order: an order is CANCELLED
// only by a cancel a client sent.

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/gateway/openapitest"
)

// fvClass is what an answer says about whether the command happened.
type fvClass uint8

const (
	fvUnknown fvClass = iota // may or may not be applied
	fvOK                     // applied
	fvRefused                // definitely not applied
)

func (c fvClass) String() string { return [...]string{"unknown", "ok", "refused"}[c] }

// fvClassify classes an answer (status 0: a transport error).
func fvClassify(status int, code string) fvClass {
	switch {
	case status == 200:
		return fvOK
	case status >= 400 && status < 500:
		return fvRefused
	case status == 503 && (code == "NOT_PRIMARY" || code == "REPLICATION_UNAVAILABLE"):
		return fvRefused
	}
	return fvUnknown
}

// fvOp is one recorded operation and its answer.
type fvOp struct {
	n          int    // index in the history
	client     int    // -1: a probe of the test goroutine
	kind       string // "place" or "cancel"
	node       int    // the node it was sent to
	user       uint64
	cid        string // place: the client_order_id
	orderID    uint64 // place ok: the answered id; cancel: the order cancelled
	side, tif  string
	start, end time.Time
	status     int // 0: transport error
	code       string
	errText    string
	class      fvClass
	ackStatus  string // ok: the answered order status
	ackFilled  int64  // ok: the answered filled quantity (base units)
}

func (o *fvOp) String() string {
	ans := strconv.Itoa(o.status) + " " + o.code
	if o.status == 0 {
		ans = "error " + o.errText
	}
	s := fmt.Sprintf("op #%d (client %d) %s user %d", o.n, o.client, o.kind, o.user)
	if o.kind == "place" {
		s += fmt.Sprintf(" cid %s %s %s", o.cid, o.side, o.tif)
	}
	if o.orderID != 0 {
		s += fmt.Sprintf(" order %d", o.orderID)
	}
	s += fmt.Sprintf(" to node %d at %s..%s: %s -> %s", o.node, o.start.Format("15:04:05.000"), o.end.Format("15:04:05.000"), ans, o.class)
	if o.class == fvOK {
		s += fmt.Sprintf(" (%s filled %d)", o.ackStatus, o.ackFilled)
	}
	return s
}

// fvHistory sends the load to a set of nodes (fixed addresses: a restarted
// node keeps its port) and records every operation.
type fvHistory struct {
	t      *testing.T
	addrs  []string
	users  int
	auth   *gateway.Authenticator
	client *http.Client
	hint   atomic.Int32  // the node believed to be the primary
	cids   atomic.Uint64 // client_order_ids handed out

	mu    sync.Mutex
	ops   []fvOp
	count [3]int // ops by class

	stop chan struct{}
	wg   sync.WaitGroup
}

func newFvHistory(t *testing.T, addrs []string, users int) *fvHistory {
	t.Helper()
	a, err := gateway.NewAuthenticator([]byte(e2eSecret))
	if err != nil {
		t.Fatal(err)
	}
	// A short timeout: a request to a paused (SIGSTOP) node is an unknown
	// outcome after it, and the client moves on to another node.
	return &fvHistory{t: t, addrs: addrs, users: users, auth: a,
		client: &http.Client{Timeout: 3 * time.Second, Transport: openapitest.Transport(t, nil)}}
}

func (h *fvHistory) token(user uint64) string {
	tok, err := h.auth.Mint(user, false, time.Hour, time.Now())
	if err != nil {
		panic(err) // a fixed secret: cannot fail
	}
	return tok
}

// send does one request to node i: status (0 on a transport error), body,
// the X-Ubs-Primary header and the error code.
func (h *fvHistory) send(i int, method, path, tok string, body any) (status int, raw []byte, primary, code string, err error) {
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = strings.NewReader(string(j))
	}
	req, err := http.NewRequest(method, "http://"+h.addrs[i]+path, rd)
	if err != nil {
		return 0, nil, "", "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, nil, "", "", err
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, "", "", err
	}
	var e struct {
		Code string `json:"code"`
	}
	if resp.StatusCode != 200 && json.Unmarshal(raw, &e) == nil {
		code = e.Code
	}
	return resp.StatusCode, raw, resp.Header.Get("X-Ubs-Primary"), code, nil
}

// do sends one operation to node i and records it; it returns the op and
// the primary the answer named (-1 if none or unknown).
func (h *fvHistory) do(client, i int, op fvOp, method, path string, body any) (fvOp, int) {
	op.client, op.node, op.start = client, i, time.Now()
	st, raw, primary, code, err := h.send(i, method, path, h.token(op.user), body)
	op.end, op.status, op.code = time.Now(), st, code
	if err != nil {
		op.errText = err.Error()
	}
	op.class = fvClassify(st, code)
	if op.class == fvOK {
		var m map[string]any
		if jerr := json.Unmarshal(raw, &m); jerr != nil {
			h.t.Errorf("%s: answer %q: %v", &op, raw, jerr)
		} else if oid, a, perr := parseAck(op.user, m); perr != nil {
			h.t.Errorf("%s: answer %s: %v", &op, raw, perr)
		} else {
			if op.kind == "place" {
				op.orderID = oid
			} else if oid != op.orderID {
				h.t.Errorf("%s: the cancel answered order %d", &op, oid)
			}
			op.ackStatus, op.ackFilled = a.status, a.filled
		}
	}
	h.mu.Lock()
	op.n = len(h.ops)
	h.ops = append(h.ops, op)
	h.count[op.class]++
	h.mu.Unlock()
	named := -1
	for j, a := range h.addrs {
		if primary != "" && a == primary {
			named = j
		}
	}
	return op, named
}

// start runs n load clients until stopLoad.
func (h *fvHistory) start(n int) {
	h.stop = make(chan struct{})
	for c := 0; c < n; c++ {
		h.wg.Add(1)
		go h.run(c)
	}
}

// stopLoad stops the clients and waits for their last operations.
func (h *fvHistory) stopLoad() {
	close(h.stop)
	h.wg.Wait()
}

// run is one load client: it places orders (sometimes IOC) and sometimes
// cancels one of its resting orders, on the node it believes the primary:
// the one the last answer named (X-Ubs-Primary) unless that node failed
// just now, else the next one.
func (h *fvHistory) run(client int) {
	defer h.wg.Done()
	r := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
	var open []fvOp                           // its acknowledged resting orders
	failed := make([]time.Time, len(h.addrs)) // when a node last failed a request
	for {
		select {
		case <-h.stop:
			return
		default:
		}
		node := int(h.hint.Load())
		var op fvOp
		var method, path string
		var body any
		if len(open) > 0 && r.IntN(6) == 0 {
			k := r.IntN(len(open))
			o := open[k]
			open = append(open[:k], open[k+1:]...)
			op = fvOp{kind: "cancel", user: o.user, orderID: o.orderID}
			method, path = "DELETE", fmt.Sprintf("/api/v1/order/%d", o.orderID)
		} else {
			u := uint64(1 + r.IntN(h.users))
			side := "BUY"
			if u%2 == 0 {
				side = "SELL"
			}
			tif := "GTC"
			if r.IntN(5) == 0 {
				tif = "IOC"
			}
			op = fvOp{kind: "place", user: u, cid: "f" + strconv.FormatUint(h.cids.Add(1), 10), side: side, tif: tif}
			method, path = "POST", "/api/v1/order"
			body = map[string]any{"market": "BTC-USDT", "side": side, "type": "LIMIT", "time_in_force": tif,
				"price": fmt.Sprintf("%d.%02d", 49990+r.IntN(20), r.IntN(100)), "quantity": fmt.Sprintf("0.%04d", 1+r.IntN(50)),
				"client_order_id": op.cid}
		}
		got, named := h.do(client, node, op, method, path, body)
		if got.class == fvOK {
			if got.kind == "place" && (got.ackStatus == "NEW" || got.ackStatus == "PARTIALLY_FILLED") && len(open) < 50 {
				open = append(open, got)
			}
			continue
		}
		if got.status == 0 || got.class == fvUnknown {
			failed[node] = time.Now()
		}
		next := (node + 1) % len(h.addrs)
		if named >= 0 && named != node && time.Since(failed[named]) > 500*time.Millisecond {
			next = named
		}
		h.hint.CompareAndSwap(int32(node), int32(next))
		time.Sleep(5 * time.Millisecond)
	}
}

// probe sends one order to node i from the test goroutine, recorded like
// the load's.
func (h *fvHistory) probe(i int) fvOp {
	op := fvOp{kind: "place", user: 1, side: "BUY", tif: "GTC"}
	op.cid = "p" + strconv.FormatUint(h.cids.Add(1), 10)
	got, _ := h.do(-1, i, op, "POST", "/api/v1/order", map[string]any{"market": "BTC-USDT", "side": "BUY", "type": "LIMIT",
		"price": "40000", "quantity": "0.0001", "client_order_id": op.cid})
	return got
}

// snapshot is a copy of the ops so far.
func (h *fvHistory) snapshot() []fvOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]fvOp(nil), h.ops...)
}

// counts is how many ops of each class were recorded.
func (h *fvHistory) counts() [3]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count
}

// firstOK is the first ok operation answered after t0 by a node not in
// exclude (the zero op, false if none yet).
func (h *fvHistory) firstOK(t0 time.Time, exclude ...int) (fvOp, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var best fvOp
	found := false
next:
	for i := len(h.ops) - 1; i >= 0; i-- {
		o := &h.ops[i]
		if o.end.Before(t0.Add(-10 * time.Second)) {
			break // ops are recorded as they end: the rest ended before t0
		}
		if o.class != fvOK || !o.end.After(t0) {
			continue
		}
		for _, x := range exclude {
			if o.node == x {
				continue next
			}
		}
		if !found || o.end.Before(best.end) {
			best, found = *o, true
		}
	}
	return best, found
}

// okFrom is every ok operation of node i answered after t0.
func (h *fvHistory) okFrom(i int, t0 time.Time) []fvOp {
	var out []fvOp
	for _, o := range h.snapshot() {
		if o.node == i && o.class == fvOK && o.end.After(t0) {
			out = append(out, o)
		}
	}
	return out
}

// fvListed is an order as the order history lists it.
type fvListed struct {
	ID     uint64  `json:"order_id"`
	CID    *string `json:"client_order_id"`
	Status string  `json:"status"`
	Filled string  `json:"filled_quantity"`
	user   uint64
	filled int64
}

func (o fvListed) String() string {
	cid := "null"
	if o.CID != nil {
		cid = *o.CID
	}
	return fmt.Sprintf("{order %d of user %d cid %s %s filled %s}", o.ID, o.user, cid, o.Status, o.Filled)
}

// fvListOrders reads every order of users 1..users from node s's order
// history (GET /api/v1/orders?status=all, every page).
func fvListOrders(t *testing.T, s *e2eServer, users int) []fvListed {
	t.Helper()
	var out []fvListed
	for u := uint64(1); u <= uint64(users); u++ {
		tok := s.token(u, false)
		cursor := ""
		for {
			p := "/api/v1/orders?status=all&limit=1000"
			if cursor != "" {
				p += "&cursor=" + cursor
			}
			st, raw := s.doRaw("GET", p, tok, nil)
			if st != 200 {
				t.Fatalf("user %d %s: %d %s", u, p, st, raw)
			}
			var page struct {
				Orders []fvListed `json:"orders"`
				Next   *string    `json:"next_cursor"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				t.Fatalf("%s: %v: %s", p, err, raw)
			}
			for _, o := range page.Orders {
				o.user, o.filled = u, dec(t, o.Filled, 8)
				out = append(out, o)
			}
			if page.Next == nil || *page.Next == "" {
				break
			}
			cursor = *page.Next
		}
	}
	return out
}

// fvCheckHistory checks the recorded ops against the final primary s (its
// sink caught up: older orders come from Postgres). It fails on the first
// operation whose answer the venue broke, naming it.
func fvCheckHistory(t *testing.T, s *e2eServer, h *fvHistory) {
	t.Helper()
	ops := h.snapshot()
	listed := fvListOrders(t, s, h.users)
	byCID := map[string][]fvListed{}
	byID := map[uint64]fvListed{}
	for _, o := range listed {
		if o.CID == nil {
			t.Fatalf("order %d of user %d has no client_order_id: no client sent it", o.ID, o.user)
		}
		byCID[*o.CID] = append(byCID[*o.CID], o)
		if _, dup := byID[o.ID]; dup {
			t.Fatalf("order id %d listed twice", o.ID)
		}
		byID[o.ID] = o
	}
	// why explains a missing order: GET /order/{id} on s.
	why := func(op *fvOp) string {
		if op.orderID == 0 {
			return ""
		}
		st, raw := s.doRaw("GET", fmt.Sprintf("/api/v1/order/%d", op.orderID), s.token(op.user, false), nil)
		return fmt.Sprintf(" (GET /api/v1/order/%d: %d %s)", op.orderID, st, raw)
	}
	terminal := map[string]bool{"FILLED": true, "CANCELLED": true, "EXPIRED": true, "REJECTED": true}
	placed := map[string]*fvOp{}
	cancels := map[uint64][]*fvOp{}
	var n [3]int
	answers := map[string]int{} // the answers that were not 200, by kind
	for i := range ops {
		op := &ops[i]
		n[op.class]++
		if op.class != fvOK {
			a := op.kind + " " + strconv.Itoa(op.status) + " " + op.code
			if op.status == 0 {
				a = op.kind + " transport error"
			}
			answers[a]++
		}
		if op.kind == "cancel" {
			cancels[op.orderID] = append(cancels[op.orderID], op)
			continue
		}
		placed[op.cid] = op
		got := byCID[op.cid]
		switch {
		case len(got) > 1:
			t.Fatalf("%s: the order exists %d times: %v", op, len(got), got)
		case op.class == fvRefused && len(got) == 1:
			t.Fatalf("%s: refused, yet the order exists: %v", op, got[0])
		case op.class == fvOK && len(got) == 0:
			t.Fatalf("%s: acknowledged, missing from the final primary's history%s", op, why(op))
		case op.class == fvOK:
			o := got[0]
			if o.ID != op.orderID || o.user != op.user {
				t.Fatalf("%s: acknowledged as order %d of user %d, the history has order %d of user %d", op, op.orderID, op.user, o.ID, o.user)
			}
			if terminal[op.ackStatus] && (o.Status != op.ackStatus || o.filled != op.ackFilled) {
				t.Fatalf("%s: the history has it %s filled %d", op, o.Status, o.filled)
			}
			if o.filled < op.ackFilled {
				t.Fatalf("%s: filled went back to %d (%s)", op, o.filled, o.Status)
			}
		}
	}
	for cid, got := range byCID {
		if placed[cid] == nil {
			t.Fatalf("order %v: no client placed client_order_id %q", got[0], cid)
		}
	}
	for _, o := range listed {
		cs := cancels[o.ID]
		var sent []*fvOp // cancels that may have happened
		for _, c := range cs {
			if c.class != fvRefused {
				sent = append(sent, c)
			}
			if c.class == fvOK && (o.Status != "CANCELLED" || o.filled != c.ackFilled) {
				t.Fatalf("%s: the history has order %d %s filled %d", c, o.ID, o.Status, o.filled)
			}
		}
		if o.Status == "CANCELLED" && len(sent) == 0 {
			var s []string
			for _, c := range cs {
				s = append(s, c.String())
			}
			t.Fatalf("order %d (%s) is CANCELLED, but no cancel of it was accepted or unanswered: %v", o.ID, placed[*o.CID], s)
		}
	}
	t.Logf("history: %d ops (%d ok, %d refused, %d unknown), %d orders in the final primary's history; not 200: %v",
		len(ops), n[fvOK], n[fvRefused], n[fvUnknown], len(listed), answers)
}
