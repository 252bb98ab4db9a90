package main

// Issue 33 item 1, end to end over HTTP: a tx signed with the hot key
// outside the exchange (go-ethereum, directly) is mined in the nonce of a
// withdrawal's tx. The withdrawal's tx goes STUCK and stays unrefunded;
// remediate CANCEL is refused 409 NONCE_TAKEN; RESOLVE_FOREIGN is refused
// 409 NONCE_NOT_FINAL until the nonce is --chain-finality deep, then makes
// the tx FAILED_FINAL FOREIGN_NONCE, audited with the admin and the reason,
// and the withdrawal is CANCELLED and refunded to FUNDING exactly once;
// repeated, 409 TX_FINAL. Conservation stays exact.

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/anviltest"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/pgtest"
)

func TestE2EWithdrawalForeignNonceResolvedOnce(t *testing.T) {
	node := anviltest.StartT(t)
	pg := pgtest.NewDB(t)
	key, _ := node.NewKey(t)
	if err := node.Automine(false); err != nil {
		t.Fatal(err)
	}
	keyFile := hotKeyFile(t, key)
	s := e2eStart(t, t.TempDir(), pg, "--chain-rpc", node.URL, "--chain-key-file", keyFile, "--chain-finality", "2",
		"--chain-resubmit-interval", "1s", "--chain-stuck-after", "500ms", "--invariant-interval", "0")
	x := newXT(t, s, pg)
	user := x.user()
	tok := x.tok(user)
	x.deposit(user, "ETH", "1")
	to := anviltest.Addr(0xf33)
	st, w := s.do("POST", "/api/v1/withdrawals", tok, map[string]any{"asset": "ETH", "amount": "0.5", "address": evm.Checksummed(to)})
	if st != 202 || w["state"] != "PENDING" {
		t.Fatalf("withdraw: %d %v", st, w)
	}
	wPath := "/api/v1/withdrawals/" + fmt.Sprint(w["withdrawal_id"])
	poll := func(what string, within time.Duration, path, tok string, pred func(map[string]any) bool) map[string]any {
		t.Helper()
		end := time.Now().Add(within)
		for {
			st, b := s.do("GET", path, tok, nil)
			if st == 200 && pred(b) {
				return b
			}
			if time.Now().After(end) {
				t.Fatalf("%s never %s: %d %v", path, what, st, b)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	w = poll("sent", 10*time.Second, wPath, tok, func(b map[string]any) bool { return b["tx_state"] == "TRACKING" || b["tx_state"] == "STUCK" })
	txPath := "/admin/v1/tx/" + fmt.Sprint(w["tx_id"])
	tx := poll("allocated", time.Second, txPath, x.admin, func(b map[string]any) bool { return b["nonce"] != nil })
	var nonce uint64
	if _, err := fmt.Sscan(fmt.Sprint(tx["nonce"]), &nonce); err != nil {
		t.Fatal(err)
	}

	// Someone with the hot key takes the nonce.
	if err := node.Drop(chaintx.Hash(fmt.Sprint(tx["tx_hash"]))); err != nil {
		t.Fatal(err)
	}
	node.SendForeign(t, key, nonce, anviltest.Addr(0xf34), 9)
	if err := node.Mine(1); err != nil {
		t.Fatal(err)
	}
	poll("STUCK", 10*time.Second, wPath, tok, func(b map[string]any) bool { return b["tx_state"] == "STUCK" && b["state"] == "PENDING" })

	remediate := func(action string, status int, code string) map[string]any {
		t.Helper()
		st, b := s.do("POST", txPath+"/remediate", x.admin, map[string]any{"action": action, "reason": "hot key used outside the exchange"})
		if st != status || (code != "" && b["code"] != code) {
			t.Fatalf("remediate %s: %d %v, want %d %s", action, st, b, status, code)
		}
		return b
	}
	remediate("CANCEL", 409, "NONCE_TAKEN")
	remediate("RESOLVE_FOREIGN", 409, "NONCE_NOT_FINAL") // one block deep, finality 2
	if err := node.Mine(1); err != nil {
		t.Fatal(err)
	}
	r := remediate("resolve_foreign", 200, "")
	if r["action"] != "RESOLVE_FOREIGN" || !strings.Contains(fmt.Sprint(r["reason"]), "operator: admin 1: hot key used") {
		t.Fatalf("the audit row: %v", r)
	}
	w = poll("CANCELLED", 10*time.Second, wPath, tok, func(b map[string]any) bool { return b["state"] == "CANCELLED" })
	if w["tx_state"] != "FAILED_FINAL" {
		t.Fatalf("refunded: %v", w)
	}
	remediate("RESOLVE_FOREIGN", 409, "TX_FINAL")
	if err := node.Mine(3); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the settler's later passes refund nothing more
	if b := x.bal(user); b["ETH"].Funding != 100_000_000 {
		t.Fatalf("funding after the refund: %+v, want 1 ETH (refunded once)", b["ETH"])
	}
	if bal, err := node.Balance(to); err != nil || bal.Cmp(new(big.Int)) != 0 {
		t.Fatalf("the withdrawal's address holds %v wei (%v), want none", bal, err)
	}
	if st, inv := s.do("GET", "/admin/v1/invariants", x.admin, nil); st != 200 || inv["ok"] != true {
		t.Fatalf("conservation: %d %v", st, inv)
	}
	s.Stop()
}
