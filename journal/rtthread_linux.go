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
// least 1), and then unlocks the goroutine again. Once it succeeded, the
// goroutine must stay locked and call normalThread before it returns: a
// locked goroutine's thread exits with it or, for the main thread, is
// parked for good, so a real-time thread never goes back to the runtime's
// pool to run other goroutines, and none stays real-time. (LockOSThread
// before the change of policy: the runtime then has its template thread
// create new threads, which would otherwise inherit the policy.)
func realtimeThread() (tid int, err error) {
	runtime.LockOSThread()
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		runtime.UnlockOSThread()
		return 0, err
	}
	return unix.Gettid(), nil
}

// normalThread puts the calling thread back in the normal class
// (SCHED_OTHER) at the nice level it has: a real-time policy keeps the nice
// level (renice still sets it) but sched_getattr reports 0 for it, so it is
// read with getpriority, whose raw value is 20 - nice. Keeping the level
// asks for no privilege, where lowering it would.
func normalThread() error {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0) // 0: the calling thread
	if err != nil {
		return err
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL, Nice: int32(20 - prio)}
	return unix.SchedSetAttr(0, &attr, 0)
}
