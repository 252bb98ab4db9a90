package gateway

// This file proves that no endpoint outside spec 003's own paths takes a
// JSON number as money: every money field of every request schema is a
// jsonMoney field, and a number there (0.1, 100, 1e1, -5) is 400
// INVALID_FIELD_TYPE before anything is asked of the core or a service
// (issue 41 item 4: "amount": 0.1 on a withdrawal debited FUNDING). The
// schemas are read from the package's source, so a new endpoint whose money
// field is not jsonMoney, or has no row in the table below, fails here.

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/persist/chaintx"
)

// schemaField is one member of a request schema as written in the source.
type schemaField struct {
	schema, name, kind string // kind: the jsonKind's identifier, without jsonNullable
	pos                string
}

// sourceSchemas returns every field of every []jsonField literal in the
// package's non-test files, named by the variable that holds it (a literal
// outside a var declaration is named by its position).
func sourceSchemas(t *testing.T) []schemaField {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []schemaField
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		named := map[*ast.CompositeLit]string{}
		ast.Inspect(file, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, v := range vs.Values {
					if cl, ok := v.(*ast.CompositeLit); ok && i < len(vs.Names) {
						named[cl] = vs.Names[i].Name
					}
				}
			}
			cl, ok := n.(*ast.CompositeLit)
			if !ok || !isJSONFieldSlice(cl.Type) {
				return true
			}
			name := named[cl]
			if name == "" {
				name = fset.Position(cl.Pos()).String()
			}
			for _, e := range cl.Elts {
				el, ok := e.(*ast.CompositeLit)
				if !ok || len(el.Elts) != 2 {
					t.Fatalf("%s: schema %s: a field that is not {name, kind}", fset.Position(e.Pos()), name)
				}
				lit, ok := el.Elts[0].(*ast.BasicLit)
				if !ok {
					t.Fatalf("%s: schema %s: field name is not a literal", fset.Position(e.Pos()), name)
				}
				fname, _ := strconv.Unquote(lit.Value)
				out = append(out, schemaField{name, fname, kindIdent(t, el.Elts[1]), fset.Position(e.Pos()).String()})
			}
			return true
		})
	}
	if len(out) == 0 {
		t.Fatal("no schema found: the test reads the wrong directory")
	}
	return out
}

func isJSONFieldSlice(e ast.Expr) bool {
	at, ok := e.(*ast.ArrayType)
	if !ok || at.Len != nil {
		return false
	}
	id, ok := at.Elt.(*ast.Ident)
	return ok && id.Name == "jsonField"
}

// kindIdent is the kind of a field: jsonX or jsonX | jsonNullable.
func kindIdent(t *testing.T, e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.BinaryExpr:
		if r, ok := x.Y.(*ast.Ident); ok && x.Op == token.OR && r.Name == "jsonNullable" {
			return kindIdent(t, x.X)
		}
	}
	t.Fatalf("a field kind that is not jsonX or jsonX | jsonNullable: %T", e)
	return ""
}

// moneyWords mark a field name as money unless notMoney says otherwise.
var moneyWords = []string{"amount", "price", "quantity", "value", "payout", "balance", "fee", "wei", "notional", "cost"}

// notMoney lists the fields that carry a money word or are numbers, and are
// not a decimal amount; each says why. A new number field must be added here
// on purpose, so that a money field cannot be declared a jsonNumber by slip.
var notMoney = map[string]string{
	"adjustSchema.user_id":             "a user id",
	"adjustSchema.balance":             "which balance: available | frozen",
	"depositSchema.user_id":            "a user id",
	"transferSchema.user_id":           "a user id",
	"coreFaultSchema.user_id":          "a user id",
	"binaryCreateSchema.market_id":     "a market id",
	"limitSchema.daily_count":          "withdrawals per day",
	"binaryCreateSchema.lot":           "whole shares",
	"binaryCreateSchema.min_quantity":  "whole shares",
	"binaryCreateSchema.max_quantity":  "whole shares",
	"binaryCreateSchema.maker_fee_ppm": "a rate in parts per million",
	"binaryCreateSchema.taker_fee_ppm": "a rate in parts per million",
	"binaryCreateSchema.close_time_ms": "a unix time",
	"binaryActionSchema.limit":         "a count of orders",
	"txSchema.gas_limit":               "gas units",
	"faultSchema.count":                "a count of faults",
	"p2pUserSchema.id":                 "a user id",
	"p2pUserSchema.initialBalance":     "spec 003's own path: a JSON number (jsonP2PAmount)",
	"p2pTransferSchema.amount":         "spec 003's own path: a JSON number (jsonP2PAmount)",
}

