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
)

func TestStoreList(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var ids []string // oldest first
	for i := 0; i < 5; i++ {
		ids = append(ids, h.insertAt(7, AccountFunding, AccountSpot, usdt, Units(i+1), Init).ReqID)
	}
	h.insertAt(8, AccountFunding, AccountSpot, usdt, 99, Init)
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
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeInvalidRequest {
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
		h.insertAt(7, AccountFunding, AccountSpot, tr.asset, tr.amount, tr.st)
	}
	old := h.insertAt(7, AccountFunding, AccountSpot, usdt, 1000, Committed) // yesterday
	h.insertAt(8, AccountFunding, AccountSpot, usdt, 2000, Committed)        // another user
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
