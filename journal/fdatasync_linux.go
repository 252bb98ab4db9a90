package journal

import (
	"os"
	"runtime"
	"syscall"
)

// Fdatasync flushes f's data and the metadata needed to read it back (the
// file size of an append) but not its timestamps, which the WAL never needs.
func Fdatasync(f *os.File) error { return fdatasync(f, false) }

// fdatasyncHeld is Fdatasync for the group commit: the calling goroutine
// keeps its P (the Go scheduler's processor) for the duration of the
// syscall instead of handing it back.
//
// Why: with a normal syscall the runtime lets another thread take the P
// after ~20 µs, and when the fdatasync returns the journaler usually finds
// no free P and waits on the global run queue behind the HTTP goroutines
// (dozens of them, runnable after each release): a Go execution trace of
// `bench http --conns 256` showed the journaler runnable, not running, 25%
// of the time, every microsecond of it delaying every acknowledgement.
// Holding the P, the journaler releases the batch the moment the disk
// answers; the other P steals the runnable goroutines meanwhile (Go steals
// from a busy P's queue). Measured with the gathering of stages.go
// (gatherYields), 4 interleaved pairs: the exchange's CPU per order fell
// 12% (1.87 vs 2.13 times the load generator's, medians), see issue 3.
//
// The cost: while the disk works (~0.1–3 ms) the process has one P fewer,
// and a stop-the-world (GC start and end) waits for the syscall to return.
// With a single P that would stop every goroutine for each fsync, so then
// it is an ordinary syscall.
func fdatasyncHeld(f *os.File) error { return fdatasync(f, runtime.GOMAXPROCS(0) >= 2) }

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
