package publish

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/core"
)

// transferEvents are the events of one transfer (user1 -> user2, 123.45
// USD) and of the tick that executes it, from a core.
func transferEvents(tb testing.TB) (*core.Processor, []core.Event) {
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
	return p, append(evs, apply(core.Command{Kind: core.KindP2PTick})...)
}

// TestTransferMessages pins the subjects and payloads of a transfer's
// messages, byte for byte.
func TestTransferMessages(t *testing.T) {
	p, evs := transferEvents(t)
	msgs, _ := appendMessages(nil, nil, newSubjects("ubs."), evs, p)
	var got []string
	for _, m := range msgs {
		got = append(got, m.subject+" "+strconv.Itoa(m.idx)+" "+string(m.data))
	}
	want := []string{
		"ubs.balance 0 {\"eventType\":\"BALANCE\",\"seq\":4,\"timestamp\":\"2026-11-18T11:06:40.000004Z\",\"userId\":1,\"asset\":1,\"dAvailable\":-12345,\"dFrozen\":12345}",
		"ubs.transfer.created 1 {\"eventType\":\"TRANSFER_CREATED\",\"seq\":4,\"timestamp\":\"2026-11-18T11:06:40.000004Z\",\"transferId\":1,\"fromUserId\":\"user1\",\"toUserId\":\"user2\",\"amount\":123.45,\"status\":\"PENDING\",\"createdAt\":\"2026-11-18T11:06:40.000004Z\",\"executeAt\":\"2026-11-18T11:06:40.000004Z\"}",
		"ubs.balance 3 {\"eventType\":\"BALANCE\",\"seq\":5,\"timestamp\":\"2026-11-18T11:06:40.000005Z\",\"userId\":1,\"asset\":1,\"dAvailable\":0,\"dFrozen\":-12345}",
		"ubs.balance 4 {\"eventType\":\"BALANCE\",\"seq\":5,\"timestamp\":\"2026-11-18T11:06:40.000005Z\",\"userId\":2,\"asset\":1,\"dAvailable\":12345,\"dFrozen\":0}",
		"ubs.transfer.completed 5 {\"eventType\":\"TRANSFER_COMPLETED\",\"seq\":5,\"timestamp\":\"2026-11-18T11:06:40.000005Z\",\"transferId\":1,\"fromUserId\":\"user1\",\"toUserId\":\"user2\",\"amount\":123.45}",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// BenchmarkAppendMessages: the payloads of one executed transfer's events
// (created, completed, the balance changes), per transfer.
func BenchmarkAppendMessages(b *testing.B) {
	p, evs := transferEvents(b)
	subs := newSubjects("ubs.")
	msgs, buf := appendMessages(nil, nil, subs, evs, p)
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
	for _, scale := range []uint8{0, 1, 2, 3, 6, 8, 9, 17, core.MaxBaseScale, 19, 20, 21, 100, 255} { // beyond 18 too: nothing assumes core's limit
		for _, v := range vals {
			if got, want := string(appendUnits([]byte("x"), v, scale)), "x"+ref(v, scale); got != want {
				t.Fatalf("appendUnits(%d, %d) = %q, want %q", v, scale, got, want)
			}
		}
	}
}
