//go:build !linux

package journal

import "errors"

// realtimeThread: see rtthread_linux.go. Only Linux is supported.
func realtimeThread() (tid int, err error) {
	return 0, errors.New("real-time threads are supported on Linux only")
}

func normalThread() error { return nil }
