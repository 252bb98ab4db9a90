package journal

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// TestFdatasyncHeld: the group commit's fdatasync (which keeps its P on
// Linux) syncs a file and reports a failing one as a *os.PathError naming
// fdatasync, with one P or several.
func TestFdatasyncHeld(t *testing.T) {
	for _, procs := range []int{1, 2} {
		prev := runtime.GOMAXPROCS(procs)
		f, err := os.Create(filepath.Join(t.TempDir(), "f"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("entry")); err != nil {
			t.Fatal(err)
		}
		if err := fdatasyncHeld(f); err != nil {
			t.Fatalf("GOMAXPROCS %d: fdatasyncHeld of a file: %v", procs, err)
		}
		f.Close()
		if err := fdatasyncHeld(f); err == nil {
			t.Fatalf("GOMAXPROCS %d: fdatasyncHeld of a closed file succeeded", procs)
		}
		if runtime.GOOS == "linux" {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			var pe *os.PathError
			err = fdatasyncHeld(w)
			if !errors.As(err, &pe) || pe.Op != "fdatasync" || !errors.Is(err, syscall.EINVAL) {
				t.Fatalf("GOMAXPROCS %d: fdatasyncHeld of a pipe = %v, want fdatasync EINVAL", procs, err)
			}
			r.Close()
			w.Close()
		}
		runtime.GOMAXPROCS(prev)
	}
}
