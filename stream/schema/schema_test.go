package schema

import "testing"

// TestMessages: the documented examples of every kind pass; a message with
// a field the document does not describe, a missing one, or a wrong kind
// of value fails.
func TestMessages(t *testing.T) {
	good := []string{
		`{"type":"subscribed","id":1,"channel":"depth","market":"BTC-USDT"}`,
		`{"type":"unsubscribed","channel":"trades","market":"77","outcome":"NO"}`,
		`{"type":"pong","id":5,"seq":81410}`,
		`{"type":"error","id":2,"code":"INVALID_MARKET","message":"no such market"}`,
		`{"type":"closed","channel":"orders","code":"TOKEN_EXPIRED","message":"the token has expired"}`,
		`{"channel":"depth","market":"BTC-USDT","type":"snapshot","seq":81200,"bids":[["49990.00","0.5000"]],"asks":[]}`,
		`{"channel":"depth","market":"77","outcome":"YES","type":"diff","first_seq":3,"last_seq":9,"prev_seq":2,"bids":[["0.40","0"]],"asks":[]}`,
		`{"channel":"trades","market":"BTC-USDT","last_seq":81260,"trades":[{"seq":81231,"trade_id":9001,"price":"50010.00","quantity":"0.1000","taker_side":"BUY","time":1796000000123}]}`,
		`{"channel":"ticker","market":"BTC-USDT","seq":81260,"best_bid":["49995.00","0.2500"],"best_ask":null,"last_price":null,"last_quantity":null}`,
		`{"channel":"orders","seq":81231,"time":1796000000123,"events":[{"event":"TRADE","trade_id":9001,"order_id":5512,"market":"BTC-USDT","role":"TAKER","price":"50010.00","quantity":"0.1000","fee":"10.00"},{"event":"ORDER_FILLED","order_id":5512,"market":"BTC-USDT","side":"BUY","status":"FILLED","price":"50020.00","quantity":"0.1000"}]}`,
		`{"channel":"balances","type":"snapshot","seq":81200,"balances":[{"asset":"USDT","available":"1000.00","frozen":"0"}]}`,
		`{"channel":"balances","seq":81231,"time":1796000000123,"events":[{"asset":"USDT","d_available":"-5011.00","d_frozen":"0"}]}`,
		`{"channel":"positions","type":"snapshot","seq":5,"positions":[{"market":"77","yes":3,"no":0}]}`,
		`{"channel":"positions","seq":6,"time":1,"events":[{"event":"POSITION","market":"77","yes":3,"no":1,"yes_cost":"1.20","no_cost":"0.60"}]}`,
		`{"channel":"transfers","seq":81300,"time":1796000000456,"events":[{"transfer_id":17,"from_user":1,"to_user":2,"asset":"USD","amount":"1.50","status":"PENDING"}]}`,
		`{"channel":"funding","type":"snapshot","balances":[{"asset":"USDT","available":"1000.000000"}]}`,
		`{"channel":"funding","type":"transfer","transfer":{"transfer_id":12,"req_id":"01J","from":"FUNDING","to":"SPOT","asset":"USDT","amount":"5","state":"COMMITTED","time":1},"balances":[]}`,
	}
	for _, m := range good {
		if err := Check([]byte(m)); err != nil {
			t.Errorf("%v", err)
		}
	}
	bad := []string{
		`{"type":"pong","id":5,"seq":81410,"uptime":1}`,                                                                     // an undocumented field
		`{"channel":"depth","market":"BTC-USDT","type":"snapshot","seq":1,"bids":[]}`,                                       // asks missing
		`{"channel":"ticker","market":"X","seq":1,"best_bid":[1,2],"best_ask":null,"last_price":null,"last_quantity":null}`, // numbers for decimals
		`{"channel":"orders","seq":1,"time":1,"events":[{"event":"TRADE","order_id":1,"market":"X","quantity":"1"}]}`,       // a trade without its fields
		`{"channel":"news","seq":1}`, // no such channel
		`{"type":"subscribed","channel":"depth","outcome":"MAYBE"}`,
	}
	for _, m := range bad {
		if err := Check([]byte(m)); err == nil {
			t.Errorf("accepted %s", m)
		}
	}
	if err := CheckClient([]byte(`{"op":"subscribe","id":3,"channel":"orders","token":"x","since":81234}`)); err != nil {
		t.Error(err)
	}
	if err := CheckClient([]byte(`{"op":"publish"}`)); err == nil {
		t.Error("an unknown op was accepted")
	}
}
