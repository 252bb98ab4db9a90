package journal

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCreateOnce: the first call creates the file (mode 0600, the content
// given); a later one reports false and leaves it as it was.
func TestCreateOnce(t *testing.T) {
	dir := t.TempDir()
	if created, err := CreateOnce(dir, "id", "first\n"); err != nil || !created {
		t.Fatalf("first: %v %v", created, err)
	}
	if created, err := CreateOnce(dir, "id", "second\n"); err != nil || created {
		t.Fatalf("second: %v %v", created, err)
	}
	path := filepath.Join(dir, "id")
	if b, err := os.ReadFile(path); err != nil || string(b) != "first\n" {
		t.Fatalf("content %q %v", b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temp files left: %v", ents)
	}
}
