package journal

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/logging"
)

// DefaultMaxRetained is the default --follower-max-retained: how many
// commands of WAL (about 50 B each) are kept for a follower that does not
// advance before it is released.
const DefaultMaxRetained core.Seq = 100_000_000

// Retention keeps the WAL for the followers downstream of it (docs/design.md, "Followers of the WAL"):
// the Postgres sink today, the event publisher and others later. Each one
// registers with a checkpoint (the last seq whose output it has made
// durable where that output lives); the WAL and the snapshot it needs are
// kept back to the slowest checkpoint, but never more than MaxRetained
// commands behind the durable seq: past that, the disk would fill and stop
// trading, so the follower is released — a CRITICAL alert, a count in
// Released, and the follower itself records the range it can no longer
// derive when it next opens the WAL (HistoryGoneError). Trading never waits
// for a follower.
type Retention struct {
	max core.Seq
	log *slog.Logger

	mu        sync.Mutex
	followers []*FollowerPin
}

// FollowerPin is one registered follower.
type FollowerPin struct {
	name       string
	checkpoint func() core.Seq // last seq handled durably; 0 = not known yet (keep everything)
	released   atomic.Uint64   // times the WAL it needed was released
	alerted    atomic.Int64    // unix seconds of the last alert
}

// NewRetention returns a registry keeping at most maxRetained commands
// (> 0; DefaultMaxRetained if 0) behind the durable seq for followers.
func NewRetention(maxRetained core.Seq, log *slog.Logger) *Retention {
	if maxRetained == 0 {
		maxRetained = DefaultMaxRetained
	}
	if log == nil {
		log = slog.Default()
	}
	return &Retention{max: maxRetained, log: log}
}

// Register adds a follower; checkpoint must be cheap and safe to call from
// any goroutine.
func (r *Retention) Register(name string, checkpoint func() core.Seq) *FollowerPin {
	f := &FollowerPin{name: name, checkpoint: checkpoint}
	r.mu.Lock()
	r.followers = append(r.followers, f)
	r.mu.Unlock()
	return f
}

// Hold registers a follower that is not running here but may start later
// from a checkpoint this process cannot see (a standby under automatic
// failover keeps the WAL for the sink and publisher of the primary it may
// become): its checkpoint is always the floor, so the WAL is kept as far
// back as MaxRetained allows, and it is never released nor alerted on.
// durable is the durable seq (Limit's argument).
func (r *Retention) Hold(name string, durable func() core.Seq) *FollowerPin {
	return r.Register(name, func() core.Seq { return r.floor(durable()) })
}

// floor is the oldest seq kept for any follower: MaxRetained behind
// durable (0: keep everything).
func (r *Retention) floor(durable core.Seq) core.Seq {
	if durable > r.max {
		return durable - r.max
	}
	return 0
}

// Limit is the seq the WAL must be kept from (Config.TruncateLimit's
// meaning: 0 = keep everything), given the durable seq: the slowest
// checkpoint, floored at durable-MaxRetained. With no follower it is durable
// (nothing is pinned).
func (r *Retention) Limit(durable core.Seq) core.Seq {
	r.mu.Lock()
	fs := r.followers
	r.mu.Unlock()
	if len(fs) == 0 {
		return durable
	}
	floor := r.floor(durable)
	lim := core.Seq(math.MaxUint64)
	for _, f := range fs {
		cp := f.checkpoint()
		if cp < floor {
			f.release(r, cp, floor, durable)
			cp = floor
		}
		lim = min(lim, cp)
	}
	return lim
}

func (f *FollowerPin) release(r *Retention, cp, floor, durable core.Seq) {
	f.released.Add(1)
	if now := time.Now().Unix(); now-f.alerted.Load() >= 60 {
		f.alerted.Store(now)
		logging.Critical(context.Background(), r.log, "journal: a follower is too far behind; releasing the WAL it still needs (it records the range it cannot derive)",
			"follower", f.name, "checkpoint", cp, "durable_seq", durable, "kept_from", floor, "max_retained", r.max)
	}
}

// TruncateLimit adapts Limit to Config.TruncateLimit.
func (r *Retention) TruncateLimit(durable func() core.Seq) func() core.Seq {
	return func() core.Seq { return r.Limit(durable()) }
}

// FollowerStatus is one follower's retention state (metrics).
type FollowerStatus struct {
	Name       string
	Checkpoint core.Seq
	Released   uint64 // times its WAL was released past its checkpoint
}

// Followers returns the registered followers' states, in registration order.
func (r *Retention) Followers() []FollowerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]FollowerStatus, len(r.followers))
	for i, f := range r.followers {
		out[i] = FollowerStatus{Name: f.name, Checkpoint: f.checkpoint(), Released: f.released.Load()}
	}
	return out
}
