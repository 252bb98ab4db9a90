package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/logging"
)

// TestLoggerFormat: the server's log names its alerts CRITICAL (not slog's
// "ERROR+4") and writes durations as text ("retry_in":"250ms", not integer
// nanoseconds), in JSON and on a terminal.
func TestLoggerFormat(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, false)
	logging.Critical(context.Background(), log, "sink: too far behind", "retry_in", 250*time.Millisecond)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["level"] != "CRITICAL" || rec["retry_in"] != "250ms" {
		t.Fatalf("record %v: want level CRITICAL and retry_in 250ms", rec)
	}
	buf.Reset()
	logging.Critical(context.Background(), newLogger(&buf, true), "x")
	if !strings.Contains(buf.String(), "level=CRITICAL") {
		t.Fatalf("terminal record: %s", buf.String())
	}
}
