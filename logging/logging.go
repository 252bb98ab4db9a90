// Package logging is the project's log format on top of log/slog: one named
// CRITICAL level for every alert that needs an operator, and handlers that
// print it (and durations) the way an operator reads them.
//
// Every alert is logged through Critical (or at LevelCritical), never as an
// ERROR whose message happens to start with "CRITICAL":
//
//	logging.Critical(ctx, log, "sink: too far behind", "persisted_seq", p)
//
// With a handler from NewHandler (or any handler using ReplaceAttr) the
// record reads "level":"CRITICAL" in JSON and level=CRITICAL in text;
// alerting matches on that one value. Durations read "1.5s", not integer
// nanoseconds.
package logging

import (
	"context"
	"io"
	"log/slog"
	"time"
)

// LevelCritical is the level of alerts that need an operator now: funds in
// flight with an unknown outcome, a broken invariant, a follower released,
// a database that belongs to another WAL. It sorts above slog.LevelError,
// so a handler at LevelError or below lets it through.
const LevelCritical = slog.Level(12)

// CriticalName is how LevelCritical is printed (the JSON "level" value).
const CriticalName = "CRITICAL"

// Critical logs msg at LevelCritical on l (slog.Default() if nil).
func Critical(ctx context.Context, l *slog.Logger, msg string, args ...any) {
	if l == nil {
		l = slog.Default()
	}
	l.Log(ctx, LevelCritical, msg, args...)
}

// ReplaceAttr is a slog.HandlerOptions.ReplaceAttr that names LevelCritical
// CRITICAL (slog would print "ERROR+4") and renders every time.Duration
// value as its String ("250ms"; slog's JSON handler would print integer
// nanoseconds).
func ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	switch {
	case a.Key == slog.LevelKey && a.Value.Kind() == slog.KindAny:
		// Every level as its string: the same text slog prints, without
		// encoding/json's reflection (slog.Level's MarshalJSON) per line.
		if lv, ok := a.Value.Any().(slog.Level); ok {
			if lv == LevelCritical {
				a.Value = slog.StringValue(CriticalName)
			} else {
				a.Value = slog.StringValue(lv.String())
			}
		}
	case a.Value.Kind() == slog.KindDuration:
		a.Value = slog.StringValue(a.Value.Duration().String())
	case a.Value.Kind() == slog.KindAny:
		if d, ok := a.Value.Any().(time.Duration); ok {
			a.Value = slog.StringValue(d.String())
		}
	}
	return a
}

// NewHandler returns the project's handler on w: text for a terminal, JSON
// otherwise, at Info and above, with ReplaceAttr.
func NewHandler(w io.Writer, text bool) slog.Handler {
	opts := &slog.HandlerOptions{ReplaceAttr: ReplaceAttr}
	if text {
		return slog.NewTextHandler(w, opts)
	}
	return slog.NewJSONHandler(w, opts)
}

// IsCritical reports whether a record's level is an alert (for handlers and
// tests that count alerts).
func IsCritical(l slog.Level) bool { return l >= LevelCritical }

// Attrs logs msg at level with attrs on l (slog.Default() if nil), as
// l.LogAttrs does, but records no caller: slog.Logger takes the caller's
// program counter on every line (runtime.Callers, ~10 % of a line's cost)
// for handlers with AddSource, which the project's handlers never set. For
// lines logged per request or per transfer.
func Attrs(l *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	if l == nil {
		l = slog.Default()
	}
	ctx := context.Background()
	h := l.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	_ = h.Handle(ctx, r)
}
