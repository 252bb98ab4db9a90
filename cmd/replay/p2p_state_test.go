package main

// `replay state --user` shows a user's transfers (spec 003) as of a seq:
// the handle, the PENDING ones holding funds and the newest, from a data
// dir written by the real pipeline.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

func TestStateP2P(t *testing.T) {
	key := func(s string) core.Key { k, _ := core.KeyFrom(s); return k }
	const alice, bob core.UserID = 101, 102
	hour := core.Units(time.Hour)
	cmds := []core.Command{
		{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 2},
		{Kind: core.KindP2PCreateUser, User: alice, Text: "alice", Asset: 1, Amount: 10_000},
		{Kind: core.KindP2PCreateUser, User: bob, Text: "bob", Asset: 1},
		{Kind: core.KindP2PTransfer, User: alice, OrderID: core.OrderID(bob), Asset: 1, Amount: 1_000, Key: key("r1")}, // #1, due at once
		{Kind: core.KindP2PTransfer, User: alice, OrderID: core.OrderID(bob), Asset: 1, Amount: 500, Qty: hour, Key: key("r2")},
		{Kind: core.KindP2PTick}, // executes #1
		{Kind: core.KindP2PTransfer, User: bob, OrderID: core.OrderID(alice), Asset: 1, Amount: 100, Qty: hour}, // #3
		{Kind: core.KindP2PCancel, User: bob, OrderID: 3},
		// the retention: forgets what finished by command 5's time (#1, executed by the tick)
		{Kind: core.KindP2PForget, Price: core.Price(int64(1_700_000_006) * int64(time.Second))},
	}
	const beforeForget = 8
	now := int64(1_700_000_000) * int64(time.Second)
	dir := pipelineDir(t, cmds, func() int64 { now += int64(time.Second); return now })
	state := func(user core.UserID, at int) userState {
		t.Helper()
		code, out, errs := runReplay(t, "state", "--json", "--quiet", "--raw", "--data", dir, "--to", strconv.Itoa(at),
			"--user", strconv.FormatUint(uint64(user), 10))
		if code != exitOK {
			t.Fatalf("state --user %d --to %d: exit %d: %s", user, at, code, errs)
		}
		var st userState
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	ids := func(ts []p2pTransferView) string {
		var b strings.Builder
		for _, x := range ts {
			b.WriteString(" #" + strconv.FormatUint(x.ID, 10) + " " + x.Status)
		}
		return b.String()
	}

	// As of seq 5: both of alice's transfers wait.
	st := state(alice, 5)
	if st.P2P == nil || st.P2P.Handle != "alice" || st.P2P.Transfers != 2 ||
		ids(st.P2P.Pending) != " #2 PENDING #1 PENDING" || ids(st.P2P.Recent) != " #2 PENDING #1 PENDING" {
		t.Fatalf("alice at seq 5: %+v", st.P2P)
	}
	// Before the forget: #1 executed, #3 cancelled, #2 still holds 500 of alice's.
	st = state(alice, beforeForget)
	p := st.P2P
	if p == nil || p.Transfers != 3 || ids(p.Pending) != " #2 PENDING" ||
		ids(p.Recent) != " #3 CANCELLED #2 PENDING #1 COMPLETED" {
		t.Fatalf("alice at the end: %+v", p)
	}
	// The clock gives command i (from 0) the time 2023-11-14T22:13:20Z + i+1 seconds.
	at := func(s int) string { return time.Unix(1_700_000_000+int64(s), 0).UTC().Format(time.RFC3339Nano) }
	want := []p2pTransferView{
		{ID: 3, From: bob, To: alice, Asset: "#1", Amount: "100", Status: "CANCELLED", CreatedAt: at(7), ExecuteAt: at(7 + 3600), DoneAt: at(8)},
		{ID: 2, From: alice, To: bob, Asset: "#1", Amount: "500", Status: "PENDING", CreatedAt: at(5), ExecuteAt: at(5 + 3600)},
		{ID: 1, From: alice, To: bob, Asset: "#1", Amount: "1000", Status: "COMPLETED", CreatedAt: at(4), ExecuteAt: at(4), DoneAt: at(6)},
	}
	if fmt.Sprint(p.Recent) != fmt.Sprint(want) || p.CreatedAt != at(2) {
		t.Fatalf("alice's transfers:\n got %+v (user created %s)\nwant %+v (%s)", p.Recent, p.CreatedAt, want, at(2))
	}
	// After it the core retains #3 and #2 only, and says it forgot one.
	if st := state(alice, len(cmds)); st.P2P == nil || st.P2P.Transfers != 2 || st.P2P.Forgotten != 1 ||
		ids(st.P2P.Recent) != " #3 CANCELLED #2 PENDING" {
		t.Fatalf("alice after the forget: %+v", st.P2P)
	}
	if st := state(bob, len(cmds)); st.P2P == nil || st.P2P.Handle != "bob" || ids(st.P2P.Pending) != " #2 PENDING" {
		t.Fatalf("bob at the end: %+v", st.P2P)
	}
	// No transfer-service state: no p2p section.
	if code, out, _ := runReplay(t, "state", "--json", "--quiet", "--data", dir, "--user", "0"); code != exitOK ||
		strings.Contains(out, `"p2p"`) {
		t.Fatalf("fee account: exit %d: %s", code, out)
	}
	// The human form.
	code, out, _ := runReplay(t, "state", "--quiet", "--raw", "--data", dir, "--user", strconv.Itoa(int(alice)))
	if code != exitOK || !strings.Contains(out, "transfers: handle alice, 2 retained by the core at this seq, 1 pending; "+
		"1 finished ones forgotten by then (past the retention: see p2p_transfers)") ||
		!strings.Contains(out, "#2 from 101 to 102, 500 #1, PENDING (created 2023-11-14T22:13:25Z, executes 2023-11-14T23:13:25Z)\n") {
		t.Fatalf("human state: exit %d:\n%s", code, out)
	}
}
