package bench

import (
	"os"
	"runtime/pprof"
	"runtime/trace"
)

// StartCPUProfile starts a CPU profile into path ("" = none) and returns the
// func that stops it. Shared by the bench and replay tools.
func StartCPUProfile(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error { pprof.StopCPUProfile(); return f.Close() }, nil
}

// StartTrace starts a runtime execution trace written to path ("" = none)
// and returns the function that stops it (go tool trace reads the file).
func StartTrace(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error { trace.Stop(); return f.Close() }, nil
}
