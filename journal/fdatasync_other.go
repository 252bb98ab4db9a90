//go:build !linux

package journal

import "os"

// Fdatasync is fsync where the platform has no fdatasync.
func Fdatasync(f *os.File) error { return f.Sync() }

// fdatasync is Fdatasync; hold is a Linux-only optimisation (holdPolicy).
func fdatasync(f *os.File, _ bool) error { return f.Sync() }
