package main

// The withdrawal guards over HTTP against the real binary, Postgres and
// anvil (issue 33 items 3 and 6): an empty hot wallet answers 409
// HOT_WALLET_INSUFFICIENT with nothing debited and a CRITICAL log, a refill
// lets withdrawals through after the next background refresh; the default
// daily limit (flag) answers 409 WITHDRAWAL_LIMIT, the admin endpoints
// override it per user and keep an allowlist (403 ADDRESS_NOT_ALLOWED);
// the metrics are exported.

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/pgtest"
)

func TestWithdrawalGuardsEndToEnd(t *testing.T) {
	t.Parallel() // own database and anvil; waits on them more than it computes
	node := anviltest.StartT(t)
	pg := pgtest.NewDB(t)
	key, hot := node.NewKey(t)
	keyFile := hotKeyFile(t, key)
	s := e2eStart(t, t.TempDir(), pg, "--chain-rpc", node.URL, "--chain-key-file", keyFile, "--chain-finality", "2",
		"--chain-balance-interval", "100ms", "--chain-balance-margin", "0.01", "--chain-withdraw-limits", "ETH:0.5:3",
		"--invariant-interval", "0")
	x := newXT(t, s, pg)
	user := x.user()
	tok := x.tok(user)
	x.deposit(user, "ETH", "1")
	to := evm.Checksummed(anviltest.Addr(0xe2e))
	withdraw := func(amount, addr string) (int, map[string]any) {
		return s.do("POST", "/api/v1/withdrawals", tok, map[string]any{"asset": "ETH", "amount": amount, "address": addr})
	}
	// gauge waits for the background refresh to export the balance.
	gauge := func(wei string) {
		t.Helper()
		re := regexp.MustCompile(`(?m)^ubs_chain_hot_wallet_balance (\S+)$`)
		want, _ := new(big.Float).SetString(wei)
		for end := time.Now().Add(10 * time.Second); ; {
			_, m := s.doRaw("GET", "/metrics", "", nil)
			if g := re.FindSubmatch(m); g != nil {
				if v, ok := new(big.Float).SetString(string(g[1])); ok && v.Cmp(want) == 0 {
					return
				}
			}
			if time.Now().After(end) {
				t.Fatalf("ubs_chain_hot_wallet_balance never %s:\n%s", wei, m)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// An empty wallet: refused, nothing debited, a CRITICAL alert.
	if err := node.SetBalance(hot, new(big.Int)); err != nil {
		t.Fatal(err)
	}
	gauge("0")
	if st, b := withdraw("0.1", to); st != 409 || b["code"] != "HOT_WALLET_INSUFFICIENT" {
		t.Fatalf("empty hot wallet: %d %v", st, b)
	}
	if b := x.bal(user); b["ETH"].Funding != 100_000_000 {
		t.Fatalf("a refused withdrawal debited: %+v", b["ETH"])
	}
	for end := time.Now().Add(10 * time.Second); !regexp.MustCompile(`CRITICAL.*hot wallet cannot pay`).MatchString(s.Logs()); {
		if time.Now().After(end) { // logged just after the gauge is set
			t.Fatalf("no CRITICAL alert for the empty hot wallet:\n%s", s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A refill lets it through once refreshed.
	wei, _ := new(big.Int).SetString("10000000000000000000", 10)
	if err := node.SetBalance(hot, wei); err != nil {
		t.Fatal(err)
	}
	gauge("1e+19")
	if st, b := withdraw("0.1", to); st != 202 || b["state"] != "PENDING" {
		t.Fatalf("after the refill: %d %v", st, b)
	}

	// The flag's default limit (0.5 ETH, 3 a day); a user's own; the allowlist.
	if st, b := withdraw("0.45", to); st != 409 || b["code"] != "WITHDRAWAL_LIMIT" {
		t.Fatalf("over the daily amount: %d %v", st, b)
	}
	path := fmt.Sprintf("/admin/v1/users/%d/withdrawal-limits", user)
	st, lim := s.do("GET", path, x.admin, nil)
	if st != 200 || !strings.Contains(fmt.Sprint(lim["limits"]), "daily_amount:0.50000000 daily_count:3 source:default used_amount:0.10000000 used_count:1") {
		t.Fatalf("limits: %d %v", st, lim)
	}
	if st, b := s.do("GET", path, tok, nil); st != 401 && st != 403 {
		t.Fatalf("a user read the admin limits: %d %v", st, b)
	}
	if st, lim = s.do("POST", path, x.admin, map[string]any{"asset": "ETH", "daily_amount": "0.6", "daily_count": 0}); st != 200 ||
		!strings.Contains(fmt.Sprint(lim["limits"]), "daily_amount:0.60000000 daily_count:0 source:user") {
		t.Fatalf("set limit: %d %v", st, lim)
	}
	if st, b := withdraw("0.45", to); st != 202 {
		t.Fatalf("under the user's own limit: %d %v", st, b)
	}
	allow := fmt.Sprintf("/admin/v1/users/%d/withdrawal-allowlist", user)
	if st, b := s.do("POST", allow, x.admin, map[string]any{"address": to}); st != 200 || fmt.Sprint(b["allowlist"]) != "["+to+"]" {
		t.Fatalf("allow: %d %v", st, b)
	}
	if st, b := withdraw("0.01", evm.Checksummed(anviltest.Addr(0xbad))); st != 403 || b["code"] != "ADDRESS_NOT_ALLOWED" {
		t.Fatalf("an address off the allowlist: %d %v", st, b)
	}
	if b := x.bal(user); b["ETH"].Funding != 45_000_000 {
		t.Fatalf("funding %+v, want 0.45 ETH", b["ETH"])
	}
	if st, b := s.do("DELETE", allow+"?address="+to, x.admin, nil); st != 200 || fmt.Sprint(b["allowlist"]) != "[]" {
		t.Fatalf("disallow: %d %v", st, b)
	}
	if st, b := s.do("DELETE", path+"?asset=ETH", x.admin, nil); st != 200 || !strings.Contains(fmt.Sprint(b["limits"]), "source:default") {
		t.Fatalf("clear limit: %d %v", st, b)
	}
	_, m := s.doRaw("GET", "/metrics", "", nil)
	for _, name := range []string{"ubs_chain_hot_wallet_balance", "ubs_chain_hot_wallet_required", "ubs_chain_hot_wallet_refresh_total"} {
		if !strings.Contains(string(m), name) {
			t.Fatalf("metric %s missing", name)
		}
	}
}
