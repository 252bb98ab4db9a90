package stream

import (
	"strconv"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
)

// marketInfo is how a stream names a market and formats its numbers.
type marketInfo struct {
	name       string // spot symbol or binary market id
	priceScale uint8  // quote asset's scale
	qtyScale   uint8  // base asset's scale (0: shares of a binary market)
	binary     bool
}

// namer resolves markets and assets (the registry, and a processor for
// binary markets, which are created at run time).
type namer struct {
	reg *gateway.Registry
	p   *core.Processor
}

func (n namer) market(id core.MarketID) (marketInfo, bool) {
	if m, ok := n.reg.MarketByID(id); ok {
		return marketInfo{name: m.Symbol, priceScale: m.Quote.Scale, qtyScale: m.Base.Scale}, true
	}
	if n.p == nil {
		return marketInfo{}, false
	}
	v, ok := n.p.Market(id)
	if !ok {
		return marketInfo{}, false
	}
	a, ok := n.reg.AssetByID(v.Cfg.Quote)
	if !ok {
		return marketInfo{}, false
	}
	return marketInfo{name: strconv.Itoa(int(id)), priceScale: a.Scale, binary: true}, true
}

func (n namer) asset(id core.AssetID) (string, uint8) {
	if a, ok := n.reg.AssetByID(id); ok {
		return a.Symbol, a.Scale
	}
	return strconv.Itoa(int(id)), 0
}

// JSON builders: values are ASCII names, symbols and numbers (nothing to escape).

