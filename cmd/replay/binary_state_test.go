package main

// This file proves `replay state` on binary markets (issue 22): a data dir
// written by the real pipeline (periodic snapshots between the
// commands) replays to the same binary market and positions as a direct
// core replay, at the end and as of an earlier seq (--to).

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
)

const binaryQuestion = `Will "it" rain in Lisbon on 1 May 2027? ☔`

func binaryCmds() []core.Command {
	key := func(s string) core.Key { k, _ := core.KeyFrom(s); return k }
	order := func(u core.UserID, side core.Side, out core.Outcome, price core.Price, qty core.Units) core.Command {
		return core.Command{Kind: core.KindPlaceOrder, User: u, Market: 7, Side: side, Type: core.Limit, TIF: core.GTC,
			Price: price, Qty: qty, Flags: uint8(out)}
	}
	return []core.Command{
		{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 2},
		{Kind: core.KindConfigBinary, Market: 7, Cfg: core.MarketCfg{Quote: 1, Lot: 1, MinQty: 1, MaxQty: 1000,
			MakerFee: 1_000, TakerFee: 2_000}, Text: binaryQuestion},
		{Kind: core.KindSpotDeposit, User: 1, Asset: 1, Amount: 100_000, Key: key("d1")},
		{Kind: core.KindSpotDeposit, User: 2, Asset: 1, Amount: 100_000, Key: key("d2")},
		{Kind: core.KindActivate, Market: 7},
		order(1, core.Buy, core.OutcomeYes, 60, 100),
		order(2, core.Buy, core.OutcomeNo, 40, 100), // mint 100 at 60/40
		order(1, core.Sell, core.OutcomeYes, 70, 30),
		order(2, core.Buy, core.OutcomeNo, 20, 10), // book SELL @80: rests
		{Kind: core.KindResolve, Market: 7, Flags: uint8(core.OutcomeYes)},
		{Kind: core.KindSettle, Market: 7, Qty: 1},
	}
}

func TestStateBinary(t *testing.T) {
	cmds := binaryCmds()
	dir := pipelineDir(t, cmds, nil)
	var direct *core.Processor
	raw := &names{assets: map[core.AssetID]gateway.NamedAsset{}, markets: map[core.MarketID]gateway.NamedMarket{}}
	for _, at := range []int{9, len(cmds)} { // before the resolution, and after one settle slice
		direct = core.New(core.Config{})
		for i := 0; i < at; i++ {
			c := cmds[i]
			c.Seq, c.Time = core.Seq(i+1), int64(i+1)
			direct.Apply(&c)
		}
		code, out, errs := runReplay(t, "state", "--json", "--quiet", "--data", dir, "--to", strconv.Itoa(at), "--market", "7")
		if code != exitOK {
			t.Fatalf("state --market 7 --to %d: exit %d: %s", at, code, errs)
		}
		var ms marketState
		if err := json.Unmarshal([]byte(out), &ms); err != nil {
			t.Fatal(err)
		}
		want, _ := marketView(direct, 7, 10, raw, true)
		if ms.Binary == nil || fmt.Sprint(*ms.Binary) != fmt.Sprint(*want.Binary) || ms.Status != want.Status ||
			ms.Binary.Question != binaryQuestion {
			t.Fatalf("market 7 at %d:\n got %+v %+v\nwant %+v %+v", at, ms, ms.Binary, want, want.Binary)
		}
		code, out, errs = runReplay(t, "state", "--json", "--quiet", "--data", dir, "--to", strconv.Itoa(at), "--user", "1")
		if code != exitOK {
			t.Fatalf("state --user 1: exit %d: %s", code, errs)
		}
		var us userState
		if err := json.Unmarshal([]byte(out), &us); err != nil {
			t.Fatal(err)
		}
		if w := userView(direct, 1, 0, raw, true); fmt.Sprint(us) != fmt.Sprint(w) {
			t.Fatalf("user 1 at %d:\n got %+v\nwant %+v", at, us, w)
		}
		switch at {
		case 9: // trading: reserve 100 x 100, user 1 holds 100 YES with 30 pending, one open order each
			if ms.Binary.Reserve != "10000" || ms.Binary.YesShares != 100 || ms.Binary.Settling || len(us.Positions) != 1 ||
				us.Positions[0].YesVolume != 100 || us.Positions[0].YesPending != 30 || len(us.OpenOrders) != 1 ||
				us.OpenOrders[0].Outcome != "YES" || us.OpenOrders[0].BookType != "NATIVE" {
				t.Fatalf("at %d: %+v %+v", at, ms.Binary, us)
			}
		default: // resolved YES, one position of two paid
			if ms.Status != "RESOLVED" || !ms.Binary.Settling || ms.Binary.Outcome != "YES" || ms.Binary.Settled != 1 ||
				len(us.OpenOrders) != 0 {
				t.Fatalf("at %d: %+v %+v", at, ms.Binary, us)
			}
		}
	}
	code, out, _ := runReplay(t, "state", "--quiet", "--data", dir, "--market", "7")
	if code != exitOK || !strings.Contains(out, "binary: payout 100, outcome YES, settling true") ||
		!strings.Contains(out, "  question \"Will \\\"it\\\" rain in Lisbon on 1 May 2027? ☔\"\n") {
		t.Fatalf("human state --market 7: exit %d: %s", code, out)
	}
	code, out, _ = runReplay(t, "dump", "--data", dir, "--from", "2", "--to", "2") // the config command
	var dumped struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &dumped) != nil || dumped.Kind != "CONFIG_BINARY" ||
		dumped.Text != binaryQuestion {
		t.Fatalf("dump of the config command: exit %d: %s", code, out)
	}
	code, out, _ = runReplay(t, "state", "--quiet", "--data", dir, "--to", "9", "--user", "2")
	if code != exitOK || !strings.Contains(out, "outcome NO SYNTHETIC") || !strings.Contains(out, "positions: 1") {
		t.Fatalf("human state --user 2: exit %d: %s", code, out)
	}
}

// pipelineDir writes cmds through the real pipeline (a snapshot every 3
// commands, the clock now if not nil) into a new data dir and returns it;
// every command must succeed.
func pipelineDir(t *testing.T, cmds []core.Command, now func() int64) string {
	t.Helper()
	dir := t.TempDir()
	pl, err := journal.Start(journal.Config{Dir: dir, SnapshotEvery: 3, Now: now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cmds {
		r := journal.NewReply()
		if _, err := pl.Submit(&cmds[i], r); err != nil {
			t.Fatal(err)
		}
		if err := pl.Wait(r); err != nil {
			t.Fatal(err)
		}
		if res := r.Result(); res.Code != core.OK {
			t.Fatalf("command %d %v: %v", i, cmds[i].Kind, res.Code)
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}
