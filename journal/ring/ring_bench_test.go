package ring

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"
)

// hdr is the first field of every benchmark element, so the generic
// benchmark code can stamp and read it through a *hdr (see header).
type hdr struct {
	Seq     int64
	Payload uint64
}

// entry64 is a small 64-byte element.
type entry64 struct {
	hdr
	_ [48]byte
}

// entry128 is a realistic 128-byte order command.
type entry128 struct {
	hdr
	Kind, Side, TIF uint8
	_               [5]byte
	UserID          uint64
	OrderID         uint64
	ClientOrderID   [16]byte
	Symbol, Flags   uint32
	Price, Qty      int64
	QuoteQty        int64
	RecvNanos       int64
	ReplyIdx        uint64
	_               [24]byte
}

var (
	_ [64 - unsafe.Sizeof(entry64{})]byte
	_ [unsafe.Sizeof(entry64{}) - 64]byte
	_ [128 - unsafe.Sizeof(entry128{})]byte
	_ [unsafe.Sizeof(entry128{}) - 128]byte
)

// header returns the hdr at the start of an element (entry64 or entry128).
func header[E any](e *E) *hdr { return (*hdr)(unsafe.Pointer(e)) }

const benchCap = 1 << 12

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// checkSum fails unless sum is 1+2+...+n (every payload seen once).
func checkSum(b *testing.B, sum uint64, n int) {
	if want := uint64(n) * uint64(n+1) / 2; sum != want {
		b.Fatalf("payload sum %d, want %d", sum, want)
	}
}

// consume reads n entries through st, one WaitFor batch at a time (or one
// entry per WaitFor/Commit when single is set), and returns their payload
// sum.
func consume[E any](r *Ring[E], st *Stage[E], n int, single bool) uint64 {
	var sum uint64
	for next := int64(1); next <= int64(n); {
		hi, err := st.WaitFor(next)
		if err != nil {
			panic(err)
		}
		if single {
			hi = next
		}
		for ; next <= hi; next++ {
			sum += header(r.Slot(next)).Payload
		}
		st.Commit(hi)
	}
	return sum
}

// produce claims and publishes n entries in claims of batch entries.
func produce[E any](r *Ring[E], n, batch int) {
	var tmpl E
	for sent := 0; sent < n; {
		k := min(batch, n-sent)
		lo, hi, err := r.Claim(k)
		if err != nil {
			panic(err)
		}
		for s := lo; s <= hi; s++ {
			e := r.Slot(s)
			*e = tmpl
			h := header(e)
			h.Seq, h.Payload = s, uint64(s)
		}
		r.Publish(lo, hi)
		sent += k
	}
}

// benchRing moves b.N entries from producers goroutines (claims of batch
// entries) to one consumer stage.
func benchRing[E any](b *testing.B, producers, batch int, single bool) {
	r, err := New[E](benchCap)
	if err != nil {
		b.Fatal(err)
	}
	st := r.NewStage()
	b.ReportAllocs()
	b.ResetTimer()
	done := make(chan uint64, 1)
	go func() { done <- consume(r, st, b.N, single) }()
	var wg sync.WaitGroup
	for p := range producers {
		n := b.N / producers
		if p == 0 {
			n += b.N % producers
		}
		wg.Go(func() { produce(r, n, batch) })
	}
	wg.Wait()
	sum := <-done
	b.StopTimer()
	reportRate(b)
	checkSum(b, sum, b.N)
}

// BenchmarkRingBatched: one producer claiming batches, one consumer reading
// whatever WaitFor makes available.
func BenchmarkRingBatched(b *testing.B) {
	for _, batch := range []int{64, 256} {
		b.Run(fmt.Sprintf("64B/batch=%d", batch), func(b *testing.B) { benchRing[entry64](b, 1, batch, false) })
		b.Run(fmt.Sprintf("128B/batch=%d", batch), func(b *testing.B) { benchRing[entry128](b, 1, batch, false) })
	}
}

// BenchmarkRingUnbatched: Claim(1)/Publish per entry, and one
// WaitFor/Commit per entry on the consumer side.
func BenchmarkRingUnbatched(b *testing.B) {
	b.Run("64B", func(b *testing.B) { benchRing[entry64](b, 1, 1, true) })
	b.Run("128B", func(b *testing.B) { benchRing[entry128](b, 1, 1, true) })
}

// BenchmarkRingMultiProducer: 4 producers contending on the claim cursor.
func BenchmarkRingMultiProducer(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("64B/producers=4/batch=%d", batch), func(b *testing.B) { benchRing[entry64](b, 4, batch, false) })
	}
}

// BenchmarkRingDiamond: the exchange topology, producer -> {A, B} -> C,
// batches of 256 entries of 128 bytes.
func BenchmarkRingDiamond(b *testing.B) {
	r, err := New[entry128](benchCap)
	if err != nil {
		b.Fatal(err)
	}
	a, p := r.NewStage(), r.NewStage()
	c := r.NewStage(a, p)
	b.ReportAllocs()
	b.ResetTimer()
	sums := make(chan uint64, 3)
	for _, st := range []*Stage[entry128]{a, p, c} {
		go func() { sums <- consume(r, st, b.N, false) }()
	}
	produce(r, b.N, 256)
	for range 3 {
		if sum := <-sums; sum != uint64(b.N)*uint64(b.N+1)/2 {
			b.Fatalf("bad sum %d", sum)
		}
	}
	b.StopTimer()
	reportRate(b)
}

func benchChannel[E any](b *testing.B) {
	ch := make(chan E, benchCap)
	b.ReportAllocs()
	b.ResetTimer()
	done := make(chan uint64, 1)
	go func() {
		var sum uint64
		for range b.N {
			e := <-ch
			sum += header(&e).Payload
		}
		done <- sum
	}()
	var tmpl E
	for s := 1; s <= b.N; s++ {
		e := tmpl
		h := header(&e)
		h.Seq, h.Payload = int64(s), uint64(s)
		ch <- e
	}
	sum := <-done
	b.StopTimer()
	reportRate(b)
	checkSum(b, sum, b.N)
}

// BenchmarkChannelBaseline: the same hand-off through a buffered channel of
// the same element type and capacity.
func BenchmarkChannelBaseline(b *testing.B) {
	b.Run("64B", benchChannel[entry64])
	b.Run("128B", benchChannel[entry128])
}
