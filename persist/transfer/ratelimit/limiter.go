// Package ratelimit measures a user's usage for the internal-transfer
// limits of spec 1.5.6 (P2): requests per second in memory, transfers and
// amount per UTC day from Postgres. transfer.CheckRate decides.
package ratelimit

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// The rate limits of spec 1.5.6 (P2) and their bookkeeping limits.
const (
	SpecPerSecond = 10  // requests per second per user
	SpecPerDay    = 100 // transfers per day per user

	RateWindow             = time.Second     // the per-second window, sliding
	MaxRatePerSecond       = 1000            // largest PerSecond a Limiter tracks (its ring size)
	DefaultRateIdleAfter   = 5 * time.Second // users idle this long are forgotten
	DefaultMaxTrackedUsers = 100_000         // users tracked at once; the least recently seen is evicted
)

// DefaultLimits are the spec's limits: 10 requests per second, 100
// transfers per day, and no daily amount limit (the spec leaves daily_limit
// to configuration; set DailyAmount to enforce one).
func DefaultLimits() model.RateLimits {
	return model.RateLimits{PerSecond: SpecPerSecond, PerDay: SpecPerDay}
}

// UsageReader reads a user's transfers since a moment (*transfer.Store implements it).
type UsageReader interface {
	DailyUsage(ctx context.Context, user transfer.UserID, asset transfer.AssetID, since time.Time) (count int, amount transfer.Units, err error)
}

// Config wires a Limiter.
type Config struct {
	// Limits must be the Coordinator's Config.Limits: a zero field is a
	// disabled limit, whose usage is then neither tracked nor read.
	Limits model.RateLimits
	// AmountLimited are the assets with their own daily amount limit
	// (AssetConfig.DailyAmountLimit): their daily amount is read even when
	// Limits.DailyAmount is 0.
	AmountLimited map[transfer.AssetID]bool
	// Usage reads the daily usage (a *transfer.Store); required when PerDay or
	// DailyAmount is set, or AmountLimited is not empty.
	Usage           UsageReader
	Now             func() time.Time // default time.Now; the day starts at UTC midnight of Now
	IdleAfter       time.Duration    // default DefaultRateIdleAfter; at least RateWindow
	MaxTrackedUsers int              // default DefaultMaxTrackedUsers
	Logger          *slog.Logger
}

// Limiter measures a user's usage for the limits of 1.5.6; its Rate
// method is a Coordinator's Config.Rate. It decides nothing: transfer.CheckRate
// compares the usage with Config.Limits.
//
// Requests per second are counted in memory, per process, over a sliding
// window of RateWindow: every call to Rate is one request, whether or not
// the request is later refused (by this limit or any other check), so a
// client hammering the API stays refused until it pauses for a second.
// Users not seen for IdleAfter are forgotten; at most MaxTrackedUsers are
// tracked, and beyond that the least recently seen is forgotten first.
//
// Transfers and amount per day come from Postgres (Usage.DailyUsage since
// UTC midnight), uncached: one indexed read per request, exact up to
// concurrent requests of the same user (each reads the usage before the
// others' transfers exist, so N concurrent requests can exceed a daily
// limit by at most N-1).
//
// When the daily usage cannot be read the limiter fails open: the daily
// part of RateState is zero, the error is logged at Error and counted
// (Errors). These limits are a P2 abuse control; refusing every transfer
// because a usage read failed would turn a database hiccup into an outage,
// and a transfer that gets through still passes every money check.
type Limiter struct {
	cfg    Config
	epoch  time.Time // ring times are nanoseconds since epoch (monotonic with time.Now)
	log    *slog.Logger
	errors atomic.Int64

	mu    sync.Mutex
	users map[transfer.UserID]*list.Element // value *userRate
	lru   *list.List                        // front = most recently seen
}

