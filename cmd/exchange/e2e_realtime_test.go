//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestE2ERealtimeProcessor: --realtime-processor runs the exchange's
// processor on a SCHED_FIFO thread, the process's only one (the thread the
// start-up log names), the exchange accepts commands on it, and SIGTERM stops it
// cleanly. Where this machine refuses the policy, the exchange says so in a
// warning and serves all the same.
func TestE2ERealtimeProcessor(t *testing.T) {
	t.Parallel()
	s := e2eStart(t, t.TempDir(), "", "--realtime-processor")
	admin, user := s.token(1000, true), s.token(7, false)
	if st, b := s.do("POST", "/admin/v1/adjust", admin, map[string]any{"user_id": 7, "asset": "USDT",
		"amount": "1000", "ref": "rt-1"}); st != 200 {
		t.Fatalf("adjust: %d %v", st, b)
	}
	if st, b := s.do("POST", "/api/v1/order", user, map[string]any{"market": "BTC-USDT", "side": "BUY", "type": "LIMIT",
		"price": "100", "quantity": "1"}); st != 200 {
		t.Fatalf("order: %d %v", st, b)
	}
	allowed := realtimeAllowed()
	want := "the processor runs on a real-time thread"
	if !allowed {
		want = "could not get real-time priority"
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(s.Logs(), want); { // INFO lines are flushed in batches
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q:\n%s", want, s.Logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	fifo := fifoTasks(t, s.cmd.Process.Pid)
	logs := s.Logs()
	if !allowed {
		if len(fifo) != 0 || !strings.Contains(logs, "could not get real-time priority") {
			t.Fatalf("refused here, yet SCHED_FIFO threads %v or no warning:\n%s", fifo, logs)
		}
	} else if len(fifo) != 1 || !strings.Contains(logs, fmt.Sprintf(`"tid":%d`, fifo[0])) ||
		!strings.Contains(logs, "the processor runs on a real-time thread") {
		t.Fatalf("SCHED_FIFO threads %v, want the processor's alone:\n%s", fifo, logs)
	}
	s.Stop()
}

// realtimeAllowed reports whether this machine lets a process make a thread
// SCHED_FIFO (tried on a scratch thread, put back in the normal class).
func realtimeAllowed() bool {
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 1}, 0)
		if err == nil {
			err = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
		}
		done <- err
	}()
	return <-done == nil
}

// fifoTasks lists the threads of process pid whose policy (field 41 of
// /proc/PID/task/TID/stat) is SCHED_FIFO.
func fifoTasks(t *testing.T, pid int) []int {
	t.Helper()
	dirs, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	var fifo []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])) // f[0] is field 3
		if len(f) > 38 && f[38] == fmt.Sprint(unix.SCHED_FIFO) {
			var tid int
			fmt.Sscan(filepath.Base(d), &tid)
			fifo = append(fifo, tid)
		}
	}
	return fifo
}
