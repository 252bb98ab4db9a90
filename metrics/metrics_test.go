package metrics

import (
	"testing"
	"time"
)

// TestObserveCountsByRouteAndStatus: Observe's cached children count into
// the right series of ubs_http_requests_total and the latency histogram.
func TestObserveCountsByRouteAndStatus(t *testing.T) {
	m := New()
	for i := 0; i < 3; i++ {
		m.Observe("POST /api/v1/order", 200, 300*time.Microsecond)
	}
	m.Observe("POST /api/v1/order", 400, time.Millisecond)
	m.Observe("GET /api/v1/balances", 200, 40*time.Microsecond)
	mfs, err := m.Reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	reqs, lat := map[string]float64{}, map[string]uint64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			labels := ""
			for _, l := range mt.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			switch mf.GetName() {
			case "ubs_http_requests_total":
				reqs[labels] = mt.GetCounter().GetValue()
			case "ubs_http_request_duration_seconds":
				lat[labels] = mt.GetHistogram().GetSampleCount()
			}
		}
	}
	wantReqs := map[string]float64{"route=POST /api/v1/order status=200 ": 3, "route=POST /api/v1/order status=400 ": 1,
		"route=GET /api/v1/balances status=200 ": 1}
	wantLat := map[string]uint64{"route=POST /api/v1/order ": 4, "route=GET /api/v1/balances ": 1}
	if len(reqs) != len(wantReqs) || len(lat) != len(wantLat) {
		t.Fatalf("requests %v, latency %v", reqs, lat)
	}
	for k, v := range wantReqs {
		if reqs[k] != v {
			t.Errorf("requests{%s} = %v, want %v", k, reqs[k], v)
		}
	}
	for k, v := range wantLat {
		if lat[k] != v {
			t.Errorf("latency{%s} count = %v, want %v", k, lat[k], v)
		}
	}
}
