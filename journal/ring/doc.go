// Package ring is a bounded, pre-allocated, multi-producer ring buffer with
// dependent consumer stages, in the style of the LMAX Disruptor. It is the
// hand-off between the goroutines that submit commands (HTTP handlers) and
// the goroutines that journal, apply and answer them.
//
// # Topology
//
// Every stage sees every entry, in sequence order. A stage that follows the
// publishers sees the contiguous published prefix; a stage that follows other
// stages sees what all of them have committed. Producers may reuse a slot only
// after every final stage (the gating stages) has committed it.
//
//	HTTP goroutines (many producers)
//	  lo, hi := Claim(n) / TryClaim(n)
//	  write *Slot(lo..hi), stamp seq
//	  Publish(lo, hi)
//	         |
//	         v
//	+--------------------------------------------------+
//	| Ring[T]  slots[seq & mask]   markers[lo & mask]  |
//	+--------------------------------------------------+
//	      | published prefix             | published prefix
//	      v                              v
//	journaler = NewStage()         processor = NewStage()     (parallel)
//	  WAL append + fsync             apply to the book
//	      |  journaler.seq               |  processor.seq
//	      +--------------+---------------+
//	                     v
//	      responder = NewStage(journaler, processor)
//	        sees seq s only when min(journaler, processor) >= s
//	        (journal drives it from whichever of the two commits last)
//	                     |  responder.seq = gating sequence
//	                     v
//	  producers may claim up to responder.seq + Cap()
//
// # Sequence protocol
//
// Sequence numbers are int64, start at 1 and grow by one per entry; they are
// never reused. Seq 0 means "nothing": it is the initial value of every
// cursor, so a zero Sequence reads as "nothing claimed/published/consumed
// yet". The seq of an entry IS its journal sequence number downstream: a
// producer learns it from Claim and stamps it into the entry it writes.
//
// The cursors and who writes them:
//
//   - claimed: highest seq handed to a producer. Advanced only by a
//     compare-and-swap in Claim/TryClaim, after checking that the new range
//     does not lap the slowest gating stage, so each seq is handed out once.
//   - markers: Publish(lo, hi) stores hi into markers[lo & mask] (one atomic
//     store per Publish call, not per entry). The range starting at lo is
//     published iff lo <= markers[lo & mask] < lo+Cap(): a marker left by an
//     earlier lap is < lo because a range never spans more than Cap() seqs,
//     and a later lap cannot be claimed before every stage has passed lo. A
//     first stage walks the markers from its position, jumping from range to
//     range, so it sees only a contiguous published prefix whatever the order
//     in which producers publish. Claimed ranges may be published in pieces,
//     in any order, as long as the pieces partition the claim.
//   - stage.seq: highest seq the stage has finished with, stored by Commit
//     from the stage's own goroutine.
//   - gating: min over the final stages (those no other stage follows).
//
// At any point in time (upstream is any stage a stage follows):
//
//	gating <= stage.seq <= stage view <= upstream.seq <= ... <= published prefix
//	published prefix <= claimed <= gating + Cap()
//
// # Consumer loop
//
//	next := int64(1)
//	for {
//		hi, err := st.WaitFor(next) // hi >= next
//		if err != nil {
//			return // ring.ErrClosed: closed and drained
//		}
//		for seq := next; seq <= hi; seq++ {
//			handle(seq, r.Slot(seq))
//		}
//		st.Commit(hi)
//		next = hi + 1
//	}
//
// # Waiting
//
// A waiter (a stage in WaitFor, a producer in Claim on a full ring) first
// re-checks its condition for a bounded number of tight iterations, then
// blocks on a sync.Cond (see spinLimit for why it never yields instead).
// Publish and Commit only take the lock and signal when an atomic sleeper
// count says somebody is blocked, so the fast path is one atomic store plus
// one atomic load.
//
// # Close
//
// Close is graceful: Claim returns ErrClosed and TryClaim reports false from
// then on, and blocked producers return ErrClosed. Stages keep draining: a
// stage following the publishers returns everything in the contiguous
// published prefix and then ErrClosed; a stage following other stages
// returns ErrClosed once an upstream stage has finished (its WaitFor returned
// ErrClosed, or it was halted) and everything that stage committed has been
// returned. When every stage goroutine runs the consumer loop above, the
// whole pipeline drains and stops by itself after Close. Entries published
// before Close returns are seen by every stage; a range still claimed but
// unpublished at that point ends the drain (it and anything after it may be
// lost). Stage.Halt marks a stage finished early, e.g. from a consumer
// goroutine that exits on its own error, so that downstream stages do not
// wait for it forever.
package ring
