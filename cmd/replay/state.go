package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/ubscore/ubscore/core"
)

// MaxDepth bounds --depth (a side holds at most core.MaxPriceLevels levels).
const MaxDepth = core.MaxPriceLevels

// Amounts in the views are strings: decimals at the asset's scale, or raw
// units with --raw (or when the data dir names no scale).

type balanceView struct {
	Asset  string `json:"asset"`
	Avail  string `json:"available"`
	Frozen string `json:"frozen"`
}

type orderView struct {
	ID     core.OrderID `json:"id"`
	Market string       `json:"market"`
	Side   string       `json:"side"`
	TIF    string       `json:"tif"`
	Price  string       `json:"price"`    // quote asset
	Qty    string       `json:"quantity"` // base asset
	Filled string       `json:"filled"`   // base asset
	Frozen string       `json:"frozen"`   // quote asset for a BUY, base for a SELL
	Seq    core.Seq     `json:"seq"`
	// Binary markets: the order's outcome; side and price above are the
	// YES book's (book_direction, book_price), frozen is quote for a BUY in
	// the outcome's own terms, shares for a SELL.
	Outcome  string `json:"outcome,omitempty"`
	BookType string `json:"book_type,omitempty"` // NATIVE (YES) or SYNTHETIC (NO)
}

type userState struct {
	Seq        core.Seq       `json:"seq"`
	User       core.UserID    `json:"user"`
	FeeAccount bool           `json:"fee_account,omitempty"` // user 0: the exchange's fees
	Exists     bool           `json:"exists"`
	Status     string         `json:"status,omitempty"`
	Balances   []balanceView  `json:"balances"`
	OpenOrders []orderView    `json:"open_orders"`
	Positions  []positionView `json:"positions,omitempty"` // binary markets (binary_state.go)
	P2P        *p2pUserView   `json:"p2p,omitempty"`       // user-to-user transfers (p2p_state.go)
}

type levelView struct {
	Price  string `json:"price"`
	Qty    string `json:"quantity"`
	Orders int32  `json:"orders"`
}

type marketState struct {
	Seq    core.Seq      `json:"seq"`
	Market string        `json:"market"`
	ID     core.MarketID `json:"id"`
	Status string        `json:"status"`
	Orders int32         `json:"orders"`           // resting orders, both sides
	Bids   []levelView   `json:"bids"`             // best (highest) first
	Asks   []levelView   `json:"asks"`             // best (lowest) first
	Binary *binaryState  `json:"binary,omitempty"` // a binary market's own state (the book above is its YES book)
}

