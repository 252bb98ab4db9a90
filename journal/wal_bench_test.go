package journal

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"
)

// BenchmarkAppendBatch: one op = one AppendBatch (one write + one fsync) of
// batch 64-byte payloads. Reports entries/s and the fsync latency.
func BenchmarkAppendBatch(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, batch := range []int{1, 64, 1024} {
			name := fmt.Sprintf("batch=%d", batch)
			if !sync {
				name += "/nosync"
			}
			b.Run(name, func(b *testing.B) { benchAppend(b, batch, !sync) })
		}
	}
}

func benchAppend(b *testing.B, batch int, noSync bool) {
	w := walTestOpen(b, b.TempDir(), Options{NoSync: noSync})
	defer w.Close()
	var lat []time.Duration
	inner := w.syncFile
	w.syncFile = func() error {
		t0 := time.Now()
		err := inner()
		lat = append(lat, time.Since(t0))
		return err
	}
	payload := make([]byte, 64)
	es := make([]Entry, batch)
	next := uint64(1)
	b.SetBytes(int64(batch * len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		for i := range es {
			es[i] = Entry{Seq: next, Payload: payload}
			next++
		}
		if err := w.AppendBatch(es); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(next-1)/b.Elapsed().Seconds(), "entries/s")
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		b.ReportMetric(float64(sum.Microseconds())/float64(len(lat)), "fsync-avg-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "fsync-p99-µs")
	}
}

const benchIterEntries = 1_000_000

func benchBuildWAL(b *testing.B) string {
	dir := b.TempDir()
	w := walTestOpen(b, dir, Options{NoSync: true})
	payload := make([]byte, 60)
	es := make([]Entry, 4096)
	next := uint64(1)
	for next <= benchIterEntries {
		es = es[:min(len(es), benchIterEntries-int(next)+1)]
		for i := range es {
			payload[0] = byte(next)
			es[i] = Entry{Seq: next, Payload: payload}
			next++
		}
		if err := w.AppendBatch(es); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	// Flush the NoSync build now, so that its write-back does not run
	// during the measurement.
	for _, p := range walTestSegments(b, dir) {
		f, err := os.Open(p)
		if err == nil {
			err = f.Sync()
			f.Close()
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkIterate: one op = a verified replay of 1M 60-byte entries.
func BenchmarkIterate(b *testing.B) {
	dir := benchBuildWAL(b)
	w := walTestOpen(b, dir, Options{})
	defer w.Close()
	var n, sum uint64
	b.SetBytes(benchIterEntries * 60)
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Iterate(0, func(seq uint64, p []byte) error {
			n++
			sum += uint64(p[0])
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkOpenVerify: one op = the start-up verification scan (read-only
// open) of 1M 60-byte entries.
func BenchmarkOpenVerify(b *testing.B) {
	dir := benchBuildWAL(b)
	ops := 0
	for b.Loop() {
		w, err := OpenReadOnly(dir)
		if err != nil || w.LastSeq() != benchIterEntries {
			b.Fatal(err)
		}
		ops++
	}
	b.ReportMetric(float64(ops*benchIterEntries)/b.Elapsed().Seconds(), "entries/s")
}
