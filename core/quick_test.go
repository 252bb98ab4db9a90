package core

import "testing"

// This file proves the basic trade path: two crossing limit orders fill at
// the maker's price with exact balances and fees, and the state survives a
// snapshot round trip with the same hash.

type seqr struct {
	p   *Processor
	seq Seq
}

func (s *seqr) do(t *testing.T, c Command) []Event {
	t.Helper()
	s.seq++
	c.Seq, c.Time = s.seq, int64(s.seq)*1000
	return s.p.Apply(&c)
}

func result(ev []Event) Event { return ev[len(ev)-1] }

func setupBTCUSDT(t *testing.T) *seqr {
	s := &seqr{p: New(Config{})}
	s.do(t, Command{Kind: KindConfigAsset, Asset: 1, BaseScale: 8})
	s.do(t, Command{Kind: KindConfigAsset, Asset: 2, BaseScale: 6})
	r := result(s.do(t, Command{Kind: KindConfigMarket, Market: 1, Cfg: MarketCfg{Base: 1, Quote: 2, BaseScale: 8,
		Tick: 10_000, Lot: 10_000, MinQty: 10_000, MaxQty: 100_000_000_000, MakerFee: 1000, TakerFee: 2000}}))
	if r.Code != OK {
		t.Fatalf("config market: %v", r.Code)
	}
	return s
}

func TestQuickCrossingOrders(t *testing.T) {
	s := setupBTCUSDT(t)
	k1, _ := KeyFrom("dep-1")
	k2, _ := KeyFrom("dep-2")
	s.do(t, Command{Kind: KindSpotDeposit, User: 7, Asset: 1, Amount: 100_000_000, Key: k1})         // 1 BTC
	s.do(t, Command{Kind: KindSpotDeposit, User: 8, Asset: 2, Amount: 100_000 * 1_000_000, Key: k2}) // 100k USDT
	// seller rests 0.5 BTC at 50,000 USDT
	r := result(s.do(t, Command{Kind: KindPlaceOrder, User: 7, Market: 1, Side: Sell, Type: Limit, TIF: GTC,
		Price: 50_000 * 1_000_000, Qty: 50_000_000}))
	if r.Code != OK || r.Status != StatusNew {
		t.Fatalf("sell: %v %v", r.Code, r.Status)
	}
	// buyer takes 0.2 BTC with limit 51,000 -> fills at 50,000
	ev := s.do(t, Command{Kind: KindPlaceOrder, User: 8, Market: 1, Side: Buy, Type: Limit, TIF: GTC,
		Price: 51_000 * 1_000_000, Qty: 20_000_000})
	r = result(ev)
	if r.Code != OK || r.Status != StatusFilled || r.Qty != 20_000_000 {
		t.Fatalf("buy: %v %v %d", r.Code, r.Status, r.Qty)
	}
	p := s.p
	n := Units(10_000 * 1_000_000) // 0.2 * 50,000 USDT
	takerFee, makerFee := n*2/1000, n*1/1000
	buyer := p.balance(p.accountIdx(8), 2)
	if buyer.Avail != 100_000*1_000_000-n-takerFee || buyer.Frozen != 0 {
		t.Fatalf("buyer quote %+v", buyer)
	}
	if b := p.balance(p.accountIdx(8), 1); b.Avail != 20_000_000 {
		t.Fatalf("buyer base %+v", b)
	}
	seller := p.balance(p.accountIdx(7), 2)
	if seller.Avail != n-makerFee {
		t.Fatalf("seller quote %+v", seller)
	}
	if b := p.balance(p.accountIdx(7), 1); b.Avail != 50_000_000 || b.Frozen != 30_000_000 {
		t.Fatalf("seller base %+v", b)
	}
	if fee := p.balance(p.accountIdx(FeeUser), 2); fee.Avail != takerFee+makerFee {
		t.Fatalf("fee %+v", fee)
	}
	if v := p.CheckInvariants(); len(v) != 0 {
		t.Fatalf("invariants: %+v", v)
	}
	snap := p.AppendSnapshot(nil)
	q, err := Restore(Config{}, snap)
	if err != nil {
		t.Fatal(err)
	}
	if q.StateHash() != p.StateHash() {
		t.Fatal("hash differs after restore")
	}
}

// TestEnumNames pins the API names of the small enums (HTTP, SQL and replay
// outputs depend on them) and the rule for values outside each enum.
func TestEnumNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Buy.String(), "BUY"}, {Sell.String(), "SELL"}, {Side(0).String(), ""}, {Side(9).String(), "UNKNOWN"},
		{Limit.String(), "LIMIT"}, {Market.String(), "MARKET"},
		{GTC.String(), "GTC"}, {IOC.String(), "IOC"}, {FOK.String(), "FOK"}, {PostOnly.String(), "POST_ONLY"},
		{STPCancelResting.String(), "CANCEL_RESTING"}, {STPExpireTaker.String(), "EXPIRE_TAKER"},
		{Active.String(), "ACTIVE"}, {Frozen.String(), "FROZEN"}, {Disabled.String(), "DISABLED"}, {AccountStatus(3).String(), "UNKNOWN"},
		{MarketActive.String(), "ACTIVE"}, {MarketHalted.String(), "HALTED"},
		{StatusPartiallyFilled.String(), "PARTIALLY_FILLED"}, {OrderStatus(0).String(), ""},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
