package logging

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strconv"
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

// gateWriter blocks every Write until gate is closed.
type gateWriter struct {
	entered chan struct{}
	gate    chan struct{}
	out     syncBuf
}

func (g *gateWriter) Write(p []byte) (int, error) {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.gate
	return g.out.Write(p)
}

// TestBufferedWriteDoesNotWaitForFlush: while a flush is stuck in the
// underlying write, loggers still append (they never wait for the I/O),
// and every line reaches the writer once, in order, by Close.
func TestBufferedWriteDoesNotWaitForFlush(t *testing.T) {
	g := &gateWriter{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	b := NewBuffered(g)
	_, _ = b.Write([]byte("a\n"))
	go func() { _ = b.Flush() }()
	<-g.entered // the flush holds "a" inside w.Write
	done := make(chan struct{})
	go func() {
		for _, l := range []string{"b\n", "c\n"} {
			_, _ = b.Write([]byte(l))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Write waited for the flush's write to the underlying writer")
	}
	close(g.gate)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_, _ = b.Write([]byte("d\n")) // after Close: straight through, after the rest
	if got := g.out.String(); got != "a\nb\nc\nd\n" {
		t.Fatalf("writer got %q", got)
	}
}

// TestBufferedConcurrentOrder: concurrent writers, flushes and a Close:
// every line once, each writer's lines in its order.
func TestBufferedConcurrentOrder(t *testing.T) {
	var out syncBuf
	b := NewBuffered(&out)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < lines; i++ {
				_, _ = b.Write([]byte(strconv.Itoa(w) + " " + strconv.Itoa(i) + "\n"))
				if i%97 == 0 {
					_ = b.Flush()
				}
			}
		}()
	}
	wg.Wait()
	_ = b.Close()
	next := make([]int, writers)
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var w, i int
		if _, err := fmt.Sscanf(l, "%d %d", &w, &i); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if i != next[w] {
			t.Fatalf("writer %d: line %d after %d", w, i, next[w]-1)
		}
		next[w]++
	}
	for w, n := range next {
		if n != lines {
			t.Fatalf("writer %d: %d lines of %d", w, n, lines)
		}
	}
}

// BenchmarkBufferedParallel: INFO lines from many goroutines through the
// exchange's handler into a Buffered on a file.
func BenchmarkBufferedParallel(b *testing.B) {
	f, err := os.CreateTemp(b.TempDir(), "log")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := NewBuffered(f)
	defer buf.Close()
	log := slog.New(NewBufferedHandler(buf, false))
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			Attrs(log, slog.LevelInfo, "Transfer created", slog.Uint64("transferId", 42), slog.String("fromUserId", "user1"),
				slog.String("toUserId", "user2"), slog.String("amount", "0.01"), slog.String("status", "PENDING"))
		}
	})
}
