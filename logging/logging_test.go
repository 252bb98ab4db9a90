package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCriticalIsNamed: an alert reads "level":"CRITICAL" in JSON and
// level=CRITICAL in text (never "ERROR+4"), and durations read as "1.5s",
// not as integer nanoseconds.
func TestCriticalIsNamed(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(NewHandler(&buf, false))
	Critical(context.Background(), l, "funds in flight", "retry_in", 1500*time.Millisecond, "since", any(2*time.Second))
	l.Error("plain error")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 records, got %q", buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["level"] != "CRITICAL" || rec["retry_in"] != "1.5s" || rec["since"] != "2s" {
		t.Fatalf("critical record: %v", rec)
	}
	if !strings.Contains(lines[1], `"level":"ERROR"`) {
		t.Fatalf("error record: %s", lines[1])
	}

	buf.Reset()
	l = slog.New(NewHandler(&buf, true))
	Critical(context.Background(), l, "x", "d", time.Second)
	if s := buf.String(); !strings.Contains(s, "level=CRITICAL") || !strings.Contains(s, "d=1s") {
		t.Fatalf("text record: %s", s)
	}
	if !IsCritical(LevelCritical) || IsCritical(slog.LevelError) {
		t.Fatal("IsCritical")
	}
}

// TestNoAlertsAsErrors: no log call in the repository spells an alert as an
// ERROR (or anything else) whose message starts with "CRITICAL"; alerts go
// through Critical / LevelCritical, so one level name finds them all.
func TestNoAlertsAsErrors(t *testing.T) {
	re := regexp.MustCompile(`\.(Error|Warn|Info|Debug)(Context)?\((ctx, |context\.[A-Za-z]+\(\), )?"CRITICAL`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if re.MatchString(line) {
				t.Errorf("%s:%d: an alert logged as a plain level: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