// TestMoneySchemasDeclareMoney reads every request schema: a field whose
// name is money is jsonMoney (or listed in notMoney with its reason), only
// spec 003's two amounts take numbers (jsonP2PAmount), and every number
// field is one notMoney lists.
func TestMoneySchemasDeclareMoney(t *testing.T) {
	for _, f := range sourceSchemas(t) {
		key := f.schema + "." + f.name
		_, exempt := notMoney[key]
		moneyName := false
		for _, w := range moneyWords {
			moneyName = moneyName || strings.Contains(strings.ToLower(f.name), w)
		}
		switch {
		case f.kind == "jsonP2PAmount" && key != "p2pUserSchema.initialBalance" && key != "p2pTransferSchema.amount":
			t.Errorf("%s: %s takes numbers as money; only spec 003's own amounts may (use jsonMoney)", f.pos, key)
		case f.kind == "jsonNumber" && !exempt:
			t.Errorf("%s: %s is a JSON number: money must be jsonMoney; a number that is not money goes in notMoney with its reason", f.pos, key)
		case moneyName && f.kind != "jsonMoney" && !exempt:
			t.Errorf("%s: %s looks like money but is %s: use jsonMoney (or list it in notMoney with its reason)", f.pos, key, f.kind)
		}
	}
}

// moneyCase sends one money field as a JSON number to its endpoint.
type moneyCase struct {
	schema, field string // as in the source
	method, path  string
	admin         bool
	body          string // %s is the field's value
}

var moneyCases = []moneyCase{
	{"orderSchema", "price", "POST", "/api/v1/order", false, `{"market":"BTC-USDT","side":"BUY","type":"LIMIT","price":%s,"quantity":"0.1"}`},
	{"orderSchema", "quantity", "POST", "/api/v1/order", false, `{"market":"BTC-USDT","side":"BUY","type":"LIMIT","price":"50000","quantity":%s}`},
	{"orderSchema", "quote_quantity", "POST", "/api/v1/order", false, `{"market":"BTC-USDT","side":"BUY","type":"MARKET","quote_quantity":%s}`},
	{"orderSchema", "price", "POST", "/api/v1/order", false, `{"market":"7","outcome":"YES","side":"BUY","price":%s,"quantity":"1"}`},
	{"orderSchema", "quantity", "POST", "/api/v1/order", false, `{"market":"7","outcome":"YES","side":"BUY","price":"0.5","quantity":%s}`},
	{"modifySchema", "price", "PATCH", "/api/v1/order/1", false, `{"price":%s}`},
	{"modifySchema", "quantity", "PATCH", "/api/v1/order/1", false, `{"quantity":%s}`},
	{"adjustSchema", "amount", "POST", "/admin/v1/adjust", true, `{"user_id":7,"asset":"USDT","amount":%s,"ref":"m-1"}`},
	{"transferSchema", "amount", "POST", "/api/v1/internal_transfer", false, `{"from":"FUNDING","to":"SPOT","asset":"USDT","amount":%s}`},
	{"depositSchema", "amount", "POST", "/admin/v1/deposit", true, `{"user_id":7,"asset":"USDT","amount":%s,"tx_ref":"m-1"}`},
	{"withdrawalSchema", "amount", "POST", "/api/v1/withdrawals", false, `{"asset":"ETH","amount":%s,"address":"0x00000000000000000000000000000000000000aa"}`},
	{"txSchema", "value", "POST", "/admin/v1/tx", true, `{"to":"0x00000000000000000000000000000000000000aa","value":%s}`},
	{"limitSchema", "daily_amount", "POST", "/admin/v1/users/7/withdrawal-limits", true, `{"asset":"ETH","daily_amount":%s,"daily_count":1}`},
	{"binaryCreateSchema", "payout", "POST", "/admin/v1/binary-markets", true, `{"market_id":9,"quote":"USDT","question":"Q?","payout":%s}`},
	{"coreFaultSchema", "amount", "POST", "/admin/v1/faults/core", true, `{"fault":"stray_frozen","user_id":7,"asset":"DOGE","amount":%s}`},
}

