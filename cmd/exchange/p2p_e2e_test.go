package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ubscore/ubscore/persist/pgtest"
	"github.com/ubscore/ubscore/publish"
)

// TestP2PEndToEnd runs spec 003's transfer service on the real binary with
// real Postgres and the machine's NATS JetStream, the hold set to 2 s:
// create users, transfer, cancel, a repeated requestId, SIGKILL between a
// transfer's creation and its execution (it executes after the restart,
// exactly once), SIGKILL while many transfers are due (none lost, none
// doubled), history pages, the conservation check to the unit, the
// Postgres tables, and every JetStream event read back in order, once.
func TestP2PEndToEnd(t *testing.T) {
	t.Parallel() // waits on servers, Postgres and the hold more than it computes
	natsURL := os.Getenv("UBS_NATS_URL")
	if natsURL == "" {
		natsURL = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(natsURL, nats.Timeout(time.Second))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("NATS: %v", err)
		}
		t.Skipf("NATS at %s: %v", natsURL, err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream := fmt.Sprintf("UBS_E2E_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	prefix := "ubse2e." + stream + "."
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })

	pg := pgtest.NewDB(t)
	dir := t.TempDir()
	const hold = 2 * time.Second
	flags := []string{"--p2p-hold", hold.String(), "--nats-url", natsURL, "--nats-stream", stream, "--nats-subject-prefix", prefix}
	s := e2eStart(t, dir, pg, flags...)
	admin := s.token(1000, true)
	alice, bob := s.token(11, false), s.token(12, false)
	must := func(s *e2eServer, method, path, tok string, body any, want int) map[string]any {
		t.Helper()
		st, out := s.do(method, path, tok, body)
		if st != want {
			t.Fatalf("%s %s %v: %d %v, want %d", method, path, body, st, out, want)
		}
		return out
	}
	for _, u := range []string{`{"userId":"alice","initialBalance":1000,"id":11}`, `{"userId":"bob","initialBalance":0,"id":12}`,
		`{"userId":"carol","initialBalance":50.5,"id":13}`} {
		must(s, "POST", "/balance-service/users", admin, u, 200)
	}
	must(s, "POST", "/balance-service/users", alice, `{"userId":"mallory","initialBalance":1}`, 403)
	must(s, "POST", "/balance-service/users", admin, `{"userId":"alice","initialBalance":1}`, 400)
	id := func(m map[string]any) int { return int(m["transferId"].(float64)) }
	t1 := id(must(s, "POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"bob","amount":100}`, 200))
	t2 := id(must(s, "POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"carol","amount":50}`, 200))
	must(s, "POST", "/transfers", bob, `{"fromUserId":"bob","toUserId":"alice","amount":10}`, 400) // INSUFFICIENT_BALANCE
	must(s, "POST", "/transfers", bob, `{"fromUserId":"alice","toUserId":"bob","amount":10}`, 403)
	c := must(s, "POST", "/transfers/"+strconv.Itoa(t2)+"/cancel", alice, nil, 200)
	if c["status"] != "CANCELLED" {
		t.Fatalf("cancel: %v", c)
	}
	carol := s.token(13, false)
	t4 := id(must(s, "POST", "/transfers", carol, `{"fromUserId":"carol","toUserId":"alice","amount":20.25,"requestId":"c-1"}`, 200))
	if again := id(must(s, "POST", "/transfers", carol, `{"fromUserId":"carol","toUserId":"alice","amount":20.25,"requestId":"c-1"}`, 200)); again != t4 {
		t.Fatalf("a repeated requestId made transfer %d, first %d", again, t4)
	}
	// SIGKILL right after a creation was answered: it executes after the restart, once.
	t3 := id(must(s, "POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"bob","amount":1.23}`, 200))
	s.Kill()
	s = e2eStart(t, dir, pg, flags...)
	if b := must(s, "GET", "/balance-service/users/alice/balance", alice, nil, 200); b["held"] != 101.23 {
		t.Fatalf("after the restart alice holds %v", b)
	}
	// Many transfers due at once, SIGKILL around their execution.
	const many = 40
	start := time.Now()
	for i := 0; i < many; i++ {
		must(s, "POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"carol","amount":0.01}`, 200)
	}
	time.Sleep(time.Until(start.Add(hold + 100*time.Millisecond))) // the first ones are due: ticks are executing
	s.Kill()
	s = e2eStart(t, dir, pg, flags...)
	balance := func(h, tok string) map[string]any {
		return must(s, "GET", "/balance-service/users/"+h+"/balance", tok, nil, 200)
	}
	// Everything executes: alice 1000 - 100 - 1.23 - 0.40 + 20.25, bob 101.23, carol 50.5 - 20.25 + 0.40.
	deadline := time.Now().Add(15 * time.Second)
	for balance("alice", alice)["held"] != 0.0 || balance("carol", carol)["held"] != 0.0 {
		if time.Now().After(deadline) {
			t.Fatalf("transfers not executed: %v %v", balance("alice", alice), balance("carol", carol))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for h, want := range map[string]float64{"alice": 918.62, "bob": 101.23, "carol": 30.65} {
		if b := balance(h, admin); b["balance"] != want || b["available"] != want {
			t.Fatalf("%s: %v, want %v", h, b, want)
		}
	}
	must(s, "POST", "/transfers/"+strconv.Itoa(t3)+"/cancel", alice, nil, 400) // CANNOT_CANCEL_TRANSFER: completed
	// History: newest first, pages of 10.
	h := must(s, "GET", "/transfers?userId=alice&page=1&size=10", alice, nil, 200)
	if h["totalElements"] != float64(4+many) || h["totalPages"] != float64((4+many+9)/10) {
		t.Fatalf("history: %v", h)
	}
	last := must(s, "GET", "/transfers?userId=alice&page=5&size=10", alice, nil, 200)["content"].([]any)
	want := []int{t4, t2, t1} // oldest three on the last page, newest first (t3 is just above)
	if len(last) != 4 || id(last[1].(map[string]any)) != want[0] || id(last[2].(map[string]any)) != want[1] ||
		id(last[3].(map[string]any)) != want[2] {
		t.Fatalf("last page: %v", last)
	}
	must(s, "GET", "/transfers?userId=alice", bob, nil, 403)
	// The conservation check (FUNDING + SPOT) holds to the unit; the initial balances count as adjustments.
	if inv := must(s, "GET", "/admin/v1/invariants", admin, nil, 200); inv["ok"] != true {
		t.Fatalf("invariants: %v", inv)
	}
	// Postgres: the sink's tables.
	conn, err := pgx.Connect(context.Background(), pg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	q := func(sql string) int64 {
		var v int64
		if err := conn.QueryRow(context.Background(), sql).Scan(&v); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return v
	}
	deadline = time.Now().Add(20 * time.Second)
	for q(`SELECT count(*) FROM p2p_transfers WHERE status = 'COMPLETED'`) != int64(3+many) {
		if time.Now().After(deadline) {
			t.Fatalf("p2p_transfers: %d completed", q(`SELECT count(*) FROM p2p_transfers WHERE status = 'COMPLETED'`))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := q(`SELECT count(*) FROM p2p_transfers WHERE status = 'CANCELLED'`); n != 1 {
		t.Fatalf("cancelled rows: %d", n)
	}
	if n := q(`SELECT count(*) FROM balance_changes WHERE type IN ('transfer_out', 'transfer_in')`); n != 2*int64(3+many) {
		t.Fatalf("balance_changes: %d", n)
	}
	if b := q(`SELECT balance FROM user_balances WHERE user_id = 'bob'`); b != 10123 {
		t.Fatalf("user_balances bob: %d", b)
	}
	// JetStream: every event once, in order (ids strictly increasing), the transfer events as expected.
	st, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var events []map[string]any
	deadline = time.Now().Add(20 * time.Second)
	for {
		events = events[:0]
		info, err := st.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var prevSeq, prevIdx = uint64(0), -1
		completed := 0
		for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := st.GetMsg(context.Background(), seq)
			if err != nil {
				t.Fatal(err)
			}
			cs, idx, ok := publish.ParseMsgID(m.Header.Get(jetstream.MsgIDHeader))
			if !ok || uint64(cs) < prevSeq || (uint64(cs) == prevSeq && idx <= prevIdx) {
				t.Fatalf("message %d: id %q after %d-%d", seq, m.Header.Get(jetstream.MsgIDHeader), prevSeq, prevIdx)
			}
			prevSeq, prevIdx = uint64(cs), idx
			var ev map[string]any
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatal(err)
			}
			if ev["eventType"] == "TRANSFER_COMPLETED" {
				completed++
			}
			events = append(events, ev)
		}
		if completed == 3+many {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream: %d transfers completed, want %d", completed, 3+many)
		}
		time.Sleep(100 * time.Millisecond)
	}
	byTransfer := map[int][]string{}
	for _, ev := range events {
		if tid, ok := ev["transferId"].(float64); ok {
			byTransfer[int(tid)] = append(byTransfer[int(tid)], ev["eventType"].(string))
		}
	}
	for tid, want := range map[int]string{t1: "TRANSFER_CREATED,TRANSFER_COMPLETED", t2: "TRANSFER_CREATED,TRANSFER_CANCELLED",
		t3: "TRANSFER_CREATED,TRANSFER_COMPLETED", t4: "TRANSFER_CREATED,TRANSFER_COMPLETED"} {
		if got := fmt.Sprint(byTransfer[tid]); got != "["+replaceComma(want)+"]" {
			t.Fatalf("transfer %d events %s, want %s", tid, got, want)
		}
	}
	if len(byTransfer) != 4+many {
		t.Fatalf("%d transfers in the stream, want %d", len(byTransfer), 4+many)
	}
	s.Stop()
}

func replaceComma(s string) string {
	out := []byte(s)
	for i := range out {
		if out[i] == ',' {
			out[i] = ' '
		}
	}
	return string(out)
}
