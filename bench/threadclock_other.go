//go:build !linux

package bench

import "time"

var clockEpoch = time.Now()

// threadClock is wall time where a thread CPU clock is not at hand.
func threadClock() time.Duration { return time.Since(clockEpoch) }

// ThreadClockName says what threadClock measures (reports carry it).
const ThreadClockName = "wall time"
