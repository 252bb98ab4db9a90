package ratelimit

// These tests drive the Limiter with an injected clock: the sliding
// one-second window (every call counts, refused ones included), per-user
// isolation, bounded memory (idle users dropped, the least recently seen
// evicted at MaxTrackedUsers), the daily limits from Postgres through a
// Coordinator (1.5.6 codes) with the day turning at UTC midnight, and
// failing open when the daily usage cannot be read.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/testkit"
	"github.com/ubscore/ubscore/persist/transfer/transfertest"
)

// fakeClock is an injectable Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newLimiter(t *testing.T, cfg Config) *Limiter {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDefaultRateLimits(t *testing.T) {
	if l := DefaultLimits(); l != (model.RateLimits{PerSecond: 10, PerDay: 100}) {
		t.Fatalf("%+v", l)
	}
}

func TestRatePerSecondSlidingWindow(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	lim := model.RateLimits{PerSecond: 10}
	r := newLimiter(t, Config{Limits: lim, Now: clk.Now})
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		st := r.Rate(ctx, 7, usdt)
		if st.RequestsLastSecond != i || model.CheckRate(1, st, lim) != nil {
			t.Fatalf("request %d: %+v refused", i+1, st)
		}
	}
	// The 11th in the same second is refused, and so is every retry: each call counts.
	for i := 0; i < 3; i++ {
		clk.Advance(100 * time.Millisecond)
		if e := model.CheckRate(1, r.Rate(ctx, 7, usdt), lim); e == nil || e.Code != model.CodeRateLimitExceeded {
			t.Fatalf("retry %d: %v, want RATE_LIMIT_EXCEEDED", i, e)
		}
	}
	if st := r.Rate(ctx, 8, usdt); st.RequestsLastSecond != 0 { // another user
		t.Fatalf("user 8: %+v", st)
	}
	// Sliding: 1 s after the last 10 (the refused retries at +100..300 ms), all expired.
	clk.Advance(time.Second)
	if st := r.Rate(ctx, 7, usdt); st.RequestsLastSecond != 0 {
		t.Fatalf("after a quiet second: %+v", st)
	}
	// 5 at t, 5 at t+0.5s: at t+1s the first 5 have left the window.
	clk.Advance(2 * time.Second)
	for i := 0; i < 5; i++ {
		r.Rate(ctx, 9, usdt)
	}
	clk.Advance(500 * time.Millisecond)
	for i := 0; i < 5; i++ {
		r.Rate(ctx, 9, usdt)
	}
	if st := r.Rate(ctx, 9, usdt); st.RequestsLastSecond != 10 {
		t.Fatalf("at t+0.5s: %d, want 10", st.RequestsLastSecond)
	}
	clk.Advance(500 * time.Millisecond)
	if st := r.Rate(ctx, 9, usdt); st.RequestsLastSecond != 6 {
		t.Fatalf("at t+1s: %d, want 6 (5 at +0.5s, 1 at +0.5s)", st.RequestsLastSecond)
	}
}

