package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuf is a bytes.Buffer safe for the flusher goroutine and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestBufferedWarnFlushes: an INFO line waits in the buffer; a WARN (or
// CRITICAL) record is written at once, with every line before it, in order.
func TestBufferedWarnFlushes(t *testing.T) {
	var out syncBuf
	b := NewBuffered(&out)
	defer b.Close()
	log := slog.New(NewBufferedHandler(b, false))
	b.mu.Lock()
	b.buf = append(b.buf, "{\"msg\":\"first\"}\n"...)
	b.mu.Unlock()
	log.Warn("second")
	got := out.String()
	if i, j := strings.Index(got, `"first"`), strings.Index(got, `"second"`); i < 0 || j < i {
		t.Fatalf("after WARN the output is %q: want first then second", got)
	}
	if !strings.Contains(got, `"level":"WARN"`) {
		t.Fatalf("level not printed as WARN: %q", got)
	}
}

// TestBufferedInfoReachesWriter: an INFO line reaches the writer within
// about FlushEvery, and Close flushes what is left.
func TestBufferedInfoReachesWriter(t *testing.T) {
	var out syncBuf
	b := NewBuffered(&out)
	log := slog.New(NewBufferedHandler(b, false))
	log.Info("Transfer created", "transferId", 1)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "Transfer created") {
		if time.Now().After(deadline) {
			t.Fatal("INFO line never flushed")
		}
		time.Sleep(time.Millisecond)
	}
	if !strings.Contains(out.String(), `"level":"INFO"`) {
		t.Fatalf("level: %q", out.String())
	}
	b.mu.Lock()
	b.buf = append(b.buf, "{\"msg\":\"last\"}\n"...)
	b.mu.Unlock()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"last"`) {
		t.Fatalf("Close did not flush: %q", out.String())
	}
	log.Info("after close") // writes through
	if !strings.Contains(out.String(), "after close") {
		t.Fatalf("write after Close lost: %q", out.String())
	}
}
