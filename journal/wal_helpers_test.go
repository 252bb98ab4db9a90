package journal

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// walTestRand returns a seeded PRNG; the seed is logged and can be forced
// with JOURNAL_TEST_SEED.
func walTestRand(t testing.TB) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("JOURNAL_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("JOURNAL_TEST_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (rerun with JOURNAL_TEST_SEED=%d)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// walTestPayload is the deterministic payload of seq: 0..96 bytes.
func walTestPayload(seq uint64) []byte {
	n := int(seq*7919) % 97
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(seq*31 + uint64(i)*7)
	}
	return p
}

// walLogBuf is a concurrency-safe log sink.
type walLogBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *walLogBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *walLogBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func walQuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func walTestOpen(t testing.TB, dir string, opts Options) *WAL {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = walQuietLogger()
	}
	w, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return w
}

// walTestAppend appends seqs LastSeq()+1 .. LastSeq()+n in batches of at
// most maxBatch (random sizes when r != nil).
func walTestAppend(t testing.TB, w *WAL, n, maxBatch int, r *rand.Rand) {
	t.Helper()
	var es []Entry
	for n > 0 {
		b := min(n, maxBatch)
		if r != nil {
			b = 1 + r.IntN(b)
		}
		es = es[:0]
		next := w.LastSeq() + 1
		for i := 0; i < b; i++ {
			es = append(es, Entry{Seq: next + uint64(i), Payload: walTestPayload(next + uint64(i))})
		}
		if err := w.AppendBatch(es); err != nil {
			t.Fatalf("AppendBatch(%d..%d): %v", next, next+uint64(b)-1, err)
		}
		n -= b
	}
}

// walTestCheck verifies that w holds exactly first..last with the
// deterministic payloads, through Iterate and Read.
func walTestCheck(t testing.TB, w *WAL, first, last uint64) {
	t.Helper()
	if w.FirstSeq() != first || w.LastSeq() != last {
		t.Fatalf("FirstSeq/LastSeq = %d/%d, want %d/%d", w.FirstSeq(), w.LastSeq(), first, last)
	}
	next := first
	err := w.Iterate(0, func(seq uint64, p []byte) error {
		if seq != next {
			t.Fatalf("Iterate: seq %d, want %d", seq, next)
		}
		if !bytes.Equal(p, walTestPayload(seq)) {
			t.Fatalf("Iterate: payload of seq %d differs", seq)
		}
		next++
		return nil
	})
	if err != nil {
		t.Fatalf("Iterate: %v", err)
	}
	if next != last+1 {
		t.Fatalf("Iterate stopped at %d, want %d", next-1, last)
	}
	step := max(1, (last-first)/50)
	for seq := first; seq <= last; seq += step {
		p, err := w.Read(seq)
		if err != nil || !bytes.Equal(p, walTestPayload(seq)) {
			t.Fatalf("Read(%d) = %v, %v", seq, p, err)
		}
	}
}

// walTestSegments lists the segment files of dir in order.
func walTestSegments(t testing.TB, dir string) []string {
	t.Helper()
	l, err := listWALDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range l.segs {
		out = append(out, s.path)
	}
	sort.Strings(out)
	return out
}

// walTestFrames returns the start offset of every frame in a segment file,
// plus the file size as a final element.
func walTestFrames(t testing.TB, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for pos := 0; pos < len(b); {
		if b[pos] == 0 && allZeroBytes(b[pos:]) { // preallocated space: the entries end here
			return append(offs, int64(pos))
		}
		offs = append(offs, int64(pos))
		n, k := binary.Uvarint(b[pos:])
		if k <= 0 {
			t.Fatalf("bad frame at %d in %s", pos, path)
		}
		pos += k + int(n)
	}
	return append(offs, int64(len(b)))
}

// walTestEntriesEnd is the offset where the entries of a segment file end:
// its size, less the preallocated zeros after them.
func walTestEntriesEnd(t testing.TB, path string) int64 {
	t.Helper()
	f := walTestFrames(t, path)
	return f[len(f)-1]
}

// walTestCopyDir copies the regular files of src into a new temp dir.
func walTestCopyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	des, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(src, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, de.Name()), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func walTestFileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
