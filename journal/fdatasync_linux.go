package journal

import (
	"os"
	"syscall"
)

// Fdatasync flushes f's data and the metadata needed to read it back (the
// file size of an append) but not its timestamps, which the WAL never needs.
func Fdatasync(f *os.File) error { return fdatasync(f, false) }

// fdatasync is Fdatasync; with hold, the calling goroutine keeps its P
// through the syscall (a raw syscall: see holdPolicy).
func fdatasync(f *os.File, hold bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if hold {
				if _, _, e := syscall.RawSyscall(syscall.SYS_FDATASYNC, fd, 0, 0); e != 0 {
					serr = e
				} else {
					serr = nil
				}
			} else {
				serr = syscall.Fdatasync(int(fd))
			}
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
