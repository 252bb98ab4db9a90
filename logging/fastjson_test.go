package logging

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

// slowLine is what NewHandler's JSON (slog.JSONHandler + ReplaceAttr)
// prints for r.
func slowLine(t testing.TB, r slog.Record) string {
	var out bytes.Buffer
	if err := NewHandler(&out, false).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// fastLine is what the fast handler writes for r ("" if it fell back), and
// what the handler as a whole writes.
func fastLine(t testing.TB, r slog.Record) (fast, handled string) {
	var out syncBuf
	b := NewBuffered(&out)
	h := newFastJSON(b)
	if f, ok := appendFastRecord(nil, &r); ok {
		fast = string(f)
	}
	if err := h.Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	return fast, out.String()
}

var when = time.Date(2026, 11, 26, 23, 14, 53, 123456789, time.UTC)

func record(level slog.Level, msg string, attrs ...slog.Attr) slog.Record {
	r := slog.NewRecord(when, level, msg, 0)
	r.AddAttrs(attrs...)
	return r
}

// TestFastJSONSameBytes: every record the fast path prints is byte for
// byte slog's line; every other record is printed by slog itself.
func TestFastJSONSameBytes(t *testing.T) {
	strs := []string{"", "plain", `q"uote`, `back\slash`, "nl\ncr\rtab\t", "ctl\x00\x01\x1f\x7f", "<html>&amp;",
		"héllo wörld ✓", "bad\xffutf8\xc3", "sep\u2028and\u2029", "emoji 🚀", strings.Repeat("long ", 300)}
	fastCases := []slog.Record{
		record(slog.LevelInfo, "Transfer created", slog.Uint64("transferId", 42), slog.String("fromUserId", "user1"),
			slog.String("toUserId", "user2"), slog.String("amount", "0.01"), slog.String("status", "PENDING")),
		record(slog.LevelWarn, "Transfer refused", slog.Int64("neg", -7), slog.Int64("min", math.MinInt64),
			slog.Uint64("max", math.MaxUint64), slog.Bool("t", true), slog.Bool("f", false)),
		record(slog.LevelError, "durations", slog.Duration("d", 1500*time.Millisecond), slog.Any("any_d", 250*time.Millisecond),
			slog.Duration("zero", 0), slog.Duration("neg", -time.Nanosecond)),
		record(LevelCritical, "alert", slog.String("k", "v")),
		record(slog.LevelDebug+1, "odd level"),
		record(slog.LevelInfo+2, "odd level 2"),
		record(slog.LevelInfo, ""),
		slog.NewRecord(time.Time{}, slog.LevelInfo, "no time", 0),
		slog.NewRecord(when.In(time.FixedZone("X", 3*3600+1800)), slog.LevelInfo, "zone", 0),
		slog.NewRecord(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), slog.LevelInfo, "whole second", 0),
		slog.NewRecord(time.Now(), slog.LevelInfo, "monotonic", 0), // Round(0) strips it in both
	}
	for _, s := range strs {
		fastCases = append(fastCases, record(slog.LevelInfo, s, slog.String(s+"key", s), slog.String("k", s)))
	}
	for i, r := range fastCases {
		want := slowLine(t, r)
		fast, got := fastLine(t, r)
		if fast == "" {
			t.Errorf("case %d (%q): the fast path fell back", i, r.Message)
		}
		if fast != want || got != want {
			t.Errorf("case %d:\n fast %q\n got  %q\n want %q", i, fast, got, want)
		}
	}
	// Records the fast path leaves to slog: still printed, as slog prints them.
	slowCases := []slog.Record{
		record(slog.LevelInfo, "float", slog.Float64("f", 1.5)),
		record(slog.LevelInfo, "time attr", slog.Time("at", when)),
		record(slog.LevelInfo, "group", slog.Group("g", slog.Int("a", 1))),
		record(slog.LevelInfo, "any", slog.Any("m", map[string]int{"a": 1})),
		record(slog.LevelInfo, "error", slog.Any("err", errors.New("boom"))),
		record(slog.LevelInfo, "empty key", slog.String("", "v")),
		record(slog.LevelInfo, "empty attr", slog.Attr{}),
		record(slog.LevelInfo, "level key", slog.Any(slog.LevelKey, slog.LevelWarn)),
		record(slog.LevelInfo, "valuer", slog.Any("lv", valuer{})),
		slog.NewRecord(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), slog.LevelInfo, "year 10000", 0),
	}
	for i, r := range slowCases {
		want := slowLine(t, r)
		fast, got := fastLine(t, r)
		if fast != "" {
			t.Errorf("slow case %d (%q): the fast path printed %q", i, r.Message, fast)
		}
		if got != want {
			t.Errorf("slow case %d:\n got  %q\n want %q", i, got, want)
		}
	}
}

type valuer struct{}

func (valuer) LogValue() slog.Value { return slog.StringValue("resolved") }

