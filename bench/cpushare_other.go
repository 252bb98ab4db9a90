//go:build !linux

package bench

import "errors"

// sampleCPU needs Linux's /proc; elsewhere HTTPResult.CPU stays nil.
func sampleCPU(int) (*cpuSample, error) {
	return nil, errors.New("bench: CPU shares need /proc (Linux)")
}

// procsCPU needs Linux's /proc: 0 elsewhere.
func procsCPU([]int) int64 { return 0 }
