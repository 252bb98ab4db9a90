package rttest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Permitted reports whether this process may make a thread SCHED_FIFO,
// tried on a scratch thread that it puts back in the normal class (the
// goroutine ends locked: its thread exits, or is parked if it is the main
// thread).
func Permitted() bool {
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked
		err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0)
		if err == nil {
			err = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
		}
		done <- err
	}()
	return <-done == nil
}

// FIFOThreads lists the threads of process pid (0: this one) whose policy,
// field 41 of /proc/PID/task/TID/stat, is SCHED_FIFO.
func FIFOThreads(t testing.TB, pid int) []int {
	t.Helper()
	proc := "self"
	if pid != 0 {
		proc = strconv.Itoa(pid)
	}
	dirs, err := filepath.Glob(filepath.Join("/proc", proc, "task", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("threads of %s: %v", proc, err)
	}
	var fifo []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])) // f[0] is field 3 (state)
		if len(f) < 39 {
			t.Fatalf("%s: %d fields", d, len(f))
		}
		if f[38] == fmt.Sprint(unix.SCHED_FIFO) {
			tid, _ := strconv.Atoi(filepath.Base(d))
			fifo = append(fifo, tid)
		}
	}
	return fifo
}
