package journal

import (
	"os"
	"runtime"
	"time"
)

// Limits of holdPolicy.
const (
	// heldSyncSlow: a held fdatasync that took longer than this (a disk
	// stall: another writer's checkpoint, a saturated device) ... Not
	// lower: with Postgres sharing the disk, `bench http` sees a few syncs
	// of 10–100 ms per 10 s (4 of 6696 over 10 ms in one run), and a 10 ms
	// bound turned holding off for most of the run, losing its gain.
	heldSyncSlow = 100 * time.Millisecond
	// heldSyncPause: ... makes the syncs of the next heldSyncPause
	// ordinary syscalls (a disk that stalled tends to stall again).
	heldSyncPause = 5 * time.Second
)

// holdPolicy decides whether the group commit's fdatasync keeps its P (the
// Go scheduler's processor) through the syscall. The WAL uses it under
// WAL.mu only.
//
// Why hold: with an ordinary syscall the runtime lets another thread take
// the P after ~20 µs, and when the fdatasync returns the journaler usually
// finds no free P and waits on the global run queue behind the HTTP
// goroutines (dozens of them, runnable after each release): a Go execution
// trace of `bench http --conns 256` showed the journaler runnable, not
// running, 25% of the time, each microsecond of it delaying every
// acknowledgement. Holding the P, the journaler releases the batch the
// moment the disk answers; the other P steals the runnable goroutines
// meanwhile. Measured with the gathering of stages.go, 4 interleaved pairs:
// the exchange's CPU per order fell 12% (1.87 vs 2.13 times the load
// generator's, medians; issue 3's note).
//
// The costs, and how they are bounded: while the disk works the process
// has one P fewer (so with a single P the sync is an ordinary syscall:
// holding it would stop every goroutine), and a stop-the-world (GC start
// and end) waits for the syscall to return. A disk that stalls would make
// that a process-wide freeze, so after a held sync slower than heldSyncSlow
// the syncs of the next heldSyncPause are ordinary ones: at most one slow
// sync per pause can delay a stop-the-world.
type holdPolicy struct {
	ordinaryUntil time.Time // syncs before this are ordinary syscalls (a held one was slow)

	// syncFn, if set (tests), replaces fdatasync.
	syncFn func(f *os.File, hold bool) error
}

// hold reports whether a sync starting at now may hold its P with procs Ps.
func (h *holdPolicy) hold(now time.Time, procs int) bool {
	return procs >= 2 && !now.Before(h.ordinaryUntil)
}

// done records a sync that ran from start to end, held or not.
func (h *holdPolicy) done(held bool, start, end time.Time) {
	if held && end.Sub(start) > heldSyncSlow {
		h.ordinaryUntil = end.Add(heldSyncPause)
	}
}

// sync fdatasyncs f, holding the P when the policy allows.
func (h *holdPolicy) sync(f *os.File) error {
	start := time.Now()
	held := h.hold(start, runtime.GOMAXPROCS(0))
	do := h.syncFn
	if do == nil {
		do = fdatasync
	}
	err := do(f, held)
	h.done(held, start, time.Now())
	return err
}
