package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/pgtest"
)

// TestP2PRetentionEndToEnd (issue 39) runs the retention of finished
// transfers on the real binary with Postgres, a 2 s retention and no hold:
// transfers executed leave the core (a cancel of one answers 404 once it
// is forgotten); a requestId repeated inside the retention answers the
// first transfer and, after it, makes a new one (the documented
// exception); the history pages of a user whose older transfers only
// Postgres holds and whose newest the core still holds are complete, in
// order, each transfer once, for two page sizes, before and after a
// SIGKILL and restart.
func TestP2PRetentionEndToEnd(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewDB(t)
	dir := t.TempDir()
	flags := []string{"--p2p-hold", "0s", "--p2p-retention", "2s"}
	s := e2eStart(t, dir, pg, flags...)
	admin, alice := s.token(1000, true), s.token(11, false)
	must := func(s *e2eServer, method, path, tok string, body any, want int) map[string]any {
		t.Helper()
		st, out := s.do(method, path, tok, body)
		if st != want {
			t.Fatalf("%s %s %v: %d %v, want %d", method, path, body, st, out, want)
		}
		return out
	}
	for _, u := range []string{`{"userId":"alice","initialBalance":1000,"id":11}`, `{"userId":"bob","initialBalance":1000,"id":12}`} {
		must(s, "POST", "/balance-service/users", admin, u, 200)
	}
	id := func(m map[string]any) int { return int(m["transferId"].(float64)) }
	var all []int // alice's transfers, oldest first
	send := func(from, to, req string) int {
		body := fmt.Sprintf(`{"fromUserId":%q,"toUserId":%q,"amount":1}`, from, to)
		if req != "" {
			body = fmt.Sprintf(`{"fromUserId":%q,"toUserId":%q,"amount":1,"requestId":%q}`, from, to, req)
		}
		n := id(must(s, "POST", "/transfers", admin, body, 200))
		all = append(all, n)
		return n
	}
	first := send("alice", "bob", "pay-1")
	for i := range 12 {
		if i%3 == 0 {
			send("bob", "alice", "")
		} else {
			send("alice", "bob", "")
		}
	}
	// inside the retention: the first transfer, not a new one
	if again := id(must(s, "POST", "/transfers", admin, `{"fromUserId":"alice","toUserId":"bob","amount":1,"requestId":"pay-1"}`, 200)); again != first {
		t.Fatalf("a repeat inside the retention made transfer %d, first %d", again, first)
	}
	// executed at the next tick, forgotten about 2 s later: the cancel finds nothing
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _ := s.do("POST", "/transfers/"+strconv.Itoa(first)+"/cancel", alice, nil)
		if st == 404 {
			break
		}
		if st != 400 || time.Now().After(deadline) {
			t.Fatalf("cancel of an executed transfer: %d (want 400, then 404 once forgotten)", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for !strings.Contains(s.Logs(), "p2p: the core forgot finished transfers past the retention") {
		if time.Now().After(deadline) {
			t.Fatal("no forget logged")
		}
		time.Sleep(20 * time.Millisecond) // logged once the forget's answer is back: after the view has it
	}
	// after the retention the requestId is free: a new transfer (docs/p2p-retention.md)
	second := send("alice", "bob", "pay-1")
	if second == first {
		t.Fatal("a repeat after the retention answered the forgotten transfer")
	}
	for range 3 { // the newest: still in the core
		send("alice", "bob", "")
	}
	want := slices.Clone(all)
	slices.Reverse(want)
	pages := func(s *e2eServer, size int) []int {
		t.Helper()
		var got []int
		for page := 1; ; page++ {
			h := must(s, "GET", fmt.Sprintf("/transfers?userId=alice&page=%d&size=%d", page, size), alice, nil, 200)
			if h["totalElements"] != float64(len(all)) {
				t.Fatalf("page %d size %d: totalElements %v, want %d", page, size, h["totalElements"], len(all))
			}
			c := h["content"].([]any)
			if len(c) == 0 {
				return got
			}
			for _, x := range c {
				tr := x.(map[string]any)
				if tr["fromUserId"] != "alice" && tr["toUserId"] != "alice" || tr["amount"] != 1.0 {
					t.Fatalf("not alice's: %v", tr)
				}
				got = append(got, int(tr["transferId"].(float64)))
			}
		}
	}
	check := func(s *e2eServer, when string) {
		t.Helper()
		for _, size := range []int{2, 7} {
			if got := pages(s, size); !slices.Equal(got, want) {
				t.Fatalf("%s, pages of %d:\n got %v\nwant %v", when, size, got, want)
			}
		}
	}
	check(s, "before the restart")
	s.Kill()
	s = e2eStart(t, dir, pg, flags...)
	check(s, "after the restart")
	// and once everything is forgotten, Postgres answers every page
	deadline = time.Now().Add(30 * time.Second)
	for {
		if st, _ := s.do("POST", "/transfers/"+strconv.Itoa(all[len(all)-1])+"/cancel", alice, nil); st == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the newest transfer was never forgotten")
		}
		time.Sleep(100 * time.Millisecond)
	}
	check(s, "all forgotten")
	s.Stop()
}
