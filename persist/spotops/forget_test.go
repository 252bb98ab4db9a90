package spotops

// TestForgetter proves the bound on the core's processed-ops set keeps
// idempotency: only transfers terminal in Postgres (for forgetAfter) lose
// their records, a transfer still moving keeps its records and holds the
// watermark while later terminal ones are still forgotten, and a repeated
// run submits nothing new.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/instruments"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/pgtest"
)

func TestForgetter(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := persist.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pl, err := journal.Start(journal.Config{Dir: t.TempDir(), ReadView: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if _, err := instruments.Install(pl, instruments.Default()); err != nil {
		t.Fatal(err)
	}
	// deposit is the SPOT side's deposit of a transfer: 10 units of asset 1 to user 5.
	deposit := func(reqID string) {
		t.Helper()
		key, _ := core.KeyFrom(reqID)
		r := journal.NewReply()
		if _, err := pl.Submit(&core.Command{Kind: core.KindSpotDeposit, User: 5, Asset: 1, Amount: 10, Key: key}, r); err != nil ||
			pl.Wait(r) != nil || r.Result().Code != core.OK {
			t.Fatalf("deposit %s: %v %v", reqID, err, r.Result().Code)
		}
	}
	// Ten transfers FUNDING -> SPOT, each deposited in the core; the 4th
	// is still moving (TARGET_PENDING), the 8th terminal but only just.
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = fmt.Sprintf("01JFORGET%017d", i)
		state, age := 40, "2 hours"
		switch i {
		case 3:
			state = 30
		case 7:
			age = "1 second"
		}
		if _, err := pool.Exec(ctx, `INSERT INTO transfers_tb (req_id, user_id, asset_id, amount, transfer_type,
			source_type, from_account, to_account, state, updated_at) VALUES ($1, 5, 1, 10, 1, 1, 'FUNDING', 'SPOT', $2,
			now() - $3::interval)`, ids[i], state, age); err != nil {
			t.Fatal(err)
		}
		deposit(ids[i])
	}
	held := func(id string) bool {
		k, _ := core.KeyFrom(id)
		var ok bool
		_ = pl.Read(func(p *core.Processor) error { _, ok = p.SpotOp(core.KindSpotDeposit, k); return nil })
		return ok
	}
	f := NewForgetter(pool, pl, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.batch = 4 // several steps: the scan continues past the moving transfer
	total := 0
	for i := 0; i < 4; i++ {
		n, err := f.Step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != 8 {
		t.Fatalf("forgot %d transfers, want 8", total)
	}
	for i, id := range ids {
		if want := i == 3 || i == 7; held(id) != want {
			t.Fatalf("transfer %d: held %v, want %v", i, held(id), want)
		}
	}
	var wm string
	if err := pool.QueryRow(ctx, `SELECT through_req_id FROM spot_ops_forget`).Scan(&wm); err != nil || wm != ids[2] {
		t.Fatalf("watermark %q (%v), want %q: a moving transfer holds it", wm, err, ids[2])
	}
	before := pl.DurableSeq()
	if n, err := f.Step(ctx); err != nil || n != 0 || pl.DurableSeq() != before {
		t.Fatalf("a repeated step: %d %v, %d commands", n, err, pl.DurableSeq()-before)
	}
	// A forgotten req_id is a new operation to the core.
	if deposit(ids[0]); !held(ids[0]) {
		t.Fatal("a forgotten req_id deposited again is not held")
	}
}