func TestRateBoundedMemory(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	r := newLimiter(t, Config{Limits: model.RateLimits{PerSecond: 2}, Now: clk.Now, IdleAfter: 3 * time.Second, MaxTrackedUsers: 3})
	ctx := context.Background()
	for u := transfer.UserID(1); u <= 3; u++ {
		r.Rate(ctx, u, usdt)
		r.Rate(ctx, u, usdt)
	}
	r.Rate(ctx, 1, usdt) // 1 is now the most recently seen; 2 the least
	r.Rate(ctx, 4, usdt) // full: 2 is forgotten
	if r.Tracked() != 3 {
		t.Fatalf("tracked %d, want 3", r.Tracked())
	}
	if st := r.Rate(ctx, 2, usdt); st.RequestsLastSecond != 0 { // forgotten: a fresh window (3 goes)
		t.Fatalf("user 2 after eviction: %+v", st)
	}
	if st := r.Rate(ctx, 1, usdt); st.RequestsLastSecond != 2 { // kept: ring of PerSecond = 2
		t.Fatalf("user 1: %+v", st)
	}
	clk.Advance(3 * time.Second)
	r.Rate(ctx, 5, usdt)
	if r.Tracked() != 1 {
		t.Fatalf("tracked %d after everyone else idled, want 1", r.Tracked())
	}
	for _, bad := range []Config{
		{Limits: model.RateLimits{PerSecond: -1}},
		{Limits: model.RateLimits{PerSecond: MaxRatePerSecond + 1}},
		{Limits: model.RateLimits{PerDay: 1}}, // no Usage
		{Limits: model.RateLimits{PerSecond: 1}, IdleAfter: time.Millisecond},
	} {
		if _, err := New(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestRateDailyLimits: transfers and amount per day, from Postgres, through
// a Coordinator; refused requests store nothing; a later UTC day starts
// from zero.
func TestRateDailyLimits(t *testing.T) {
	h := transfertest.New(t)
	clk := &fakeClock{t: time.Now()}
	lim := model.RateLimits{PerSecond: 10, PerDay: 3, DailyAmount: 2_500_000}
	r := newLimiter(t, Config{Limits: lim, Usage: h.Store, Now: clk.Now})
	c := h.NewCoordinator(func(cfg *transfer.Config) { cfg.Rate, cfg.Limits = r.Rate, lim })
	h.Deposit(7, usdt, 100_000_000)
	h.Deposit(7, btc, 100_000_000)
	refused := func(amount, asset string, want model.Code) {
		t.Helper()
		_, err := c.Create(context.Background(), model.Caller{Authenticated: true, UserID: 7},
			model.Request{From: "FUNDING", To: "SPOT", Asset: asset, Amount: amount})
		var e *model.Error
		if !errors.As(err, &e) || e.Code != want {
			t.Fatalf("%s %s: %v, want %s", amount, asset, err, want)
		}
	}
	h.Create(c, 7, "FUNDING", "SPOT", "USDT", "1", "")
	h.Create(c, 7, "FUNDING", "SPOT", "USDT", "1", "")
	refused("1", "USDT", model.CodeDailyAmountExceeded)  // 2 + 1 > 2.5
	h.Create(c, 7, "FUNDING", "SPOT", "BTC", "0.01", "") // amount is per asset
	refused("0.5", "USDT", model.CodeDailyLimitExceeded) // a 4th transfer
	clk.Advance(48 * time.Hour)                          // a later UTC day: its midnight is after every transfer so far
	h.Create(c, 7, "FUNDING", "SPOT", "USDT", "2.5", "")
	if n := h.FundingBalance(7, usdt); n != 100_000_000-4_500_000 {
		t.Fatalf("funding %d", n)
	}
}

// TestRateAssetDailyAmount: an asset's own daily amount limit is enforced
// through the limiter even with no global amount limit, and only for it.
func TestRateAssetDailyAmount(t *testing.T) {
	h := transfertest.New(t)
	clk := &fakeClock{t: time.Now()}
	lim := model.RateLimits{} // no global limits at all
	r := newLimiter(t, Config{Limits: lim, Usage: h.Store, Now: clk.Now, AmountLimited: map[transfer.AssetID]bool{usdt: true}})
	usdtLimited := testkit.Assets["USDT"]
	usdtLimited.DailyAmountLimit = 2_000_000 // 2 USDT per day
	c := h.NewCoordinator(func(cfg *transfer.Config) {
		cfg.Rate, cfg.Limits = r.Rate, lim
		cfg.Assets = func(s string) (model.AssetConfig, bool) {
			if s == "USDT" {
				return usdtLimited, true
			}
			return testkit.Lookup(s)
		}
	})
	h.Deposit(7, usdt, 100_000_000)
	h.Deposit(7, btc, 100_000_000)
	h.Create(c, 7, "FUNDING", "SPOT", "USDT", "1.5", "")
	_, err := c.Create(context.Background(), model.Caller{Authenticated: true, UserID: 7},
		model.Request{From: "FUNDING", To: "SPOT", Asset: "USDT", Amount: "0.6"})
	var e *model.Error
	if !errors.As(err, &e) || e.Code != model.CodeDailyAmountExceeded {
		t.Fatalf("1.5 + 0.6 > 2 USDT: %v", err)
	}
	h.Create(c, 7, "FUNDING", "SPOT", "USDT", "0.5", "") // exactly 2
	h.Create(c, 7, "FUNDING", "SPOT", "BTC", "0.5", "")  // BTC has no limit
}

// TestRatePerSecondThroughCoordinator: the spec's defaults refuse the 11th
// request of a second with RATE_LIMIT_EXCEEDED.
func TestRatePerSecondThroughCoordinator(t *testing.T) {
	h := transfertest.New(t)
	clk := &fakeClock{t: time.Now()}
	r := newLimiter(t, Config{Limits: DefaultLimits(), Usage: h.Store, Now: clk.Now})
	c := h.NewCoordinator(func(cfg *transfer.Config) { cfg.Rate, cfg.Limits = r.Rate, DefaultLimits() })
	h.Deposit(7, usdt, 100_000_000)
	for i := 0; i < 10; i++ {
		h.Create(c, 7, "FUNDING", "SPOT", "USDT", "1", "")
	}
	_, err := c.Create(context.Background(), model.Caller{Authenticated: true, UserID: 7},
		model.Request{From: "FUNDING", To: "SPOT", Asset: "USDT", Amount: "1"})
	if e, ok := err.(*model.Error); !ok || e.Code != model.CodeRateLimitExceeded {
		t.Fatalf("11th request: %v", err)
	}
	clk.Advance(time.Second)
	h.Create(c, 7, "FUNDING", "SPOT", "USDT", "1", "")
}

type brokenUsage struct{}

func (brokenUsage) DailyUsage(context.Context, transfer.UserID, transfer.AssetID, time.Time) (int, transfer.Units, error) {
	return 0, 0, errors.New("database down")
}

// levelCounter counts records at Error and at Warn.
type levelCounter struct {
	mu          sync.Mutex
	errs, warns int
}

func (h *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch r.Level {
	case slog.LevelError:
		h.errs++
	case slog.LevelWarn:
		h.warns++
	}
	return nil
}
func (h *levelCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *levelCounter) WithGroup(string) slog.Handler      { return h }

// TestRateFailsOpen: an unreadable daily usage does not block (P2), and is
// logged at Error and counted; the per-second limit still applies, and
// reaching it logs one MON-004 warning per second.
func TestRateFailsOpen(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)}
	logs := &levelCounter{}
	lim := model.RateLimits{PerSecond: 2, PerDay: 1, DailyAmount: 1}
	r := newLimiter(t, Config{Limits: lim, Usage: brokenUsage{}, Now: clk.Now, Logger: slog.New(logs)})
	for i := 0; i < 2; i++ {
		if st := r.Rate(context.Background(), 7, usdt); model.CheckRate(1, st, lim) != nil {
			t.Fatalf("request %d refused: %+v", i, st)
		}
	}
	for i := 0; i < 3; i++ {
		if e := model.CheckRate(1, r.Rate(context.Background(), 7, usdt), lim); e == nil || e.Code != model.CodeRateLimitExceeded {
			t.Fatalf("3rd request: %v", e)
		}
	}
	if r.Errors() != 5 || logs.errs != 5 || logs.warns != 1 {
		t.Fatalf("errors %d, logged %d errors and %d warnings", r.Errors(), logs.errs, logs.warns)
	}
}

const usdt, btc = testkit.USDT, testkit.BTC
