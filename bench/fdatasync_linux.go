package bench

import (
	"os"
	"syscall"
)

// fdatasync is the journal's flush: data and the size of an append, not
// timestamps.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for serr = syscall.Fdatasync(int(fd)); serr == syscall.EINTR; serr = syscall.Fdatasync(int(fd)) {
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
