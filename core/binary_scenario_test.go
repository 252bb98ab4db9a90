package core

// The binary-market commands and directives of the scenario scripts
// (scenario_test.go runs them):
//
//	binary <id> quote= lot= min= max= maker= taker= [payout=] [close=]
//	activate market= | suspend market= | void market= | archive market=
//	resolve market= YES|NO | settle market= n=
//	bplace user= market= BUY|SELL YES|NO GTC|IOC|FOK|POST_ONLY price= qty= [cid=] [stp=] [outcome=<n>]
//
// Directives:
//
//	bstate market=        the market's totals, and the money check: every quote balance +
//	                      reserves + pnl pools against what was deposited
//	positions market=     every position, by user
//	bdepth market= YES|NO the outcome's view of the book, best first
//	bfault market= kind=shares|reserve|cost|oversold [user=] amount=   InjectFault, past every check
//	restart               snapshot, restore into a new processor (same bytes required), go on with it

import (
	"fmt"
	"sort"
	"strconv"
)

func (r *scnRunner) execBinary(a *scnArgs, name string) (c Command, out []string, directive bool) {
	t := a.t
	switch name {
	case "binary":
		if len(a.words) < 1 {
			t.Fatalf("%s: binary <id>", a.where)
		}
		id, _ := strconv.Atoi(a.words[0])
		c = Command{Kind: KindConfigBinary, Market: MarketID(id), Amount: Units(a.int("payout")),
			Price: Price(a.int("close")), Cfg: MarketCfg{Quote: AssetID(a.need("quote")), Lot: Units(a.need("lot")),
				MinQty: Units(a.need("min")), MaxQty: Units(a.need("max")), MakerFee: Rate(a.need("maker")),
				TakerFee: Rate(a.need("taker"))}}
		a.done(1)
	case "activate", "suspend", "void", "archive":
		c = Command{Kind: map[string]Kind{"activate": KindActivate, "suspend": KindSuspendMarket, "void": KindVoid,
			"archive": KindArchive}[name],
			Market: MarketID(a.need("market"))}
		a.done(0)
	case "resolve":
		c = Command{Kind: KindResolve, Market: MarketID(a.need("market")), Flags: scnOutcome(a)}
		a.done(0)
	case "settle":
		c = Command{Kind: KindSettle, Market: MarketID(a.need("market")), Qty: Units(a.need("n"))}
		a.done(0)
	case "bplace":
		out := scnOutcome(a)
		if a.has("outcome") {
			out = uint8(a.int("outcome"))
		}
		c = scnPlace(a)
		c.Flags = out
	case "bstate":
		id := MarketID(a.need("market"))
		a.done(0)
		return c, scnBinaryState(r.p, id), true
	case "positions":
		id := MarketID(a.need("market"))
		a.done(0)
		return c, scnPositions(r.p, id), true
	case "bdepth":
		id := MarketID(a.need("market"))
		o := Outcome(scnOutcome(a))
		a.done(0)
		return c, scnBinaryDepth(r.p, id, o), true
	case "bfault":
		c := Command{Kind: KindFault, Market: MarketID(a.need("market")), User: UserID(a.int("user")),
			Amount: Units(a.need("amount"))}
		switch k := a.str("kind"); k {
		case "shares":
			c.Flags = uint8(FaultBinaryShares)
		case "reserve":
			c.Flags = uint8(FaultBinaryReserve)
		case "cost":
			c.Flags = uint8(FaultBinaryCostSum)
		case "oversold":
			c.Flags = uint8(FaultBinaryOversold)
		default:
			t.Fatalf("%s: bad kind=%q", a.where, k)
		}
		a.done(0)
		return c, []string{"fault " + r.p.InjectFault(&c).String()}, true
	case "restart":
		a.done(0)
		snap := r.p.AppendSnapshot(nil)
		q, err := Restore(Config{}, snap)
		if err != nil {
			t.Fatalf("%s: restore: %v", a.where, err)
		}
		if h, h2 := r.p.StateHash(), q.StateHash(); h != h2 {
			t.Fatalf("%s: restored hash %s != %s", a.where, h2, h)
		}
		r.p = q
		return c, []string{fmt.Sprintf("restored seq=%d", q.LastSeq())}, true
	}
	return c, nil, false
}

