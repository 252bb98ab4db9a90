package transfer

// These tests pin the read-side queries: List pages a user's transfers
// newest first with a stable tie-break and a consistent total; DailyUsage
// counts every transfer created since a moment and sums the amount of one
// asset except FAILED and ROLLED_BACK ones.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

func TestStoreList(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var ids []string // oldest first
	for i := 0; i < 5; i++ {
		ids = append(ids, h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, Units(i+1), Init).ReqID)
	}
	h.insertAt(8, model.AccountFunding, model.AccountSpot, usdt, 99, Init)
	// created_at: 10 s apart, except the last two share one instant (tie-break by transfer_id).
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i, id := range ids {
		at := base.Add(time.Duration(min(i, 3)) * 10 * time.Second)
		if _, err := h.pool.Exec(ctx, `UPDATE transfers_tb SET created_at = $2 WHERE req_id = $1`, id, at); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
	var got []string
	for page := 1; page <= 4; page++ {
		ts, total, err := h.store.List(ctx, 7, page, 2)
		if err != nil || total != 5 {
			t.Fatalf("page %d: total %d %v", page, total, err)
		}
		if (page <= 2 && len(ts) != 2) || (page == 3 && len(ts) != 1) || (page == 4 && len(ts) != 0) {
			t.Fatalf("page %d: %d transfers", page, len(ts))
		}
		for _, tr := range ts {
			if tr.UserID != 7 {
				t.Fatalf("another user's transfer %+v", tr)
			}
			got = append(got, tr.ReqID)
		}
	}
	if !equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if ts, total, err := h.store.List(ctx, 9, 1, 10); err != nil || total != 0 || len(ts) != 0 {
		t.Fatalf("user without transfers: %v %d %v", ts, total, err)
	}
	if ts, total, err := h.store.List(ctx, 7, 1<<62, MaxListPageSize); err != nil || total != 5 || len(ts) != 0 {
		t.Fatalf("huge page: %v %d %v", ts, total, err)
	}
	for _, bad := range [][2]int{{0, 10}, {-1, 10}, {1, 0}, {1, MaxListPageSize + 1}} {
		_, _, err := h.store.List(ctx, 7, bad[0], bad[1])
		var e *model.Error
		if !errors.As(err, &e) || e.Code != model.CodeInvalidRequest {
			t.Errorf("page %d size %d: %v, want INVALID_REQUEST", bad[0], bad[1], err)
		}
	}
}

func TestStoreDailyUsage(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, tr := range []struct {
		asset  AssetID
		amount Units
		st     State
	}{
		{usdt, 100, Committed},
		{usdt, 200, Failed},     // counted, no amount
		{usdt, 300, RolledBack}, // counted, no amount
		{usdt, 400, TargetPending},
		{usdt, 800, Init},
		{btc, 500, Committed}, // counted, other asset
	} {
		h.insertAt(7, model.AccountFunding, model.AccountSpot, tr.asset, tr.amount, tr.st)
	}
	old := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 1000, Committed) // yesterday
	h.insertAt(8, model.AccountFunding, model.AccountSpot, usdt, 2000, Committed)        // another user
	if _, err := h.pool.Exec(ctx, `UPDATE transfers_tb SET created_at = now() - interval '2 hours' WHERE req_id = $1`,
		old.ReqID); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Hour)
	for _, c := range []struct {
		user   UserID
		asset  AssetID
		since  time.Time
		count  int
		amount Units
	}{
		{7, usdt, since, 6, 1300},
		{7, btc, since, 6, 500},
		{7, usdt, since.Add(-2 * time.Hour), 7, 2300},
		{7, usdt, time.Now().Add(time.Hour), 0, 0},
		{9, usdt, since, 0, 0},
	} {
		n, amount, err := h.store.DailyUsage(ctx, c.user, c.asset, c.since)
		if err != nil || n != c.count || amount != c.amount {
			t.Errorf("user %d asset %d: %d, %d (%v); want %d, %d", c.user, c.asset, n, amount, err, c.count, c.amount)
		}
	}
}

// TestCIDIndexOnlyCoversCIDs: the (user_id, cid) uniqueness is a partial
// unique index (migration 0005) that the inserts name as their arbiter: a
// repeated cid of one user inserts nothing, another user may use the same
// cid, and transfers without a cid are never in conflict (nor in it),
// through the Stores of two Batchers (two processes) on one database.
func TestCIDIndexOnlyCoversCIDs(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var def string
	if err := h.pool.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE tablename = 'transfers_tb' AND indexname = 'transfers_tb_user_cid'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if want := "CREATE UNIQUE INDEX transfers_tb_user_cid ON public.transfers_tb USING btree (user_id, cid) WHERE (cid IS NOT NULL)"; def != want {
		t.Fatalf("index %q, want %q", def, want)
	}
	b := NewBatcher(h.pool, BatchOptions{})
	b.Start()
	t.Cleanup(b.Close)
	for _, s := range []*Store{h.store, NewStore(b)} { // two processes' Stores
		mk := func(user UserID, cid string) (Transfer, bool) {
			tr := Transfer{ReqID: newID(t, h), CID: cid, UserID: user, From: model.AccountFunding, To: model.AccountSpot, Asset: usdt, Amount: 1}
			got, inserted, err := s.Insert(ctx, tr)
			if err != nil {
				t.Fatal(err)
			}
			return got, inserted
		}
		cid := newID(t, h) // fresh for this store
		first, ok1 := mk(7, cid)
		again, ok2 := mk(7, cid)
		other, ok3 := mk(8, cid)
		_, ok4 := mk(7, "")
		_, ok5 := mk(7, "")
		if !ok1 || ok2 || again.ReqID != first.ReqID || !ok3 || other.ReqID == first.ReqID || !ok4 || !ok5 {
			t.Fatalf("inserted %v %v %v %v %v", ok1, ok2, ok3, ok4, ok5)
		}
	}
	var withCID int64
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM transfers_tb WHERE cid IS NOT NULL`).Scan(&withCID); err != nil {
		t.Fatal(err)
	}
	if withCID != 4 {
		t.Fatalf("%d rows with a cid, want 4", withCID)
	}
}
