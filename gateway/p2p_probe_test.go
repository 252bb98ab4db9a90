package gateway

// Handles and transfer ids cannot be probed (issue 41 #7): what a caller
// cannot see answers exactly like what does not exist. A non-admin acting
// as a handle not its own gets the same 403 whether the handle exists or
// not (an admin keeps the spec's SENDER_NOT_FOUND); a transfer the caller
// neither sent nor receives is the same 404 as an unknown id; its
// recipient, who sees it in GET /transfers, gets 403.

import "testing"

// sameAnswer requires two spec 003 error answers to be equal but for the timestamp.
func sameAnswer(t *testing.T, what string, a, b map[string]any) {
	t.Helper()
	for _, k := range []string{"status", "error", "message", "code"} {
		if a[k] != b[k] {
			t.Fatalf("%s: %s differs: %v vs %v", what, k, a, b)
		}
	}
}

func TestP2PSenderCannotBeProbed(t *testing.T) {
	h := newP2PHarness(t)
	alice, _ := h.p2pUsers()
	nohandle := h.token(99) // a user without a handle
	for _, tok := range []string{alice, nohandle} {
		real := h.p2pFails("POST", "/transfers", tok, `{"fromUserId":"bob","toUserId":"alice","amount":1}`, 403, CodeForbidden)
		unknown := h.p2pFails("POST", "/transfers", tok, `{"fromUserId":"nobody","toUserId":"alice","amount":1}`, 403, CodeForbidden)
		sameAnswer(t, "another's handle vs an unknown one", real, unknown)
	}
	h.p2pFails("POST", "/transfers", h.admin, `{"fromUserId":"nobody","toUserId":"alice","amount":1}`, 400, "SENDER_NOT_FOUND")
	h.ok("POST", "/transfers", h.admin, `{"fromUserId":"alice","toUserId":"bob","amount":1}`)
}

func TestP2PTransferIDsCannotBeProbed(t *testing.T) {
	h := newP2PHarness(t)
	alice, bob := h.p2pUsers()
	h.ok("POST", "/balance-service/users", h.admin, `{"userId":"carol","initialBalance":0,"id":13}`)
	carol, nohandle := h.token(13), h.token(99)
	h.ok("POST", "/transfers", alice, `{"fromUserId":"alice","toUserId":"bob","amount":10}`) // transfer 1
	for _, tok := range []string{carol, nohandle} {
		unknown := h.p2pFails("POST", "/transfers/999/cancel", tok, "", 404, CodeTransferNotFound)
		hidden := h.p2pFails("POST", "/transfers/1/cancel", tok, "", 404, CodeTransferNotFound)
		sameAnswer(t, "another's transfer vs an unknown id", unknown, hidden)
	}
	h.p2pFails("POST", "/transfers/1/cancel", bob, "", 403, CodeForbidden) // the recipient sees it
	if out := h.ok("POST", "/transfers/1/cancel", alice, ""); out["status"] != "CANCELLED" {
		t.Fatalf("the sender's cancel: %v", out)
	}
}
