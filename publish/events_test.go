package publish

import (
	"strconv"
	"testing"

	"github.com/ubscore/ubscore/core"
)

// BenchmarkAppendMessages: the payloads of one executed transfer's events
// (created, completed, the two balances of each), per transfer.
func BenchmarkAppendMessages(b *testing.B) {
	p := core.New(core.Config{})
	seq := core.Seq(0)
	apply := func(c core.Command) []core.Event {
		seq++
		c.Seq, c.Time = seq, 1_795_000_000_000_000_000+int64(seq)*1000
		return append([]core.Event(nil), p.Apply(&c)...)
	}
	apply(core.Command{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 2})
	for u := core.UserID(1); u <= 2; u++ {
		apply(core.Command{Kind: core.KindP2PCreateUser, User: u, Text: "user" + strconv.Itoa(int(u)), Asset: 1, Amount: 1 << 40})
	}
	evs := apply(core.Command{Kind: core.KindP2PTransfer, User: 1, OrderID: 2, Asset: 1, Amount: 12345})
	evs = append(evs, apply(core.Command{Kind: core.KindP2PTick})...)
	msgs, buf := appendMessages(nil, nil, newSubjects("ubs."), evs, p)
	if len(msgs) < 4 {
		b.Fatalf("%d messages from %d events", len(msgs), len(evs))
	}
	subs := newSubjects("ubs.")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		msgs, buf = appendMessages(msgs[:0], buf[:0], subs, evs, p)
	}
}

// TestAppendUnits: every sign, magnitude and scale against a decimal
// written by strconv and string surgery.
func TestAppendUnits(t *testing.T) {
	ref := func(v int64, scale uint8) string {
		neg := v < 0
		s := strconv.FormatUint(uint64(v), 10)
		if neg {
			s = strconv.FormatUint(-uint64(v), 10)
		}
		for len(s) <= int(scale) {
			s = "0" + s
		}
		if scale > 0 {
			s = s[:len(s)-int(scale)] + "." + s[len(s)-int(scale):]
		}
		if neg {
			s = "-" + s
		}
		return s
	}
	vals := []int64{0, 1, -1, 9, 10, 99, 100, 12345, -12345, 1<<63 - 1, -1 << 63, -(1<<63 - 1), 1e18, -1e18}
	for scale := uint8(0); scale <= core.MaxBaseScale; scale++ {
		for _, v := range vals {
			if got, want := string(appendUnits([]byte("x"), v, scale)), "x"+ref(v, scale); got != want {
				t.Fatalf("appendUnits(%d, %d) = %q, want %q", v, scale, got, want)
			}
		}
	}
}
