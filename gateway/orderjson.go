package gateway

import "github.com/ubscore/ubscore/core"

// The order object of the API, written by hand (see jsonout.go):
//
//	{"order_id":1,"client_order_id":"c-1"|null,"market":"BTC-USDT",["outcome":"NO",]"side":"BUY",
//	 "type":"LIMIT","time_in_force":"GTC","price":"50000.000000"|null,
//	 "quantity":"0.10000000"|null,["quote_quantity":"100.000000",]
//	 "filled_quantity":"0.00000000","status":"NEW",["reason":"SELF_TRADE_PREVENTED",]
//	 "time":1767323045000|null,"fills":[{"trade_id","price","quantity","fee","fee_asset","maker_order_id",
//	           "taker_order_id","time"}],["fills_truncated":true,]["duplicate":true]}

// liveRecord is the record of a resting order as the core holds it.
// Resting orders are always LIMIT (a MARKET order never rests).
func liveRecord(o *core.OrderView) OrderRecord {
	st := core.StatusNew
	if o.Filled > 0 {
		st = core.StatusPartiallyFilled
	}
	return OrderRecord{ID: o.ID, User: o.User, Market: o.Market, Side: o.Side, Type: core.Limit, TIF: o.TIF,
		Status: st, Price: o.Price, Qty: o.Qty, Filled: o.Filled, ClientID: o.ClientID}
}

// appendOrder writes an order object. Decimals are strings at the market's
// scales; a price or quantity that does not apply (MARKET price, the base
// quantity of a quote-budget order) or is unknown (Partial) is null.
// fills_truncated appears when the listed fills do not add up to
// filled_quantity or History dropped some.
func appendOrder(b []byte, r *OrderRecord, m *Market, withFills, duplicate bool) []byte {
	bs, qs := m.Base.Scale, m.Quote.Scale
	b = append(b, `{"order_id":`...)
	b = appendUint(b, uint64(r.ID))
	b = append(b, `,"client_order_id":`...)
	b = appendClientID(b, &r.ClientID)
	b = append(b, `,"market":`...)
	b = appendStr(b, m.Symbol)
	if r.Outcome != 0 { // a binary market's order: side and price are its outcome's (as placed)
		b = append(b, `,"outcome":`...)
		b = appendStr(b, r.Outcome.String())
	}
	b = append(b, `,"side":`...)
	b = appendNameOrNull(b, r.Side.String())
	b = append(b, `,"type":`...)
	b = appendNameOrNull(b, r.Type.String())
	b = append(b, `,"time_in_force":`...)
	b = appendNameOrNull(b, r.TIF.String())
	b = append(b, `,"price":`...)
	b = appendUnitsOrNull(b, int64(r.Price), qs)
	b = append(b, `,"quantity":`...)
	b = appendUnitsOrNull(b, int64(r.Qty), bs)
	if r.QuoteQty > 0 {
		b = append(b, `,"quote_quantity":`...)
		b = appendUnitsStr(b, int64(r.QuoteQty), qs)
	}
	b = append(b, `,"filled_quantity":`...)
	b = appendUnitsStr(b, int64(r.Filled), bs)
	b = append(b, `,"status":`...)
	b = appendNameOrNull(b, statusName(r.Status))
	if r.Status == core.StatusCancelled && r.Reason != core.OK {
		b = append(b, `,"reason":`...)
		b = appendStr(b, r.Reason.String())
	}
	b = append(b, `,"time":`...) // placement, unix ms
	if r.Time > 0 {
		b = appendUint(b, uint64(r.Time/1_000_000))
	} else {
		b = append(b, "null"...)
	}
	if withFills {
		b = append(b, `,"fills":[`...)
		var sum core.Units
		for i := range r.Fills {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendFill(b, &r.Fills[i], m)
			sum += r.Fills[i].Qty
		}
		b = append(b, ']')
		if r.FillsTruncated || sum != r.Filled {
			b = append(b, `,"fills_truncated":true`...)
		}
	}
	if duplicate {
		b = append(b, `,"duplicate":true`...)
	}
	return append(b, '}')
}

func appendFill(b []byte, f *Fill, m *Market) []byte {
	b = append(b, `{"trade_id":`...)
	b = appendUint(b, f.TradeID)
	b = append(b, `,"price":`...)
	b = appendUnitsStr(b, int64(f.Price), m.Quote.Scale)
	b = append(b, `,"quantity":`...)
	b = appendUnitsStr(b, int64(f.Qty), m.Base.Scale)
	b = append(b, `,"fee":`...)
	b = appendUnitsStr(b, int64(f.Fee), m.Quote.Scale)
	b = append(b, `,"fee_asset":`...)
	b = appendStr(b, m.Quote.Symbol)
	b = append(b, `,"maker_order_id":`...)
	b = appendUint(b, uint64(f.Maker))
	b = append(b, `,"taker_order_id":`...)
	b = appendUint(b, uint64(f.Taker))
	b = append(b, `,"time":`...)
	b = appendUint(b, uint64(f.Time/1_000_000))
	return append(b, '}')
}