// userRate is one user's recent requests.
type userRate struct {
	user     transfer.UserID
	ring     []int64 // times of the last PerSecond requests, ns since epoch
	next     int     // ring slot of the next request
	lastSeen int64   // ns since epoch
	warned   int64   // last MON-004 warning, ns since epoch; -1 = never
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Limiter, error) {
	l := cfg.Limits
	switch {
	case l.PerSecond < 0 || l.PerDay < 0 || l.DailyAmount < 0:
		return nil, errors.New("transfer: negative rate limit")
	case l.PerSecond > MaxRatePerSecond:
		return nil, fmt.Errorf("transfer: PerSecond %d above MaxRatePerSecond %d", l.PerSecond, MaxRatePerSecond)
	case (l.PerDay > 0 || l.DailyAmount > 0 || len(cfg.AmountLimited) > 0) && cfg.Usage == nil:
		return nil, errors.New("transfer: daily limits need a UsageReader")
	case cfg.IdleAfter != 0 && cfg.IdleAfter < RateWindow:
		return nil, fmt.Errorf("transfer: IdleAfter %v shorter than the rate window", cfg.IdleAfter)
	case cfg.MaxTrackedUsers < 0:
		return nil, errors.New("transfer: negative MaxTrackedUsers")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.IdleAfter == 0 {
		cfg.IdleAfter = DefaultRateIdleAfter
	}
	if cfg.MaxTrackedUsers == 0 {
		cfg.MaxTrackedUsers = DefaultMaxTrackedUsers
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Limiter{cfg: cfg, epoch: cfg.Now(), log: cfg.Logger,
		users: map[transfer.UserID]*list.Element{}, lru: list.New()}, nil
}

// Rate returns the user's usage before this request, counting the request.
func (r *Limiter) Rate(ctx context.Context, user transfer.UserID, asset transfer.AssetID) model.RateState {
	now := r.cfg.Now()
	var st model.RateState
	if r.cfg.Limits.PerSecond > 0 {
		st.RequestsLastSecond = r.countRequest(user, int64(now.Sub(r.epoch)))
	}
	if r.cfg.Limits.PerDay > 0 || r.cfg.Limits.DailyAmount > 0 || r.cfg.AmountLimited[asset] {
		u := now.UTC()
		midnight := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
		n, amount, err := r.cfg.Usage.DailyUsage(ctx, user, asset, midnight)
		if err != nil {
			r.errors.Add(1)
			r.log.Error("transfer rate limiter: daily usage unreadable, daily limits not applied",
				"user", user, "asset", asset, "err", err)
			return st
		}
		st.TransfersToday, st.AmountToday = n, amount
	}
	return st
}

// countRequest records a request of user at now (ns since epoch) and
// returns how many earlier requests fall in the window before it.
func (r *Limiter) countRequest(user transfer.UserID, now int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.track(user, now)
	cut := now - int64(RateWindow)
	n := 0
	for _, t := range u.ring {
		if t > cut {
			n++
		}
	}
	u.ring[u.next] = now
	u.next = (u.next + 1) % len(u.ring)
	if n >= r.cfg.Limits.PerSecond && (u.warned < 0 || now-u.warned >= int64(RateWindow)) {
		u.warned = now
		r.log.Warn("transfer rate limit reached: abnormal request frequency", // MON-004
			"user", user, "per_second", r.cfg.Limits.PerSecond)
	}
	r.evictIdle(now)
	return n
}

// track returns user's entry, most recently seen, creating it (and
// evicting the least recently seen user when full).
func (r *Limiter) track(user transfer.UserID, now int64) *userRate {
	if e, ok := r.users[user]; ok {
		r.lru.MoveToFront(e)
		u := e.Value.(*userRate)
		u.lastSeen = now
		return u
	}
	if r.lru.Len() >= r.cfg.MaxTrackedUsers {
		r.forget(r.lru.Back())
	}
	u := &userRate{user: user, ring: make([]int64, r.cfg.Limits.PerSecond), lastSeen: now, warned: -1}
	for i := range u.ring {
		u.ring[i] = now - int64(RateWindow) // empty slot: outside every window
	}
	r.users[user] = r.lru.PushFront(u)
	return u
}

// evictIdle forgets users not seen for IdleAfter (from the LRU's back:
// amortized O(1) per request).
func (r *Limiter) evictIdle(now int64) {
	for e := r.lru.Back(); e != nil && now-e.Value.(*userRate).lastSeen >= int64(r.cfg.IdleAfter); e = r.lru.Back() {
		r.forget(e)
	}
}

func (r *Limiter) forget(e *list.Element) {
	delete(r.users, e.Value.(*userRate).user)
	r.lru.Remove(e)
}

// Tracked returns how many users the per-second window holds.
func (r *Limiter) Tracked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lru.Len()
}

// Errors returns how many daily-usage reads failed (each one failed open).
func (r *Limiter) Errors() int64 { return r.errors.Load() }
