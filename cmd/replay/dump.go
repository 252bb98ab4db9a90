package main

import (
	"bufio"

	"github.com/ubscore/ubscore/core"
)

// dumpBuffer is the stdout buffer size of dump.
const dumpBuffer = 1 << 20

// runDump writes one JSON line per replayed command from --from on:
//
//	{"seq":7,"time":...,"kind":"PLACE_ORDER",<command fields>,"result":"OK",
//	 "events":[{"kind":"ORDER_ACCEPTED",...},...,{"kind":"RESULT","code":"OK",...}]}
func runDump(o *opts, e env) error {
	w := bufio.NewWriterSize(e.stdout, dumpBuffer)
	var (
		line     jsonObj
		writeErr error
	)
	on := func(c *core.Command, evs []core.Event) {
		if writeErr != nil || uint64(c.Seq) < o.from {
			return
		}
		line.b = appendCommandLine(line.b[:0], &line, c, evs)
		line.b = append(line.b, '\n')
		_, writeErr = w.Write(line.b)
	}
	r, err := replayData(o, e, true, on)
	if err != nil {
		return err
	}
	r.rec.WAL.Close()
	if writeErr != nil {
		return writeErr
	}
	return w.Flush()
}

func appendCommandLine(b []byte, j *jsonObj, c *core.Command, evs []core.Event) []byte {
	j.b = b
	j.open()
	j.uintAlways("seq", uint64(c.Seq))
	j.int("time", c.Time)
	j.str("kind", c.Kind.String())
	appendCommandFields(j, c)
	j.str("result", evs[len(evs)-1].Code.String())
	j.key("events")
	j.b = append(j.b, '[')
	for i := range evs {
		if i > 0 {
			j.b = append(j.b, ',')
		}
		appendEvent(j, &evs[i])
	}
	j.b = append(j.b, ']')
	j.close()
	return j.b
}

func appendCommandFields(j *jsonObj, c *core.Command) {
	j.uint("user", uint64(c.User))
	j.uint("market", uint64(c.Market))
	j.uint("asset", uint64(c.Asset))
	j.uint("order_id", uint64(c.OrderID))
	if c.Side != 0 {
		j.str("side", c.Side.String())
	}
	if c.Type != 0 {
		j.str("type", c.Type.String())
	}
	if c.TIF != 0 {
		j.str("tif", c.TIF.String())
	}
	if c.STP != 0 {
		j.str("stp", c.STP.String())
	}
	if c.Kind == core.KindSetAccountStatus || c.Status != 0 {
		j.str("status", c.Status.String())
	}
	j.uint("flags", uint64(c.Flags))
	if c.Kind == core.KindConfigAsset || c.BaseScale != 0 {
		j.uintAlways("base_scale", uint64(c.BaseScale))
	}
	j.int("price", int64(c.Price))
	j.int("qty", int64(c.Qty))
	j.int("quote_qty", int64(c.QuoteQty))
	j.int("amount", int64(c.Amount))
	if !c.Key.IsZero() {
		j.str("key", c.Key.String())
	}
	if c.Text != "" { // a binary market's question, a p2p handle, an operator's note
		j.str("text", c.Text)
	}
	if c.Kind == core.KindConfigMarket || c.Cfg != (core.MarketCfg{}) {
		cf := &c.Cfg
		j.key("cfg")
		j.open()
		j.uintAlways("base", uint64(cf.Base))
		j.uintAlways("quote", uint64(cf.Quote))
		j.uintAlways("base_scale", uint64(cf.BaseScale))
		j.intAlways("tick", int64(cf.Tick))
		j.intAlways("lot", int64(cf.Lot))
		j.intAlways("min_qty", int64(cf.MinQty))
		j.intAlways("max_qty", int64(cf.MaxQty))
		j.intAlways("maker_fee", int64(cf.MakerFee))
		j.intAlways("taker_fee", int64(cf.TakerFee))
		j.close()
		j.first = false
	}
}

func appendEvent(j *jsonObj, ev *core.Event) {
	j.open()
	j.str("kind", ev.Kind.String())
	if ev.CmdKind != 0 {
		j.str("cmd_kind", ev.CmdKind.String())
	}
	if ev.Kind == core.EvResult || ev.Code != core.OK {
		j.str("code", ev.Code.String())
	}
	if ev.Side != 0 {
		j.str("side", ev.Side.String())
	}
	if ev.Status != 0 {
		j.str("status", ev.Status.String())
	}
	j.uint("flags", uint64(ev.Flags))
	j.uint("detail", uint64(ev.Detail))
	if ev.Kind == core.EvAccountStatus {
		j.str("account_status", ev.AcctSt.String())
	}
	j.uint("market", uint64(ev.Market))
	j.uint("asset", uint64(ev.Asset))
	if ev.Kind == core.EvBalance { // user 0 is the fee account
		j.uintAlways("user", uint64(ev.User))
	} else {
		j.uint("user", uint64(ev.User))
	}
	j.uint("other_user", uint64(ev.OtherUser))
	j.uint("order_id", uint64(ev.OrderID))
	j.uint("other_order_id", uint64(ev.OtherOrderID))
	j.uint("trade_id", ev.TradeID)
	j.int("price", int64(ev.Price))
	j.int("qty", int64(ev.Qty))
	j.int("amount", int64(ev.Amount))
	j.int("fee", int64(ev.Fee))
	j.int("fee2", int64(ev.Fee2))
	j.int("d_avail", int64(ev.DAvail))
	j.int("d_frozen", int64(ev.DFrozen))
	j.int("payout", int64(ev.Payout)) // binary order events and trades
	j.int("frozen", int64(ev.Frozen))
	if !ev.Key.IsZero() {
		j.str("key", ev.Key.String())
	}
	j.close()
}
