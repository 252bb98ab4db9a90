package gateway

import (
	"math/rand/v2"
	"testing"

	"github.com/ubscore/ubscore/core"
)

// BenchmarkHistoryApply: History.Apply (the read view's per-command cost)
// over a recorded random stream of placements, cancels and modifies of 6
// users on 2 markets (about a third of the commands trade).
func BenchmarkHistoryApply(b *testing.B) {
	r := newHistoryRig(b)
	for u := core.UserID(1); u <= 6; u++ {
		for a := core.AssetID(1); a <= 3; a++ {
			r.apply(core.Command{Kind: core.KindAdjust, User: u, Asset: a, Amount: 1 << 50, Key: core.Key{byte(u), byte(a), 'f'}})
		}
	}
	type rec struct {
		c   core.Command
		evs []core.Event
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var stream []rec
	var maxID core.OrderID
	for range 50_000 {
		c := randomCommand(rng, maxID)
		evs := r.apply(c)
		if res := evs[len(evs)-1]; c.Kind == core.KindPlaceOrder && res.Code == core.OK && res.OrderID != 0 {
			maxID = res.OrderID
		}
		c.Seq = r.seq
		stream = append(stream, rec{c, append([]core.Event(nil), evs...)})
	}
	b.ReportAllocs()
	b.ResetTimer()
	h := new(History)
	for i := 0; i < b.N; i++ {
		if i%len(stream) == 0 {
			h = new(History) // the stream starts over: a fresh History
		}
		s := &stream[i%len(stream)]
		h.Apply(&s.c, s.evs)
	}
}
