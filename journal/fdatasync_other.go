//go:build !linux

package journal

import "os"

// Fdatasync is fsync where the platform has no fdatasync.
func Fdatasync(f *os.File) error { return f.Sync() }

// fdatasyncHeld is Fdatasync (see fdatasync_linux.go).
func fdatasyncHeld(f *os.File) error { return f.Sync() }
