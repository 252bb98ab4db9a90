package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/ubscore/ubscore/core"
)

// MaxDepth bounds --depth (a side holds at most core.MaxPriceLevels levels).
const MaxDepth = core.MaxPriceLevels

type balanceView struct {
	Asset  core.AssetID `json:"asset"`
	Avail  core.Units   `json:"avail"`
	Frozen core.Units   `json:"frozen"`
}

type orderView struct {
	ID     core.OrderID  `json:"id"`
	Market core.MarketID `json:"market"`
	Side   string        `json:"side"`
	TIF    string        `json:"tif"`
	Price  core.Price    `json:"price"`
	Qty    core.Units    `json:"qty"`
	Filled core.Units    `json:"filled"`
	Frozen core.Units    `json:"frozen"`
	Seq    core.Seq      `json:"seq"`
}

type userState struct {
	Seq        core.Seq      `json:"seq"`
	User       core.UserID   `json:"user"`
	Exists     bool          `json:"exists"`
	Status     string        `json:"status,omitempty"`
	Balances   []balanceView `json:"balances"`
	OpenOrders []orderView   `json:"open_orders"`
}

type levelView struct {
	Price  core.Price `json:"price"`
	Qty    core.Units `json:"qty"`
	Orders int32      `json:"orders"`
}

type marketState struct {
	Seq    core.Seq      `json:"seq"`
	Market core.MarketID `json:"market"`
	Status string        `json:"status"`
	Orders int32         `json:"orders"` // resting orders, both sides
	Bids   []levelView   `json:"bids"`   // best (highest) first
	Asks   []levelView   `json:"asks"`   // best (lowest) first
}

func runState(o *opts, e env) error {
	if (o.user == 0) == (o.market == 0) {
		return usageError{"give exactly one of --user U (U >= 1) and --market M"}
	}
	if o.depth < 1 || o.depth > MaxDepth {
		return usageError{fmt.Sprintf("--depth %d outside 1..%d", o.depth, MaxDepth)}
	}
	r, err := replayData(o, e, false, nil)
	if err != nil {
		return err
	}
	defer r.rec.WAL.Close()
	p := r.rec.Proc
	var v any
	if o.user != 0 {
		v = userView(p, core.UserID(o.user))
	} else {
		mv, ok := marketView(p, core.MarketID(o.market), o.depth)
		if !ok {
			return fmt.Errorf("market %d is not configured at seq %d", o.market, p.LastSeq())
		}
		v = mv
	}
	if o.asJSON {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
		return nil
	}
	switch v := v.(type) {
	case userState:
		printUser(e.stdout, v)
	case marketState:
		printMarket(e.stdout, v)
	}
	return nil
}

func userView(p *core.Processor, u core.UserID) userState {
	st := userState{Seq: p.LastSeq(), User: u, Balances: []balanceView{}, OpenOrders: []orderView{}}
	status, ok := p.AccountStatusOf(u)
	if !ok {
		return st
	}
	st.Exists, st.Status = true, status.String()
	for _, b := range p.Balances(u, nil) {
		st.Balances = append(st.Balances, balanceView{Asset: b.Asset, Avail: b.Avail, Frozen: b.Frozen})
	}
	for _, m := range p.Markets() {
		for _, ov := range p.OpenOrders(m.ID, u, nil) {
			st.OpenOrders = append(st.OpenOrders, orderView{ID: ov.ID, Market: ov.Market, Side: ov.Side.String(),
				TIF: ov.TIF.String(), Price: ov.Price, Qty: ov.Qty, Filled: ov.Filled, Frozen: ov.Frozen, Seq: ov.Seq})
		}
	}
	return st
}

func marketView(p *core.Processor, id core.MarketID, depth int) (marketState, bool) {
	mv, ok := p.Market(id)
	if !ok {
		return marketState{}, false
	}
	bids, asks, _ := p.Depth(id, depth, nil, nil)
	conv := func(ls []core.PriceLevel) []levelView {
		out := make([]levelView, 0, len(ls))
		for _, l := range ls {
			out = append(out, levelView{Price: l.Price, Qty: l.Qty, Orders: l.Orders})
		}
		return out
	}
	return marketState{Seq: p.LastSeq(), Market: id, Status: mv.Status.String(), Orders: mv.Orders,
		Bids: conv(bids), Asks: conv(asks)}, true
}

func printUser(w io.Writer, st userState) {
	if !st.Exists {
		fmt.Fprintf(w, "user %d has no account at seq %d\n", st.User, st.Seq)
		return
	}
	fmt.Fprintf(w, "user %d at seq %d: %s\n%-8s %22s %22s\n", st.User, st.Seq, st.Status, "asset", "avail", "frozen")
	for _, b := range st.Balances {
		fmt.Fprintf(w, "%-8d %22d %22d\n", b.Asset, b.Avail, b.Frozen)
	}
	fmt.Fprintf(w, "open orders: %d\n", len(st.OpenOrders))
	for _, o := range st.OpenOrders {
		fmt.Fprintf(w, "  #%d market %d %s %s price %d qty %d filled %d frozen %d (seq %d)\n",
			o.ID, o.Market, o.Side, o.TIF, o.Price, o.Qty, o.Filled, o.Frozen, o.Seq)
	}
}

func printMarket(w io.Writer, st marketState) {
	fmt.Fprintf(w, "market %d at seq %d: %s, %d resting orders\n", st.Market, st.Seq, st.Status, st.Orders)
	fmt.Fprintf(w, "%22s %22s %7s | %-22s %-22s %-7s\n", "bid qty", "bid price", "orders", "ask price", "ask qty", "orders")
	for i := 0; i < max(len(st.Bids), len(st.Asks)); i++ {
		var l, r string
		if i < len(st.Bids) {
			b := st.Bids[i]
			l = fmt.Sprintf("%22d %22d %7d", b.Qty, b.Price, b.Orders)
		} else {
			l = fmt.Sprintf("%22s %22s %7s", "", "", "")
		}
		if i < len(st.Asks) {
			a := st.Asks[i]
			r = fmt.Sprintf("%-22d %-22d %-7d", a.Price, a.Qty, a.Orders)
		}
		fmt.Fprintf(w, "%s | %s\n", l, r)
	}
}