// scnOutcome takes the YES / NO word out of a's words.
func scnOutcome(a *scnArgs) uint8 {
	var out uint8
	words := a.words[:0]
	for _, w := range a.words {
		switch w {
		case "YES":
			out = uint8(OutcomeYes)
		case "NO":
			out = uint8(OutcomeNo)
		default:
			words = append(words, w)
		}
	}
	a.words = words
	return out
}

func scnBinaryState(p *Processor, id MarketID) []string {
	v, ok := p.Binary(id)
	if !ok {
		return []string{fmt.Sprintf("market=%d not binary", id)}
	}
	// conservation to the unit: balances + pools == deposited - withdrawn
	var sum Units
	for i := range p.accounts {
		b := p.balance(int32(i), v.Cfg.Quote)
		sum += b.Avail + b.Frozen
	}
	for _, m := range p.markets {
		if m != nil && m.bin != nil && m.cfg.Quote == v.Cfg.Quote {
			sum += m.bin.reserve + m.bin.pnlPool
		}
	}
	st := &p.assets[v.Cfg.Quote]
	return []string{
		fmt.Sprintf("market=%d %s outcome=%s settling=%v payout=%d tick=%d", id, v.Status, v.Outcome, v.Settling, v.Payout, v.Cfg.Tick),
		fmt.Sprintf("yes_shares=%d no_shares=%d reserve=%d pnl_pool=%d cost_sum=%d positions=%d settled=%d orders=%d",
			v.YesShares, v.NoShares, v.Reserve, v.PnlPool, p.markets[id].bin.costSum, v.Positions, v.Settled, v.Orders),
		fmt.Sprintf("yes bid=%d ask=%d no bid=%d ask=%d", v.YesBid, v.YesAsk, v.NoBid, v.NoAsk),
		fmt.Sprintf("quote conserved=%v held=%d in=%d", sum == st.credited-st.debited && sum == st.total, sum, st.credited-st.debited),
	}
}

func scnPositions(p *Processor, id MarketID) []string {
	m := p.marketOf(id)
	if m == nil || m.bin == nil {
		return []string{"none"}
	}
	var users []UserID
	for i := range m.bin.pos {
		users = append(users, m.bin.pos[i].user)
	}
	sort.Slice(users, func(i, j int) bool { return users[i] < users[j] })
	var out []string
	for _, u := range users {
		v, _ := p.Position(u, id)
		out = append(out, fmt.Sprintf("user=%d yes=%d/%d no=%d/%d yes_cost=%d no_cost=%d", u, v.YesVolume, v.YesPending,
			v.NoVolume, v.NoPending, v.YesCostSum, v.NoCostSum))
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

func scnBinaryDepth(p *Processor, id MarketID, o Outcome) []string {
	bids, asks, ok := p.BinaryDepth(id, o, 100, nil, nil)
	if !ok {
		return []string{"not binary"}
	}
	out := []string{fmt.Sprintf("market=%d %s", id, o)}
	for i := len(asks) - 1; i >= 0; i-- {
		out = append(out, fmt.Sprintf("ASK price=%d qty=%d orders=%d", asks[i].Price, asks[i].Qty, asks[i].Orders))
	}
	for _, l := range bids {
		out = append(out, fmt.Sprintf("BID price=%d qty=%d orders=%d", l.Price, l.Qty, l.Orders))
	}
	return out
}

// scnRenderPosition prints an EvPosition with its fields' names: volume/pending per outcome, then the cost sums.
func scnRenderPosition(e *Event) string {
	return fmt.Sprintf("POSITION market=%d user=%d yes=%d/%d no=%d/%d yes_cost=%d no_cost=%d", e.Market, e.User,
		e.Qty, e.Fee, e.Amount, e.Fee2, e.DAvail, e.DFrozen)
}
