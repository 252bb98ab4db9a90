package gateway

// These tests prove the strict request decoder: it accepts only one
// well-formed JSON object whose members are known, unique and of the right
// type; whatever it accepts encoding/json accepts and decodes to the same
// strings; and, through FuzzOrderRequest, that every order the edge accepts
// passes the core's own shape checks, and round-trips through its canonical
// body.

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ubscore/ubscore/core"
)

func TestDecodeObject(t *testing.T) {
	schema := []jsonField{{"a", jsonString}, {"n", jsonNumber}}
	for _, c := range []struct {
		in   string
		code string // "" = accepted
		a, n string // decoded values when accepted
	}{
		{`{}`, "", "", ""},
		{` { "a" : "x" , "n" : 12 } `, "", "x", "12"},
		{"\t{\"a\":\"\"}\r\n", "", "", ""},
		{`{"a":"\u00e9\ud83d\ude00\"\\\/\b\f\n\r\t"}`, "", "é😀\"\\/\b\f\n\r\t", ""},
		{`{"a":"\ud800"}`, "", "\ufffd", ""},              // lone surrogate, as encoding/json
		{`{"a":"\ud800\u0041"}`, "", "\ufffdA", ""},       // high surrogate then a non-surrogate
		{`{"a":"\ud800\ud800\udc00"}`, "", "\ufffd𐀀", ""}, // a lone one then a pair
		{`{"n":-0.5e+10}`, "", "", "-0.5e+10"},
		{`{"a":"é"}`, "", "é", ""},
		{``, CodeInvalidJSON, "", ""},
		{`null`, CodeInvalidJSON, "", ""},
		{`{"a":"x"`, CodeInvalidJSON, "", ""},
		{`{"a":"x",}`, CodeInvalidJSON, "", ""},
		{`{,}`, CodeInvalidJSON, "", ""},
		{`{"a" "x"}`, CodeInvalidJSON, "", ""},
		{`{"a":"x"} x`, CodeInvalidJSON, "", ""},
		{`{"a":"x\u12"}`, CodeInvalidJSON, "", ""},
		{`{"a":"x\ud800\u12"}`, CodeInvalidJSON, "", ""},
		{`{"a":"x`, CodeInvalidJSON, "", ""},
		{"{\"a\":\"\x7f\"}", "", "\x7f", ""},
		{"{\"a\":\"\xc3\"}", CodeInvalidJSON, "", ""},
		{"{\"a\":\"\xed\xa0\x80\"}", CodeInvalidJSON, "", ""}, // a UTF-8-encoded surrogate
		{`{"n":01}`, CodeInvalidJSON, "", ""},                 // "0", then a digit where ',' or '}' must be
		{`{"n":1.}`, CodeInvalidJSON, "", ""},
		{`{"n":-}`, CodeInvalidJSON, "", ""},
		{`{"n":1e}`, CodeInvalidJSON, "", ""},
		{`{"n":+1}`, CodeInvalidJSON, "", ""},
		{`{"b":"x"}`, CodeUnknownField, "", ""},
		{`{"A":"x"}`, CodeUnknownField, "", ""},
		{`{"a":"x","a":"y"}`, CodeDuplicateField, "", ""},
		{`{"a":1}`, CodeInvalidFieldType, "", ""},
		{`{"n":"1"}`, CodeInvalidFieldType, "", ""},
		{`{"a":null}`, CodeInvalidFieldType, "", ""},
		{`{"a":[1]}`, CodeInvalidFieldType, "", ""},
		{`{"a":{}}`, CodeInvalidFieldType, "", ""},
		{`{"a":false}`, CodeInvalidFieldType, "", ""},
		{`{"a":x}`, CodeInvalidJSON, "", ""},
	} {
		vals := make([]jsonValue, 2)
		_, err := decodeObject([]byte(c.in), schema, vals, nil)
		got := ""
		if err != nil {
			got = err.Code
			if err.Status != 400 || err.Message == "" {
				t.Errorf("%q: %+v", c.in, err)
			}
		}
		if got != c.code {
			t.Errorf("%q: code %q, want %q (%v)", c.in, got, c.code, err)
			continue
		}
		if err == nil && (string(vals[0].b) != c.a || string(vals[1].b) != c.n) {
			t.Errorf("%q: decoded %q %q, want %q %q", c.in, vals[0].b, vals[1].b, c.a, c.n)
		}
		if err == nil && !json.Valid([]byte(c.in)) {
			t.Errorf("%q accepted but not valid JSON", c.in)
		}
	}
}