func appendKey(b []byte, k string) []byte {
	b = append(b, ',', '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

// appendStrKV appends ,"k":"v" with v escaped (k is always a constant).
func appendStrKV(b []byte, k, v string) []byte {
	return gateway.AppendJSONString(appendKey(b, k), v)
}

func appendUintKV(b []byte, k string, v uint64) []byte {
	return strconv.AppendUint(appendKey(b, k), v, 10)
}

func appendUnitsKV(b []byte, k string, v int64, scale uint8) []byte {
	b = appendKey(b, k)
	b = append(b, '"')
	b = gateway.AppendUnits(b, v, scale)
	return append(b, '"')
}

// appendHead opens a channel message: {"channel":..,"market":..[,"outcome":..]
func appendHead(b []byte, ch Channel, name string, out core.Outcome) []byte {
	b = append(b, `{"channel":"`...)
	b = append(b, ch.String()...)
	b = append(b, '"')
	if name != "" {
		b = appendStrKV(b, "market", name)
	}
	if out != 0 {
		b = appendStrKV(b, "outcome", out.String())
	}
	return b
}

func appendLevels(b []byte, lv []core.PriceLevel, mi *marketInfo) []byte {
	b = append(b, '[')
	for i := range lv {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[', '"')
		b = gateway.AppendUnits(b, int64(lv[i].Price), mi.priceScale)
		b = append(b, '"', ',', '"')
		b = gateway.AppendUnits(b, int64(lv[i].Qty), mi.qtyScale)
		b = append(b, '"', ']')
	}
	return append(b, ']')
}

// ownPrice is a binary order's (or trade's) price in its outcome's terms:
// the book keeps YES prices.
func ownPrice(p core.Price, payout core.Units, out core.Outcome) core.Price {
	if out == core.OutcomeNo {
		return core.Price(payout) - p
	}
	return p
}

// appendOrderEvent appends the orders channel's object for e, as seen by user.
func appendOrderEvent(b []byte, e *core.Event, user core.UserID, n namer) []byte {
	mi, _ := n.market(e.Market)
	b = append(b, `{"event":"`...)
	b = append(b, e.Kind.String()...)
	b = append(b, '"')
	out := core.Outcome(0)
	if mi.binary && e.Kind != core.EvTrade {
		out = core.Outcome(e.Detail)
	}
	if e.Kind == core.EvTrade {
		role, oid, fee := "MAKER", e.OrderID, e.Fee
		if e.OtherUser == user && e.User != user {
			role, oid, fee = "TAKER", e.OtherOrderID, e.Fee2
		}
		b = appendUintKV(b, "trade_id", e.TradeID)
		b = appendUintKV(b, "order_id", uint64(oid))
		b = appendStrKV(b, "market", mi.name)
		b = appendStrKV(b, "role", role)
		b = appendUnitsKV(b, "price", int64(e.Price), mi.priceScale)
		b = appendUnitsKV(b, "quantity", int64(e.Qty), mi.qtyScale)
		b = appendUnitsKV(b, "fee", int64(fee), mi.priceScale)
		return append(b, '}')
	}
	b = appendUintKV(b, "order_id", uint64(e.OrderID))
	b = appendStrKV(b, "market", mi.name)
	if out != 0 {
		b = appendStrKV(b, "outcome", out.String())
	}
	if e.Side != 0 {
		b = appendStrKV(b, "side", e.Side.String())
	}
	if e.Status != 0 {
		b = appendStrKV(b, "status", e.Status.String())
	}
	if e.Price != 0 {
		b = appendUnitsKV(b, "price", int64(ownPrice(e.Price, e.Payout, out)), mi.priceScale)
	}
	b = appendUnitsKV(b, "quantity", int64(e.Qty), mi.qtyScale)
	if e.Kind == core.EvOrderPartiallyFilled {
		b = appendUnitsKV(b, "remaining", int64(e.Amount), mi.qtyScale)
	}
	if e.Code != core.OK {
		b = appendStrKV(b, "reason", e.Code.String())
	}
	return append(b, '}')
}

// privateTargets lists who sees e on which private channel (at most two).
func privateTargets(e *core.Event) (n int, users [2]core.UserID, ch Channel) {
	switch e.Kind {
	case core.EvOrderAccepted, core.EvOrderFilled, core.EvOrderPartiallyFilled, core.EvOrderCancelled,
		core.EvOrderExpired, core.EvOrderModified, core.EvOrderRejected:
		return 1, [2]core.UserID{e.User}, ChOrders
	case core.EvTrade:
		if e.User == e.OtherUser {
			return 1, [2]core.UserID{e.User}, ChOrders
		}
		return 2, [2]core.UserID{e.User, e.OtherUser}, ChOrders
	case core.EvBalance:
		return 1, [2]core.UserID{e.User}, ChBalances
	case core.EvPosition, core.EvPositionSettled:
		return 1, [2]core.UserID{e.User}, ChPositions
	case core.EvP2PTransfer:
		if e.Flags != 0 { // a repeated requestId: nothing changed
			return 0, users, 0
		}
		if e.User == e.OtherUser {
			return 1, [2]core.UserID{e.User}, ChTransfers
		}
		return 2, [2]core.UserID{e.User, e.OtherUser}, ChTransfers
	}
	return 0, users, 0
}

// appendPrivateEvent appends the object of e on channel ch for user.
func appendPrivateEvent(b []byte, e *core.Event, ch Channel, user core.UserID, n namer) []byte {
	switch ch {
	case ChOrders:
		return appendOrderEvent(b, e, user, n)
	case ChBalances:
		sym, scale := n.asset(e.Asset)
		b = append(b, `{"asset":"`...)
		b = append(b, sym...)
		b = append(b, '"')
		b = appendUnitsKV(b, "d_available", int64(e.DAvail), scale)
		b = appendUnitsKV(b, "d_frozen", int64(e.DFrozen), scale)
		return append(b, '}')
	case ChPositions:
		mi, _ := n.market(e.Market)
		b = append(b, `{"event":"`...)
		b = append(b, e.Kind.String()...)
		b = append(b, '"')
		b = appendStrKV(b, "market", mi.name)
		if e.Kind == core.EvPosition {
			b = appendUintKV(b, "yes", uint64(e.Qty))
			b = appendUintKV(b, "no", uint64(e.Amount))
			b = appendUnitsKV(b, "yes_cost", int64(e.DAvail), mi.priceScale)
			b = appendUnitsKV(b, "no_cost", int64(e.DFrozen), mi.priceScale)
		} else {
			b = appendUintKV(b, "shares", uint64(e.Qty))
			b = appendUnitsKV(b, "paid", int64(e.Amount), mi.priceScale)
		}
		return append(b, '}')
	default: // ChTransfers
		sym, scale := n.asset(e.Asset)
		b = append(b, `{"transfer_id":`...)
		b = strconv.AppendUint(b, uint64(e.OrderID), 10)
		b = appendUintKV(b, "from_user", uint64(e.User))
		b = appendUintKV(b, "to_user", uint64(e.OtherUser))
		b = appendStrKV(b, "asset", sym)
		b = appendUnitsKV(b, "amount", int64(e.Amount), scale)
		b = appendStrKV(b, "status", core.P2PStatus(e.Detail).String())
		if e.Code != core.OK {
			b = appendStrKV(b, "reason", e.Code.String())
		}
		return append(b, '}')
	}
}

// privMsg is one private message: every event of one command for one
// user on one channel.
type privMsg struct {
	user core.UserID
	ch   Channel
	seq  core.Seq
	data []byte
}

// privBuilder builds the private messages of one command.
type privBuilder struct {
	msgs []privMsg
	bufs map[privKey][]byte
	keys []privKey // in order of first event
}

type privKey struct {
	user core.UserID
	ch   Channel
}

// build appends to b.msgs the messages of c's events for the (user,
// channel) pairs want accepts.
func (pb *privBuilder) build(c *core.Command, evs []core.Event, want func(core.UserID, Channel) bool, n namer) {
	if pb.bufs == nil {
		pb.bufs = map[privKey][]byte{}
	}
	pb.keys = pb.keys[:0]
	for i := range evs {
		e := &evs[i]
		k, users, ch := privateTargets(e)
		for j := 0; j < k; j++ {
			u := users[j]
			if u == 0 || !want(u, ch) {
				continue
			}
			key := privKey{u, ch}
			b, open := pb.bufs[key]
			if !open {
				b = appendHead(nil, ch, "", 0)
				b = appendUintKV(b, "seq", uint64(c.Seq))
				b = appendUintKV(b, "time", uint64(c.Time/1_000_000))
				b = append(b, `,"events":[`...)
				pb.keys = append(pb.keys, key)
			} else {
				b = append(b, ',')
			}
			pb.bufs[key] = appendPrivateEvent(b, e, ch, u, n)
		}
	}
	for _, k := range pb.keys {
		pb.msgs = append(pb.msgs, privMsg{user: k.user, ch: k.ch, seq: c.Seq, data: append(pb.bufs[k], "]}"...)})
		delete(pb.bufs, k)
	}
}
