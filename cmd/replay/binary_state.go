package main

import (
	"fmt"
	"io"

	"github.com/ubscore/ubscore/core"
)

// The binary-market parts of `replay state` (issue 22): a binary market's
// question, reserve, pnl pool, shares and settlement progress, and a user's
// positions.
// Shares are whole shares (raw integers); money is in the quote asset.

type binaryState struct {
	Question  string `json:"question"` // "" for a market configured before questions
	Payout    string `json:"payout"`
	Outcome   string `json:"outcome,omitempty"`
	Settling  bool   `json:"settling"`
	Reserve   string `json:"reserve"`
	PnlPool   string `json:"pnl_pool"`
	YesShares int64  `json:"yes_shares"`
	NoShares  int64  `json:"no_shares"`
	Positions int    `json:"positions"`
	Settled   int    `json:"settled"` // positions paid so far while settling
	YesBid    string `json:"yes_bid,omitempty"`
	YesAsk    string `json:"yes_ask,omitempty"`
	NoBid     string `json:"no_bid,omitempty"`
	NoAsk     string `json:"no_ask,omitempty"`
}

type positionView struct {
	Market     string `json:"market"`
	YesVolume  int64  `json:"yes_volume"`
	NoVolume   int64  `json:"no_volume"`
	YesPending int64  `json:"yes_pending_sell"`
	NoPending  int64  `json:"no_pending_sell"`
	YesCostSum string `json:"yes_cost_sum"`
	NoCostSum  string `json:"no_cost_sum"`
}

func binaryView(p *core.Processor, id core.MarketID, nm *names, raw bool) *binaryState {
	v, ok := p.Binary(id)
	if !ok {
		return nil
	}
	q := v.Cfg.Quote
	px := func(x core.Price) string {
		if x == 0 {
			return ""
		}
		return nm.units(core.Units(x), q, raw)
	}
	st := &binaryState{Question: v.Question, Payout: nm.units(v.Payout, q, raw), Settling: v.Settling, Reserve: nm.units(v.Reserve, q, raw),
		PnlPool: nm.units(v.PnlPool, q, raw), YesShares: int64(v.YesShares), NoShares: int64(v.NoShares),
		Positions: v.Positions, Settled: v.Settled, YesBid: px(v.YesBid), YesAsk: px(v.YesAsk), NoBid: px(v.NoBid),
		NoAsk: px(v.NoAsk)}
	if v.Outcome != 0 {
		st.Outcome = v.Outcome.String()
	}
	return st
}

func binaryOrderView(ov core.OrderView, m core.MarketView, nm *names, raw bool) orderView {
	q := m.Cfg.Quote
	bookType := "NATIVE"
	ownBuy := ov.Side == core.Buy
	if ov.Outcome == core.OutcomeNo {
		bookType, ownBuy = "SYNTHETIC", !ownBuy
	}
	frozen := fmt.Sprint(int64(ov.Frozen)) // shares
	if ownBuy {
		frozen = nm.units(ov.Frozen, q, raw)
	}
	return orderView{ID: ov.ID, Market: nm.market(ov.Market), Side: ov.Side.String(), TIF: ov.TIF.String(),
		Price: nm.units(core.Units(ov.Price), q, raw), Qty: fmt.Sprint(int64(ov.Qty)), Filled: fmt.Sprint(int64(ov.Filled)),
		Frozen: frozen, Seq: ov.Seq, Outcome: ov.Outcome.String(), BookType: bookType}
}

func positionsView(p *core.Processor, u core.UserID, nm *names, raw bool) []positionView {
	var out []positionView
	for _, ps := range p.Positions(u, nil) {
		mv, _ := p.Market(ps.Market)
		q := mv.Cfg.Quote
		out = append(out, positionView{Market: nm.market(ps.Market), YesVolume: int64(ps.YesVolume),
			NoVolume: int64(ps.NoVolume), YesPending: int64(ps.YesPending), NoPending: int64(ps.NoPending),
			YesCostSum: nm.units(ps.YesCostSum, q, raw), NoCostSum: nm.units(ps.NoCostSum, q, raw)})
	}
	return out
}

func printBinary(w io.Writer, b *binaryState) {
	if b == nil {
		return
	}
	out := b.Outcome
	if out == "" {
		out = "-"
	}
	fmt.Fprintf(w, "binary: payout %s, outcome %s, settling %v (%d of %d positions paid)\n", b.Payout, out, b.Settling,
		b.Settled, b.Positions)
	if b.Question != "" {
		fmt.Fprintf(w, "  question %q\n", b.Question) // quoted: it may hold any printable text
	} else {
		fmt.Fprintf(w, "  question none (configured before questions)\n")
	}
	fmt.Fprintf(w, "  reserve %s, pnl pool %s, YES shares %d, NO shares %d\n", b.Reserve, b.PnlPool, b.YesShares, b.NoShares)
	fmt.Fprintf(w, "  YES bid %s ask %s | NO bid %s ask %s (the book below is the YES book)\n", b.YesBid, b.YesAsk,
		b.NoBid, b.NoAsk)
}

func printPositions(w io.Writer, ps []positionView) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintf(w, "positions: %d\n", len(ps))
	for _, p := range ps {
		fmt.Fprintf(w, "  %s YES %d (pending sell %d, cost %s) NO %d (pending sell %d, cost %s)\n", p.Market,
			p.YesVolume, p.YesPending, p.YesCostSum, p.NoVolume, p.NoPending, p.NoCostSum)
	}
}
