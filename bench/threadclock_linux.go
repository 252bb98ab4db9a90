//go:build linux

package bench

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadClock reads the calling thread's CPU time: on a machine shared with
// other jobs, time spent descheduled is not the code's, and wall time would
// charge it to whichever side happened to run. The caller holds its thread
// (runtime.LockOSThread) between two reads.
func threadClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic("bench: thread CPU clock: " + err.Error())
	}
	return time.Duration(ts.Nano())
}

// ThreadClockName says what threadClock measures (reports carry it).
const ThreadClockName = "thread CPU time"
