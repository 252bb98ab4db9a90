package protection

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/instruments"
	"github.com/ubscore/ubscore/journal"
)

// TestMetrics: every breaker reason is exported at 0 from the start, a live
// trip counts under its reason, and the state metrics read the recovered
// core once SetPipeline gave it (markets by status, resting orders per
// market by name).
func TestMetrics(t *testing.T) {
	inst := instruments.Default()
	markets, err := gateway.NewRegistry(inst.Assets, inst.Markets)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	violations := prometheus.NewCounter(prometheus.CounterOpts{Name: "v", Help: "v"})
	p := New(reg, violations, markets, journal.NewRetention(100, log), log)
	value := func(name string, label string) (float64, bool) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if label == "" || (len(m.GetLabel()) > 0 && m.GetLabel()[0].GetValue() == label) {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue(), true // nil-safe: one is set
				}
			}
		}
		return 0, false
	}
	for _, r := range core.BreakerReasons() {
		if v, ok := value("ubs_circuit_breaker_triggered_total", r.String()); !ok || v != 0 {
			t.Fatalf("reason %s: %v %v", r, v, ok)
		}
	}
	if _, ok := value("ubs_markets", "ACTIVE"); ok {
		t.Fatal("state metrics exported before the core is recovered")
	}
	r := core.BreakerReasons()[0]
	p.onBreaker(core.BreakerChange{Seq: 7, Market: 1, Reason: r})
	p.onBreaker(core.BreakerChange{Seq: 8, Market: 1, Resolve: true, Status: core.MarketActive})
	if v, _ := value("ubs_circuit_breaker_triggered_total", r.String()); v != 1 {
		t.Fatalf("a trip and a resolution: %v trips", v)
	}

	pl, err := journal.Start(journal.Config{Dir: t.TempDir(), ReadView: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if _, err := instruments.Install(pl, inst); err != nil {
		t.Fatal(err)
	}
	p.SetPipeline(pl)
	if v, ok := value("ubs_markets", "ACTIVE"); !ok || v != 2 {
		t.Fatalf("active markets %v %v", v, ok)
	}
	if _, ok := value("ubs_book_orders", "BTC-USDT"); !ok {
		t.Fatal("resting orders not exported by market name")
	}
}
