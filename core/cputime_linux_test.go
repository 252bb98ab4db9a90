//go:build linux

package core

import (
	"time"

	"golang.org/x/sys/unix"
)

// shapeClock reads the calling thread's CPU time: on a machine shared with
// other jobs, time spent descheduled is not the code's, and wall time would
// charge it to whichever side was running. The caller must hold its thread
// (runtime.LockOSThread) between two reads.
func shapeClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// shapeClockName says what shapeClock measures, for the benchmark's doc.
const shapeClockName = "thread CPU time"