func runState(o *opts, e env) error {
	if (o.user < 0) == (o.market == "") {
		return usageError{"give exactly one of --user U (0 = the fee account) and --market M"}
	}
	if o.depth < 1 || o.depth > MaxDepth {
		return usageError{fmt.Sprintf("--depth %d outside 1..%d", o.depth, MaxDepth)}
	}
	nm, err := loadNames(o.data, o.config)
	if err != nil {
		return err
	}
	if nm.source == "" && !o.raw {
		fmt.Fprintf(e.stderr, "replay state: no %s/instruments.json (the exchange writes it at start) and no --config: names are ids, amounts raw units\n", o.data)
	}
	var asset core.AssetID
	if o.asset != "" {
		var ok bool
		if asset, ok = nm.findAsset(o.asset); !ok {
			return usageError{fmt.Sprintf("--asset %q: no such asset (a symbol or an id)", o.asset)}
		}
	}
	var market core.MarketID
	if o.market != "" {
		var ok bool
		if market, ok = nm.findMarket(o.market); !ok {
			return usageError{fmt.Sprintf("--market %q: no such market (a symbol or an id)", o.market)}
		}
	}
	r, err := replayData(o, e, false, nil)
	if err != nil {
		return err
	}
	defer r.rec.WAL.Close()
	p := r.rec.Proc
	var v any
	if o.user >= 0 {
		v = userView(p, core.UserID(o.user), asset, nm, o.raw)
	} else {
		mv, ok := marketView(p, market, o.depth, nm, o.raw)
		if !ok {
			return fmt.Errorf("market %s is not configured at seq %d", o.market, p.LastSeq())
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

// userView is u's balances (of asset only, if not 0) and open orders.
func userView(p *core.Processor, u core.UserID, asset core.AssetID, nm *names, raw bool) userState {
	st := userState{Seq: p.LastSeq(), User: u, FeeAccount: u == 0, Balances: []balanceView{}, OpenOrders: []orderView{}}
	status, ok := p.AccountStatusOf(u)
	if !ok && u != 0 {
		return st
	}
	st.Exists = true
	if ok {
		st.Status = status.String()
	}
	for _, b := range p.Balances(u, nil) {
		if asset == 0 || b.Asset == asset {
			st.Balances = append(st.Balances, balanceView{Asset: nm.asset(b.Asset), Avail: nm.units(b.Avail, b.Asset, raw),
				Frozen: nm.units(b.Frozen, b.Asset, raw)})
		}
	}
	if u == 0 {
		return st // the fee account has no orders (listing user 0 would list everyone's)
	}
	for _, m := range p.Markets() {
		for _, ov := range p.OpenOrders(m.ID, u, nil) {
			frozenIn := m.Cfg.Base
			if ov.Side == core.Buy {
				frozenIn = m.Cfg.Quote
			}
			if ov.Outcome != 0 {
				st.OpenOrders = append(st.OpenOrders, binaryOrderView(ov, m, nm, raw))
				continue
			}
			st.OpenOrders = append(st.OpenOrders, orderView{ID: ov.ID, Market: nm.market(ov.Market), Side: ov.Side.String(),
				TIF: ov.TIF.String(), Price: nm.units(core.Units(ov.Price), m.Cfg.Quote, raw),
				Qty: nm.units(ov.Qty, m.Cfg.Base, raw), Filled: nm.units(ov.Filled, m.Cfg.Base, raw),
				Frozen: nm.units(ov.Frozen, frozenIn, raw), Seq: ov.Seq})
		}
	}
	st.Positions = positionsView(p, u, nm, raw)
	st.P2P = p2pView(p, u, nm, raw)
	return st
}

func marketView(p *core.Processor, id core.MarketID, depth int, nm *names, raw bool) (marketState, bool) {
	mv, ok := p.Market(id)
	if !ok {
		return marketState{}, false
	}
	bids, asks, _ := p.Depth(id, depth, nil, nil)
	conv := func(ls []core.PriceLevel) []levelView {
		out := make([]levelView, 0, len(ls))
		for _, l := range ls {
			out = append(out, levelView{Price: nm.units(core.Units(l.Price), mv.Cfg.Quote, raw),
				Qty: nm.units(l.Qty, mv.Cfg.Base, raw), Orders: l.Orders})
		}
		return out
	}
	return marketState{Seq: p.LastSeq(), Market: nm.market(id), ID: id, Status: mv.Status.String(), Orders: mv.Orders,
		Bids: conv(bids), Asks: conv(asks), Binary: binaryView(p, id, nm, raw)}, true
}

func printUser(w io.Writer, st userState) {
	who := fmt.Sprintf("user %d", st.User)
	if st.FeeAccount {
		who = "the fee account (user 0)"
	}
	if !st.Exists {
		fmt.Fprintf(w, "%s has no account at seq %d\n", who, st.Seq)
		return
	}
	fmt.Fprintf(w, "%s at seq %d: %s\n%-8s %26s %26s\n", who, st.Seq, st.Status, "asset", "available", "frozen")
	for _, b := range st.Balances {
		fmt.Fprintf(w, "%-8s %26s %26s\n", b.Asset, b.Avail, b.Frozen)
	}
	if st.FeeAccount {
		return
	}
	fmt.Fprintf(w, "open orders: %d\n", len(st.OpenOrders))
	for _, o := range st.OpenOrders {
		fmt.Fprintf(w, "  #%d %s %s %s price %s quantity %s filled %s frozen %s (seq %d)",
			o.ID, o.Market, o.Side, o.TIF, o.Price, o.Qty, o.Filled, o.Frozen, o.Seq)
		if o.Outcome != "" {
			fmt.Fprintf(w, " outcome %s %s", o.Outcome, o.BookType)
		}
		fmt.Fprintln(w)
	}
	printPositions(w, st.Positions)
	printP2P(w, st.P2P)
}

func printMarket(w io.Writer, st marketState) {
	fmt.Fprintf(w, "market %s at seq %d: %s, %d resting orders\n", st.Market, st.Seq, st.Status, st.Orders)
	printBinary(w, st.Binary)
	fmt.Fprintf(w, "%22s %22s %7s | %-22s %-22s %-7s\n", "bid quantity", "bid price", "orders", "ask price", "ask quantity", "orders")
	for i := 0; i < max(len(st.Bids), len(st.Asks)); i++ {
		var l, r string
		if i < len(st.Bids) {
			b := st.Bids[i]
			l = fmt.Sprintf("%22s %22s %7d", b.Qty, b.Price, b.Orders)
		} else {
			l = fmt.Sprintf("%22s %22s %7s", "", "", "")
		}
		if i < len(st.Asks) {
			a := st.Asks[i]
			r = fmt.Sprintf("%-22s %-22s %-7d", a.Price, a.Qty, a.Orders)
		}
		fmt.Fprintf(w, "%s | %s\n", l, r)
	}
}
