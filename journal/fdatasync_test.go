package journal

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestFdatasyncHold: both forms of the group commit's fdatasync (holding
// the P, and the ordinary syscall) sync a file and report a failing one as a
// *os.PathError naming fdatasync with the errno.
func TestFdatasyncHold(t *testing.T) {
	for _, hold := range []bool{true, false} {
		f, err := os.Create(filepath.Join(t.TempDir(), "f"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("entry")); err != nil {
			t.Fatal(err)
		}
		if err := fdatasync(f, hold); err != nil {
			t.Fatalf("hold %v: fdatasync of a file: %v", hold, err)
		}
		f.Close()
		if runtime.GOOS != "linux" {
			continue
		}
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		var pe *os.PathError
		err = fdatasync(w, hold)
		if !errors.As(err, &pe) || pe.Op != "fdatasync" || !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("hold %v: fdatasync of a pipe = %v, want fdatasync EINVAL", hold, err)
		}
		r.Close()
		w.Close()
	}
}

// TestHoldPolicy: the sync holds its P only with two Ps or more, and a slow
// held sync (a disk stall, which a stop-the-world would wait out) makes the
// next heldSyncPause of syncs ordinary; a slow ordinary sync changes nothing.
func TestHoldPolicy(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var h holdPolicy
	if h.hold(t0, 1) || !h.hold(t0, 2) || !h.hold(t0, 8) {
		t.Fatal("a fresh policy must hold with >= 2 Ps only")
	}
	h.done(true, t0, t0.Add(heldSyncSlow)) // not slower than the bound
	if !h.hold(t0.Add(heldSyncSlow), 2) {
		t.Fatal("a sync of exactly heldSyncSlow stopped holding")
	}
	h.done(false, t0, t0.Add(time.Second)) // a slow ordinary sync
	if !h.hold(t0.Add(time.Second), 2) {
		t.Fatal("a slow ordinary sync stopped holding")
	}
	end := t0.Add(heldSyncSlow + time.Microsecond)
	h.done(true, t0, end) // a slow held sync
	if h.hold(end, 2) || h.hold(end.Add(heldSyncPause-time.Nanosecond), 2) {
		t.Fatal("after a slow held sync the next heldSyncPause must be ordinary")
	}
	if !h.hold(end.Add(heldSyncPause), 2) {
		t.Fatal("holding did not resume after heldSyncPause")
	}
}

// TestWALSyncUsesHoldPolicy: the WAL's group-commit fsync goes through
// its holdPolicy: it holds the P while the policy allows, and a slow held
// sync makes the following ones ordinary.
func TestWALSyncUsesHoldPolicy(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs GOMAXPROCS >= 2")
	}
	w := walTestOpen(t, t.TempDir(), Options{})
	defer w.Close()
	var holds []bool
	slow := false
	w.mu.Lock()
	w.held.syncFn = func(f *os.File, hold bool) error {
		holds = append(holds, hold)
		if slow {
			time.Sleep(heldSyncSlow + time.Millisecond)
		}
		return fdatasync(f, hold)
	}
	w.mu.Unlock()
	walTestAppend(t, w, 2, 1, nil)
	slow = true
	walTestAppend(t, w, 1, 1, nil) // held and slow
	slow = false
	walTestAppend(t, w, 2, 1, nil) // within heldSyncPause: ordinary
	want := []bool{true, true, true, false, false}
	if len(holds) != len(want) {
		t.Fatalf("syncs %v, want %v", holds, want)
	}
	for i := range want {
		if holds[i] != want[i] {
			t.Fatalf("syncs held %v, want %v", holds, want)
		}
	}
	walTestCheck(t, w, 1, 5)
}
