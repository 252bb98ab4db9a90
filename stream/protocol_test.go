package stream

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ubscore/ubscore/core"
)

func TestDecodeRequest(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Request
		code string
	}{
		{`{"op":"ping","id":7}`, Request{Op: OpPing, ID: 7}, ""},
		{`{"op":"subscribe","channel":"depth","market":"BTC-USDT"}`, Request{Op: OpSubscribe, Channel: ChDepth, Market: "BTC-USDT"}, ""},
		{`{"op":"subscribe","channel":"trades","market":"77","outcome":"NO"}`,
			Request{Op: OpSubscribe, Channel: ChTrades, Market: "77", Binary: 77, Outcome: core.OutcomeNo}, ""},
		{`{"op":"subscribe","channel":"orders","token":"x.y.z","since":42}`,
			Request{Op: OpSubscribe, Channel: ChOrders, Token: "x.y.z", Since: 42, HasSince: true}, ""},
		{`{"op":"unsubscribe","channel":"balances"}`, Request{Op: OpUnsubscribe, Channel: ChBalances}, ""},
		{`{"op":"subscribe","channel":"depth","market":"BTC-USDT","depth":5}`, Request{}, CodeBadRequest}, // unknown member
		{`{"op":"subscribe","channel":"depth"}`, Request{}, CodeInvalidMarket},
		{`{"op":"subscribe","channel":"depth","market":"BTC-USDT","outcome":"MAYBE"}`, Request{}, CodeInvalidOutcome},
		{`{"op":"subscribe","channel":"depth","market":"BTC-USDT","outcome":"YES"}`, Request{}, CodeInvalidMarket},
		{`{"op":"subscribe","channel":"depth","market":"BTC-USDT","token":"t"}`, Request{}, CodeBadRequest},
		{`{"op":"subscribe","channel":"orders","market":"BTC-USDT"}`, Request{}, CodeBadRequest},
		{`{"op":"subscribe","channel":"depth","market":"BTC-USDT","since":1}`, Request{}, CodeBadRequest},
		{`{"op":"subscribe","channel":"funding","since":1}`, Request{}, CodeBadRequest},
		{`{"op":"subscribe","channel":"orders","since":-1}`, Request{}, CodeBadRequest},
		{`{"op":"subscribe","channel":"orders","since":1.5}`, Request{}, CodeBadRequest},
		{`{"op":"subscribe","channel":"nope"}`, Request{}, CodeUnknownChannel},
		{`{"op":"dance"}`, Request{}, CodeUnknownOp},
		{`{"channel":"depth"}`, Request{}, CodeUnknownOp},
		{`{"op":"ping","channel":"depth"}`, Request{}, CodeBadRequest},
		{`{"op":"ping"} {"op":"ping"}`, Request{}, CodeBadRequest},
		{`[1]`, Request{}, CodeBadRequest},
		{`{"op":"ping","id":"7"}`, Request{}, CodeBadRequest},
	} {
		got, err := DecodeRequest([]byte(c.in))
		switch {
		case c.code == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.code != "" && (err == nil || err.Code != c.code):
			t.Errorf("%s: %v, want %s", c.in, err, c.code)
		case c.code == "" && got != c.want:
			t.Errorf("%s: %+v, want %+v", c.in, got, c.want)
		}
	}
}

// FuzzDecodeRequest: the decoder never panics, and what it accepts is
// consistent (a known op and channel; public channels have a market and
// no token; private ones no market; since only where it replays).
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{`{"op":"ping","id":1}`, `{"op":"subscribe","channel":"depth","market":"BTC-USDT"}`,
		`{"op":"subscribe","channel":"depth","market":"7","outcome":"YES"}`, `{"op":"subscribe","channel":"orders","since":9,"token":"a"}`,
		`{"op":"unsubscribe","channel":"funding"}`, `{}`, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRequest(b)
		if err != nil {
			if err.Code == "" || err.Message == "" {
				t.Fatalf("an error without code or message: %+v", err)
			}
			return
		}
		switch r.Op {
		case OpPing:
			if r.Channel != 0 || r.Market != "" || r.HasSince {
				t.Fatalf("ping with fields: %+v", r)
			}
			return
		case OpSubscribe, OpUnsubscribe:
		default:
			t.Fatalf("op %d", r.Op)
		}
		if r.Channel < ChDepth || r.Channel >= numChannels {
			t.Fatalf("channel %d", r.Channel)
		}
		if r.Channel.Private() == (r.Market != "") || (!r.Channel.Private() && r.Token != "") {
			t.Fatalf("market/token on the wrong channel: %+v", r)
		}
		if r.HasSince && (r.Op != OpSubscribe || !r.Channel.journaled()) {
			t.Fatalf("since where it does not belong: %+v", r)
		}
		if (r.Outcome != 0) != (r.Binary != 0) || len(r.Market) > maxMarketLen {
			t.Fatalf("market %+v", r)
		}
	})
}

// TestDiffLevels: applying the diff of two books to the first gives the second.
func TestDiffLevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 36))
	book := func(desc bool) []core.PriceLevel {
		var lv []core.PriceLevel
		for p := 1; p <= 30; p++ {
			if rng.IntN(2) == 0 {
				lv = append(lv, core.PriceLevel{Price: core.Price(p), Qty: core.Units(1 + rng.IntN(3))})
			}
		}
		if desc {
			slices.Reverse(lv)
		}
		return lv
	}
	for i := 0; i < 2000; i++ {
		desc := i%2 == 0
		old, nw := book(desc), book(desc)
		m := map[core.Price]core.Units{}
		for _, l := range old {
			m[l.Price] = l.Qty
		}
		d := diffLevels(nil, old, nw, desc)
		for _, l := range d {
			if l.Qty == 0 {
				delete(m, l.Price)
			} else {
				m[l.Price] = l.Qty
			}
		}
		if len(m) != len(nw) {
			t.Fatalf("diff %v of %v -> %v gives %v", d, old, nw, m)
		}
		for _, l := range nw {
			if m[l.Price] != l.Qty {
				t.Fatalf("diff %v of %v -> %v gives %v", d, old, nw, m)
			}
		}
		for j := 1; j < len(d); j++ {
			if (d[j].Price < d[j-1].Price) != desc {
				t.Fatalf("diff out of order: %v", d)
			}
		}
	}
}