// TestFastJSONDerived: WithAttrs and WithGroup keep slog's output (and the
// WARN flush of the buffered handler).
func TestFastJSONDerived(t *testing.T) {
	var out syncBuf
	b := NewBuffered(&out)
	log := slog.New(NewBufferedHandler(b, false)).With("node", 3).WithGroup("g")
	log.Warn("derived", "k", "v")
	got := out.String() // flushed by the WARN
	var ref bytes.Buffer
	slog.New(NewHandler(&ref, false)).With("node", 3).WithGroup("g").Warn("derived", "k", "v")
	_ = b.Close()
	trim := func(s string) string { return s[strings.Index(s, `"level"`):] } // times differ
	if got == "" || trim(got) != trim(ref.String()) {
		t.Fatalf("derived handler wrote %q, slog %q", got, ref.String())
	}
}

// FuzzFastJSONString: for any message, key and value, the fast path prints
// slog's bytes.
func FuzzFastJSONString(f *testing.F) {
	for _, s := range []string{"", "a", "\x00", "\xff", "\u2028", `"\`, "é"} {
		f.Add(s, s, s, int64(-1))
	}
	f.Fuzz(func(t *testing.T, msg, key, val string, n int64) {
		if key == "" || key == slog.LevelKey {
			key = "k" + key
		}
		r := record(slog.LevelInfo, msg, slog.String(key, val), slog.Int64("n", n), slog.Uint64("u", uint64(n)))
		want := slowLine(t, r)
		fast, _ := appendFastRecord(nil, &r)
		if string(fast) != want {
			t.Fatalf("fast %q\nwant %q", fast, want)
		}
	})
}

func BenchmarkFastJSON(b *testing.B) {
	r := record(slog.LevelInfo, "Transfer created", slog.Uint64("transferId", 42), slog.String("fromUserId", "user1"),
		slog.String("toUserId", "user2"), slog.String("amount", "0.01"), slog.String("status", "PENDING"))
	var buf []byte
	b.Run("fast", func(b *testing.B) {
		for range b.N {
			buf, _ = appendFastRecord(buf[:0], &r)
		}
	})
	b.Run("slog", func(b *testing.B) {
		var out bytes.Buffer
		h := NewHandler(&out, false)
		for range b.N {
			out.Reset()
			_ = h.Handle(context.Background(), r)
		}
	})
}

// TestFastJSONTimes: the cached per-second time text gives slog's bytes for
// any instant, fraction and zone, including across a DST change and when
// lines alternate between zones and seconds.
func TestFastJSONTimes(t *testing.T) {
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("half", -(3*3600 + 1800)), time.FixedZone("zero", 0)}
	if ny, err := time.LoadLocation("America/New_York"); err == nil {
		zones = append(zones, ny)
	}
	dst := time.Date(2026, 3, 8, 6, 59, 58, 0, time.UTC) // 01:59:58 EST, 2 s before the jump to EDT
	rng := uint64(1)
	next := func() uint64 { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng }
	for i := 0; i < 20_000; i++ {
		var at time.Time
		switch i % 4 {
		case 0: // around the DST change, sub-second steps
			at = dst.Add(time.Duration(next()%4_000) * time.Millisecond)
		case 1: // fractions with trailing zeros
			at = time.Unix(1_795_575_839+int64(next()%3), int64(next()%10)*100_000_000)
		case 2: // any instant in years 0..9999
			at = time.Unix(int64(next()%315_569_520_000)-62_167_219_200, int64(next()%1_000_000_000)) // 0000-01-01 .. 9999-12-31
		default: // now, with its monotonic reading
			at = time.Now()
		}
		at = at.In(zones[next()%uint64(len(zones))])
		r := slog.NewRecord(at, slog.LevelInfo, "t", 0)
		want := slowLine(t, r)
		fast, ok := appendFastRecord(nil, &r)
		if !ok || string(fast) != want {
			t.Fatalf("%v (%s): fast %q (ok %v)\nwant %q", at, at.Location(), fast, ok, want)
		}
	}
}

// TestAttrs: logging.Attrs prints what LogAttrs prints (but the time), and
// nothing below the handler's level.
func TestAttrs(t *testing.T) {
	var a, b bytes.Buffer
	la, lb := slog.New(NewHandler(&a, false)), slog.New(NewHandler(&b, false))
	Attrs(la, slog.LevelInfo, "Transfer completed", slog.Uint64("transferId", 7), slog.String("amount", "0.01"))
	lb.LogAttrs(context.Background(), slog.LevelInfo, "Transfer completed", slog.Uint64("transferId", 7), slog.String("amount", "0.01"))
	Attrs(la, slog.LevelDebug, "hidden")
	trim := func(s string) string { return s[strings.Index(s, `"level"`):] }
	if a.Len() == 0 || trim(a.String()) != trim(b.String()) {
		t.Fatalf("Attrs wrote %q, LogAttrs %q", a.String(), b.String())
	}
}
