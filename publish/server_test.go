package publish

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// TestNewFollower: off (no NATS URL), nothing is created or registered; on,
// the publisher takes the configured stream and prefix, holds the WAL as
// the follower "publisher", and exports its lag against the durable seq.
func TestNewFollower(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ret := journal.NewRetention(100, log)
	reg := prometheus.NewRegistry()
	durable := core.Seq(0)
	if p := NewFollower(Default(), ret, reg, func() core.Seq { return durable }, log); p != nil || len(ret.Followers()) != 0 {
		t.Fatalf("off: %v %v", p, ret.Followers())
	}
	cfg := Config{NATSURL: "nats://127.0.0.1:1", Stream: "S", Prefix: "p."}
	p := NewFollower(cfg, ret, reg, func() core.Seq { return durable }, log)
	if p == nil || p.Stream != "S" || p.Prefix != "p." {
		t.Fatalf("on: %+v", p)
	}
	if f := ret.Followers(); len(f) != 1 || f[0].Name != "publisher" {
		t.Fatalf("followers %+v", f)
	}
	durable = 7
	lag := -1.0
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "ubs_publisher_lag_commands" {
			lag = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if lag != 7 {
		t.Fatalf("lag %v, want 7 (nothing published)", lag)
	}
}
