package ring

import (
	"fmt"
	"sync/atomic"
)

// Stage is one consumer of a Ring: it has its own progress Sequence and
// follows either the publishers (no upstream) or one or more upstream
// stages. A Stage is driven by a single goroutine: WaitFor, Available and
// Commit must not be called concurrently. Halt and Sequence may be called
// from anywhere.
type Stage[T any] struct {
	// seq is the highest seq this stage has finished with. Stored only by
	// Commit (owner goroutine); loaded by downstream stages and producers.
	seq Sequence

	// Read-only after NewStage.
	ring *Ring[T]
	deps []*Sequence // upstream stage sequences; empty: follows the publishers
	up   []*Stage[T] // the upstream stages themselves (for their done flags)

	// view is the highest seq known to be readable by this stage: the end
	// of the contiguous published prefix (no upstream) or min(upstream)
	// (with upstream). Owner goroutine only; monotone; seq <= view.
	view int64

	// done is set once, when WaitFor returned ErrClosed or Halt was
	// called; the stage will commit nothing more. Loaded by downstream
	// stages to decide that they are drained.
	done atomic.Bool
}

// NewStage creates a stage. With no upstream it follows the publishers and
// sees the contiguous published prefix; with upstream stages it sees an entry
// only once every one of them has committed it. Upstream stages stop being
// gating stages; the new stage becomes one. All stages must be created
// before the first Claim (NewStage panics if it detects a later call).
func (r *Ring[T]) NewStage(upstream ...*Stage[T]) *Stage[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.claimed.Load() != 0 {
		panic("ring: NewStage after the first claim")
	}
	s := &Stage[T]{ring: r, up: append([]*Stage[T](nil), upstream...)}
	for _, u := range s.up {
		if u == nil || u.ring != r {
			panic("ring: upstream stage belongs to another ring")
		}
		s.deps = append(s.deps, &u.seq)
	}
	var gating []*Sequence
	if old := r.gating.Load(); old != nil {
		for _, g := range *old {
			if !containsSeq(s.deps, g) {
				gating = append(gating, g)
			}
		}
	}
	gating = append(gating, &s.seq)
	r.gating.Store(&gating)
	return s
}

func containsSeq(seqs []*Sequence, x *Sequence) bool {
	for _, s := range seqs {
		if s == x {
			return true
		}
	}
	return false
}

// Sequence returns the stage's progress cursor, for metrics and for custom
// waiting. It must only be read: use Commit to advance it.
func (s *Stage[T]) Sequence() *Sequence { return &s.seq }

// Available returns the highest seq the stage may read right now, without
// blocking. It may be below the next seq the stage wants.
func (s *Stage[T]) Available() int64 {
	r := s.ring
	if len(s.deps) == 0 {
		// Walk the markers range by range from the end of the known prefix.
		p := s.view + 1
		for {
			hi := r.mark[p&r.mask].Load()
			if hi < p || hi-p >= r.size {
				break // not published yet (a stale marker of an earlier lap)
			}
			p = hi + 1
		}
		s.view = p - 1
	} else if m := minSeq(s.deps); m > s.view {
		s.view = m
	}
	return s.view
}

// WaitFor waits until seq next is readable and returns hi >= next, the
// highest seq the stage may read now; the stage reads the slots next..hi (or
// a prefix of them) and then commits. It spins briefly, then blocks. After
// Close it keeps returning entries until the stage is drained (see the
// package doc), then returns ErrClosed with hi < next; it also returns
// ErrClosed instead of blocking once the stage is halted.
func (s *Stage[T]) WaitFor(next int64) (hi int64, err error) {
	if next <= s.view {
		return s.view, nil
	}
	if hi := s.Available(); hi >= next {
		return hi, nil
	}
	return s.waitSlow(next)
}

func (s *Stage[T]) waitSlow(next int64) (int64, error) {
	r := s.ring
	for i := 0; i < spinLimit && !r.closed.Load() && !s.done.Load(); i++ {
		if hi := s.Available(); hi >= next {
			return hi, nil
		}
	}
	n := &r.published
	if len(s.up) != 0 {
		n = &r.progress
	}
	n.sleep()
	for {
		closed := r.closed.Load() // load before Available: the prefix seen is then final
		hi := s.Available()
		if hi >= next {
			n.wakeUp()
			return hi, nil
		}
		if s.done.Load() || s.drained(closed) {
			n.wakeUp()
			s.finish()
			return hi, ErrClosed
		}
		n.cond.Wait()
	}
}

// drained reports whether nothing beyond s.view can ever become readable:
// for a stage following the publishers, the ring was closed before s.view
// was computed; for a downstream stage, some upstream stage is done and s.view
// has reached its final seq (its done flag is loaded before its seq, so the
// seq loaded is final).
func (s *Stage[T]) drained(closed bool) bool {
	if len(s.up) == 0 {
		return closed
	}
	for _, u := range s.up {
		if u.done.Load() && u.seq.Load() <= s.view {
			return true
		}
	}
	return false
}

// Commit records that the stage has finished with every seq <= hi, releasing
// them to downstream stages and (for a gating stage) to producers. hi must
// not exceed what WaitFor or Available returned (violating that panics) and
// must not be below the previous commit.
func (s *Stage[T]) Commit(hi int64) {
	if hi > s.view {
		panic(fmt.Sprintf("ring: commit of %d beyond readable %d", hi, s.view))
	}
	s.seq.Store(hi)
	s.ring.progress.signal()
	s.ring.room.signal()
}

// Halt marks the stage finished: it commits nothing more (call it after the
// last Commit, e.g. deferred in the consumer goroutine). A downstream stage
// that has read everything the halted stage committed then returns ErrClosed
// instead of waiting for it, and the stage's own WaitFor returns ErrClosed
// instead of blocking. Halt does not close the ring; producers stay gated
// by the halted stage's last commit.
func (s *Stage[T]) Halt() {
	s.finish()
	s.ring.published.broadcast() // wake this stage if it is blocked
}

func (s *Stage[T]) finish() {
	if !s.done.Swap(true) {
		s.ring.progress.broadcast()
	}
}