// moneyTx is a TxManager with one submitter; the test's requests never get
// past the body, and a valid one stops at the address.
type moneyTx struct{ TxManager }

func (moneyTx) Submitters() []chaintx.Address { return []chaintx.Address{"0x01"} }

// TestMoneyFieldsRefuseNumbers sends every money field of every endpoint
// as a JSON number: 400 INVALID_FIELD_TYPE naming the field, the core's
// state unchanged and no service asked. The same body with the value as a
// string is not a type error (the row's body is otherwise well-typed).
func TestMoneyFieldsRefuseNumbers(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range moneyCases {
		covered[c.schema+"."+c.field] = true
	}
	declared := map[string]bool{}
	for _, f := range sourceSchemas(t) {
		if f.kind == "jsonMoney" {
			declared[f.schema+"."+f.name] = true
			if !covered[f.schema+"."+f.name] {
				t.Errorf("%s: money field %s.%s has no row in moneyCases", f.pos, f.schema, f.name)
			}
		}
	}
	for k := range covered {
		if !declared[k] {
			t.Errorf("moneyCases row %s is not a jsonMoney field of the source", k)
		}
	}
	ft, fw := newFakeTransfers(), &fakeWithdrawals{}
	h := newHarness(t, func(c *ServerConfig) {
		c.Transfers, c.CoreFaults = ft, true
		c.Chain = &ChainConfig{Withdrawals: fw, Tx: moneyTx{},
			ParseAddress: func(string) (chaintx.Address, error) { return "", errors.New("not in this test") },
			Checksum:     func(a chaintx.Address) string { return string(a) }}
	})
	h.ok("POST", "/admin/v1/binary-markets", h.admin, `{"market_id":7,"quote":"USDT","question":"Q?"}`)
	h.ok("POST", "/admin/v1/binary-markets/7/activate", h.admin, "")
	user := h.token(7)
	for _, c := range moneyCases {
		tok := user
		if c.admin {
			tok = h.admin
		}
		for _, n := range []string{"0.1", "100", "1e1", "-5", "0"} {
			before, asked := h.be.stateHash(), len(ft.creates)+len(fw.calls)
			body := fmt.Sprintf(c.body, n)
			st, out := h.do(c.method, c.path, tok, body)
			if st != 400 || out["code"] != CodeInvalidFieldType || out["message"] != "field "+c.field+" must be a decimal string" {
				t.Errorf("%s %s %s: %d %v, want 400 INVALID_FIELD_TYPE naming %s", c.method, c.path, body, st, out, c.field)
			}
			if h.be.stateHash() != before || len(ft.creates)+len(fw.calls) != asked {
				t.Errorf("%s %s %s: refused, yet it reached the core or a service", c.method, c.path, body)
			}
		}
		body := fmt.Sprintf(c.body, `"1"`)
		if _, out := h.do(c.method, c.path, tok, body); out["code"] == CodeInvalidFieldType {
			t.Errorf("%s %s %s: the row is a type error even with a string: %v", c.method, c.path, body, out)
		}
	}
}