// Unescaped values written to scratch never move, however many there are.
func TestDecodeObjectScratchStable(t *testing.T) {
	schema := []jsonField{{"a", jsonString}, {"b", jsonString}, {"c", jsonString}}
	body := []byte(`{"a":"\u0041\u0042","b":"` + strings.Repeat(`\n`, 100) + `","c":"\"x\""}`)
	vals := make([]jsonValue, 3)
	if _, err := decodeObject(body, schema, vals, make([]byte, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if string(vals[0].b) != "AB" || string(vals[1].b) != strings.Repeat("\n", 100) || string(vals[2].b) != `"x"` {
		t.Fatalf("values %q %q %q", vals[0].b, vals[1].b, vals[2].b)
	}
}

func TestDecodeAndParseOrderZeroAllocs(t *testing.T) {
	reg := defaultRegistry(t)
	st := new(reqState)
	body := []byte(`{"market":"BTC-USDT","side":"BUY","type":"LIMIT","time_in_force":"GTC","price":"50000.5","quantity":"0.1234","client_order_id":"c-\u0031"}`)
	var m *Market
	r := &OrderRecord{ID: 1, Market: 1, Side: core.Buy, Type: core.Limit, TIF: core.GTC, Status: core.StatusFilled,
		Price: 1, Qty: 2, Filled: 2, Fills: []Fill{{TradeID: 1, Price: 1, Qty: 2, Fee: 3, Maker: 4, Taker: 1}}}
	st.out = make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		var err *APIError
		if _, m, err = parseOrder(body, reg, st); err != nil {
			t.Fatal(err)
		}
		st.out = appendOrder(st.out[:0], r, m, true, false)
	}); n != 0 {
		t.Fatalf("parse + encode allocates %v times", n)
	}
}

func TestParseOrderValues(t *testing.T) {
	reg := defaultRegistry(t)
	st := new(reqState)
	c, m, err := parseOrder([]byte(`{"market":"ETH-USDT","side":"SELL","type":"LIMIT","time_in_force":"POST_ONLY","price":"3000.01","quantity":"1.2345","client_order_id":"abc"}`), reg, st)
	if err != nil {
		t.Fatal(err)
	}
	want := core.Command{Kind: core.KindPlaceOrder, Market: 2, Side: core.Sell, Type: core.Limit, TIF: core.PostOnly,
		Price: 3000_010000, Qty: 1_2345_0000, Key: core.Key{'a', 'b', 'c'}}
	if c != want || m.Symbol != "ETH-USDT" {
		t.Fatalf("parsed %+v, want %+v", c, want)
	}
	c, _, err = parseOrder([]byte(`{"market":"BTC-USDT","side":"BUY","type":"MARKET","quote_quantity":"100.5"}`), reg, st)
	if err != nil || c.Type != core.Market || c.TIF != 0 || c.QuoteQty != 100_500000 || c.Qty != 0 {
		t.Fatalf("market by quote: %+v %v", c, err)
	}
}

// orderBodyOf is the canonical request body of an accepted order command.
func orderBodyOf(c core.Command, m *Market) string {
	kv := []any{"market", m.Symbol, "side", c.Side.String(), "type", c.Type.String()}
	if c.TIF != 0 {
		kv = append(kv, "time_in_force", c.TIF.String())
	} else {
		kv = append(kv, "time_in_force", nil)
	}
	kv = append(kv, "price", nil, "quantity", nil)
	if c.Price != 0 {
		kv = append(kv, "price", FormatUnits(int64(c.Price), m.Quote.Scale))
	}
	if c.Qty != 0 {
		kv = append(kv, "quantity", FormatUnits(int64(c.Qty), m.Base.Scale))
	}
	if c.QuoteQty != 0 {
		kv = append(kv, "quote_quantity", FormatUnits(int64(c.QuoteQty), m.Quote.Scale))
	}
	if !c.Key.IsZero() {
		b, _ := json.Marshal(c.Key.String())
		kv = append(kv, "client_order_id", "#"+string(b))
	}
	return orderBody(kv...)
}

// shapeCodes are the core's answers to an order the edge should have refused.
var shapeCodes = map[core.Code]bool{core.CodeInvalidMarket: true, core.CodeInvalidSide: true,
	core.CodeInvalidOrderType: true, core.CodeInvalidTimeInForce: true, core.CodeInvalidPrice: true,
	core.CodeInvalidQuantity: true, core.CodeQuantityTooSmall: true, core.CodeQuantityTooLarge: true,
	core.CodeInvalidKey: true, core.CodeInvalidCommand: true, core.CodeInvalidAmount: true}

