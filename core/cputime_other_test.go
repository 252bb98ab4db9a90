//go:build !linux

package core

import "time"

var shapeEpoch = time.Now()

// shapeClock is wall time where thread CPU time is not at hand.
func shapeClock() time.Duration { return time.Since(shapeEpoch) }

const shapeClockName = "wall time"
