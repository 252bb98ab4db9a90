package journal

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// realtimeThread locks the calling goroutine to its OS thread and gives the
// thread the lowest real-time priority (SCHED_FIFO 1), so that no thread of
// the normal class (this process's other threads, the kernel's writeback
// and journal threads) can take its core while it runs
// (Config.RealtimeProcessor). It returns the thread's id, or the error that
// refused the policy (EPERM without CAP_SYS_NICE or an RLIMIT_RTPRIO of at
// least 1). The goroutine stays locked either way and must not unlock, and
// it must call normalThread before it returns: a locked goroutine's thread
// exits with it, or, for the main thread, is parked for good, so a
// real-time thread never goes back to the runtime's pool to run other
// goroutines, and none stays real-time.
func realtimeThread() (tid int, err error) {
	runtime.LockOSThread()
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}
	return unix.Gettid(), unix.SchedSetAttr(0, &attr, 0)
}

// normalThread puts the calling thread back in the normal class
// (SCHED_OTHER, nice unchanged); lowering a policy needs no privilege.
func normalThread() error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	return unix.SchedSetAttr(0, &attr, 0)
}
