package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/persist/pgtest"
)

// TestE2EOrderHistory (issue 20): the order history and my-trades of the
// real binary with a window of 3 (--history-window): orders and trades
// older than what the server keeps in memory come from Postgres, every page
// joins the two without a gap or a repeat, and the listing agrees with GET
// /order/{id}, before and after a restart (History rebuilt from the WAL).
func TestE2EOrderHistory(t *testing.T) {
	t.Parallel() // waits on servers and Postgres more than it computes
	pg := pgtest.NewDB(t)
	dir := t.TempDir()
	flags := []string{"--history-window", "3"}
	s := e2eStart(t, dir, pg, flags...)
	e2eFund(t, s, 2)
	seller, buyer := s.token(1, false), s.token(2, false)
	var ids []uint64 // user 1's orders
	for i := range 12 {
		st, o := s.do("POST", "/api/v1/order", seller, map[string]any{"market": "BTC-USDT", "side": "SELL", "type": "LIMIT",
			"price": fmt.Sprint(50000 + i), "quantity": "0.01", "client_order_id": fmt.Sprintf("h-%d", i)})
		if st != 200 {
			t.Fatalf("order: %d %v", st, o)
		}
		id := uint64(o["order_id"].(float64))
		ids = append(ids, id)
		switch i % 3 {
		case 0: // filled by user 2
			if st, b := s.do("POST", "/api/v1/order", buyer, map[string]any{"market": "BTC-USDT", "side": "BUY", "type": "LIMIT",
				"price": fmt.Sprint(50000 + i), "quantity": "0.01"}); st != 200 || b["status"] != "FILLED" {
				t.Fatalf("buy: %d %v", st, b)
			}
		case 1:
			if st, b := s.do("DELETE", fmt.Sprintf("/api/v1/order/%d", id), seller, nil); st != 200 {
				t.Fatalf("cancel: %d %v", st, b)
			}
		}
	}
	slices.Reverse(ids)
	if st, h := s.do("GET", "/health", "", nil); st != 200 || h["history"].(map[string]any)["finished_orders"].(float64) > 3 {
		t.Fatalf("the window does not bound the finished orders in memory: %d %v", st, h)
	}

	listAll := func(path, key, tok string) []map[string]any {
		var out []map[string]any
		cursor := ""
		for {
			p := path + "&limit=4"
			if cursor != "" {
				p += "&cursor=" + cursor
			}
			st, page := s.do("GET", p, tok, nil)
			if st != 200 {
				t.Fatalf("%s: %d %v", p, st, page)
			}
			for _, it := range page[key].([]any) {
				out = append(out, it.(map[string]any))
			}
			c, _ := page["next_cursor"].(string)
			if c == "" {
				return out
			}
			cursor = c
		}
	}
	check := func(when string) {
		t.Helper()
		got := listAll("/api/v1/orders?status=all", "orders", seller)
		var gotIDs []uint64
		for _, o := range got {
			gotIDs = append(gotIDs, uint64(o["order_id"].(float64)))
			st, g := s.do("GET", fmt.Sprintf("/api/v1/order/%v", o["order_id"]), seller, nil)
			if st != 200 || g["status"] != o["status"] || g["filled_quantity"] != o["filled_quantity"] ||
				g["client_order_id"] != o["client_order_id"] || g["time"] != o["time"] || o["time"] == nil {
				t.Fatalf("%s: listed %v, GET %d %v", when, o, st, g)
			}
		}
		if !slices.Equal(gotIDs, ids) {
			t.Fatalf("%s: history %v, want %v", when, gotIDs, ids)
		}
		if n := len(listAll("/api/v1/orders?status=filled", "orders", seller)); n != 4 {
			t.Fatalf("%s: %d filled orders, want 4", when, n)
		}
		if n := len(listAll("/api/v1/orders?status=open", "orders", seller)); n != 4 {
			t.Fatalf("%s: %d open orders, want 4", when, n)
		}
		mine := listAll("/api/v1/my-trades?market=BTC-USDT", "trades", seller)
		theirs := listAll("/api/v1/my-trades?x=1", "trades", buyer)
		if len(mine) != 4 || len(theirs) != 4 {
			t.Fatalf("%s: trades %v / %v, want 4 each", when, mine, theirs)
		}
		for i := range mine {
			if mine[i]["trade_id"] != theirs[i]["trade_id"] || mine[i]["is_maker"] != true || theirs[i]["is_maker"] != false ||
				mine[i]["side"] != "SELL" || theirs[i]["side"] != "BUY" || mine[i]["price"] != theirs[i]["price"] {
				t.Fatalf("%s: trade %d: %v / %v", when, i, mine[i], theirs[i])
			}
		}
	}
	e2eWaitSink(t, s, pg)
	check("running")
	s.Stop()
	s = e2eStart(t, dir, pg, flags...)
	check("after a restart")
	s.Stop()
	// The data dir names its instruments for tools that read it (replay state).
	var names gateway.Names
	if b, err := os.ReadFile(filepath.Join(dir, "instruments.json")); err != nil || json.Unmarshal(b, &names) != nil ||
		len(names.Markets) != 2 || names.Markets[0].Symbol != "BTC-USDT" || names.Markets[0].Base != "BTC" ||
		len(names.Assets) != 4 || names.Assets[0].Symbol != "USDT" || names.Assets[0].Scale != 6 {
		t.Fatalf("instruments.json: %+v %v", names, err)
	}
}
