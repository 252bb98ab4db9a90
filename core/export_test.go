package core

import "testing"

// export_test.go lends package core_test's benchmarks (which import
// bench/..., which imports core: they cannot live in package core) what
// they compare against: the mixed benchmark stream of bench_test.go and the
// allocation helpers of allocs_test.go.

// MixedBenchStream is BenchmarkProcessorMixed's workload: the snapshot its
// stream starts from and the stream.
func MixedBenchStream() (snap []byte, cmds []Command) {
	w := benchWorkloadOnce()
	return w.snap, w.cmds
}

// BenchApplyStream is the body of BenchmarkProcessorMixed (bench_test.go)
// on any stream: BenchmarkProcessorBinary measures the same way.
func BenchApplyStream(b *testing.B, snap []byte, cmds []Command) { benchApplyStream(b, snap, cmds) }

// Mallocs is the process's malloc count so far.
func Mallocs() uint64 { return mallocs() }

// RaceEnabled reports whether the test binary was built with -race.
func RaceEnabled() bool { return raceEnabled() }