func FuzzOrderRequest(f *testing.F) {
	for _, s := range []string{
		orderBody(),
		orderBody("side", "SELL", "time_in_force", "POST_ONLY", "client_order_id", "x-1"),
		orderBody("type", "MARKET", "time_in_force", nil, "price", nil, "quantity", nil, "quote_quantity", "100.123456"),
		orderBody("type", "MARKET", "time_in_force", "IOC", "price", nil, "quantity", "0.0001"),
		orderBody("market", "ETH-USDT", "price", "0.01", "quantity", "10000"),
		orderBody("price", "92233720368547.75807"), orderBody("quantity", "92233720368.54775807"),
		orderBody("quantity", "0"), orderBody("quantity", "-1"), orderBody("quantity", "1.000000001"),
		orderBody("price", "#50000"), orderBody("leverage", "1"), orderBody("client_order_id", `\u00e9`),
		`{"market":"BTC-USDT","market":"BTC-USDT"}`, `{"a":`, `{}`, `[]`, ``, `{"side":"\ud800"}`,
		"{\"market\":\"BTC-USDT\"\x00}", `{"price":"1"}   `,
		`{"market":"BTC-USDT","side":"BUY","type":"LIMIT","price":0.1,"quantity":"1"}`, `{"quantity":1e1}`, `{"quote_quantity":null}`,
	} {
		f.Add([]byte(s))
	}
	reg := defaultRegistry(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		st := new(reqState)
		c, m, err := parseOrder(body, reg, st)
		accepted := err == nil || (err.Code != CodeInvalidJSON && err.Code != CodeUnknownField &&
			err.Code != CodeDuplicateField && err.Code != CodeInvalidFieldType)
		if err != nil && (err.Status != 400 || err.Message == "") {
			t.Fatalf("rejection %+v", err)
		}
		if err != nil && strings.Contains(err.Message, string(body)) && len(body) > 3 {
			t.Fatalf("message echoes the input: %q", err.Message)
		}
		if accepted {
			checkLikeEncodingJSON(t, body, st)
		}
		if err != nil {
			return
		}
		checkAcceptedOrder(t, c, m, reg)
	})
}

// checkLikeEncodingJSON: what the decoder accepted is valid JSON with
// known members that encoding/json decodes to the same strings.
func checkLikeEncodingJSON(t *testing.T, body []byte, st *reqState) {
	t.Helper()
	if !json.Valid(body) || !utf8.Valid(body) {
		t.Fatalf("accepted invalid JSON %q", body)
	}
	var ref map[string]any
	if err := json.Unmarshal(body, &ref); err != nil {
		t.Fatalf("encoding/json: %v on %q", err, body)
	}
	for i, f := range orderSchema {
		v, ok := ref[f.name]
		if ok != st.vals[i].set {
			t.Fatalf("member %s: encoding/json %v, ours %v", f.name, ok, st.vals[i].set)
		}
		if ok && v != string(st.vals[i].b) {
			t.Fatalf("member %s: encoding/json %q, ours %q", f.name, v, st.vals[i].b)
		}
	}
	if len(ref) > len(orderSchema) {
		t.Fatalf("accepted unknown members: %v", ref)
	}
}

// checkAcceptedOrder: an order the edge accepts passes the core's shape
// checks, and its canonical body parses back to the same command.
func checkAcceptedOrder(t *testing.T, c core.Command, m *Market, reg *Registry) {
	t.Helper()
	cfg := &m.Cfg
	if c.Type == core.Limit && (c.Price <= 0 || c.Price%cfg.Tick != 0) {
		t.Fatalf("accepted price %d", c.Price)
	}
	if c.QuoteQty == 0 && (c.Qty < cfg.MinQty || c.Qty > cfg.MaxQty || c.Qty%cfg.Lot != 0) {
		t.Fatalf("accepted quantity %d", c.Qty)
	}
	p := core.New(core.Config{})
	seq := core.Seq(0)
	apply := func(c core.Command) core.Code {
		seq++
		c.Seq = seq
		evs := p.Apply(&c)
		return evs[len(evs)-1].Code
	}
	for _, cc := range reg.ConfigCommands() {
		apply(cc)
	}
	c.User = 5
	if code := apply(c); shapeCodes[code] {
		t.Fatalf("the edge accepted %+v, the core says %v", c, code)
	}
	back, m2, err := parseOrder([]byte(orderBodyOf(c, m)), reg, new(reqState))
	if err != nil || m2 != m {
		t.Fatalf("canonical body of %+v: %v", c, err)
	}
	back.User = c.User
	if back != c {
		t.Fatalf("round trip %+v -> %+v", c, back)
	}
}
