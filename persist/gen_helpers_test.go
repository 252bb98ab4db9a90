package persist

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ubscore/ubscore/core"
)

// The test exchange: USDT (scale 6) and BTC (scale 8), market 1 = BTC-USDT
// with the built-in config's tick/lot (0.01 USDT x 0.0001 BTC) and fees
// 0.1% maker / 0.2% taker.
const (
	usdt     core.AssetID  = 1
	btc      core.AssetID  = 2
	btcUSDT  core.MarketID = 1
	oneUSDT                = 1_000_000   // USDT units
	oneBTC                 = 100_000_000 // BTC units
	testTime int64         = 1_700_000_000_000_000_000
)

var btcUSDTCfg = core.MarketCfg{Base: btc, Quote: usdt, BaseScale: 8, Tick: 10_000, Lot: 10_000,
	MinQty: 10_000, MaxQty: 1_000 * oneBTC, MakerFee: 1_000, TakerFee: 2_000}

// recorder applies commands to a real processor and keeps each command with
// a copy of its events as a Record (Apply reuses its slice).
type recorder struct {
	t    testing.TB
	p    *core.Processor
	recs []Record
}

func newRecorder(t testing.TB) *recorder { return newRecorderCfg(t, core.Config{}) }

func newRecorderCfg(t testing.TB, cfg core.Config) *recorder {
	r := &recorder{t: t, p: core.New(cfg)}
	r.ok(core.Command{Kind: core.KindConfigAsset, Asset: usdt, BaseScale: 6})
	r.ok(core.Command{Kind: core.KindConfigAsset, Asset: btc, BaseScale: 8})
	r.ok(core.Command{Kind: core.KindConfigMarket, Market: btcUSDT, Cfg: btcUSDTCfg})
	return r
}

// apply sequences c (seq, time) and returns its result event.
func (r *recorder) apply(c core.Command) core.Event {
	c.Seq = core.Seq(len(r.recs) + 1)
	c.Time = testTime + int64(c.Seq)*1_000_000 // 1 ms apart
	evs := slices.Clone(r.p.Apply(&c))
	r.recs = append(r.recs, Record{Cmd: c, Events: evs})
	return evs[len(evs)-1]
}

// ok applies c and requires it to succeed.
func (r *recorder) ok(c core.Command) core.Event {
	r.t.Helper()
	res := r.apply(c)
	if res.Code != core.OK {
		r.t.Fatalf("seq %d %s: %s", len(r.recs), c.Kind, res.Code)
	}
	return res
}

func key(s string) core.Key {
	k, ok := core.KeyFrom(s)
	if !ok {
		panic("bad key " + s)
	}
	return k
}

func limit(user core.UserID, side core.Side, tif core.TimeInForce, price core.Price, qty core.Units, cid string) core.Command {
	c := core.Command{Kind: core.KindPlaceOrder, User: user, Market: btcUSDT, Side: side, Type: core.Limit,
		TIF: tif, Price: price, Qty: qty}
	if cid != "" {
		c.Key = key(cid)
	}
	return c
}

// lastSeq is the seq of the last record.
func (r *recorder) lastSeq() core.Seq { return core.Seq(len(r.recs)) }

// randomStream appends n random commands: funding, limit orders of every
// time in force, market orders (by quantity and by quote budget), cancels
// (by id and client id), modifies, transfers with repeated req_ids, account
// freezes, halts and ticks. Users 1..users.
func (r *recorder) randomStream(seed uint64, n, users int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for u := 1; u <= users; u++ {
		r.ok(core.Command{Kind: core.KindAdjust, User: core.UserID(u), Asset: usdt, Amount: 1_000_000 * oneUSDT,
			Key: key(fmt.Sprintf("fund-usdt-%d", u))})
		r.ok(core.Command{Kind: core.KindSpotDeposit, User: core.UserID(u), Asset: btc, Amount: 100 * oneBTC,
			Key: key(fmt.Sprintf("fund-btc-%d", u))})
	}
	const mid = 50_000 * oneUSDT
	var orders []core.OrderID
	owner := map[core.OrderID]core.UserID{}
	var withdrawals []core.Command // successful ones, for refunds
	user := func() core.UserID { return core.UserID(1 + rng.IntN(users)) }
	ownerOf := func(id core.OrderID) core.UserID { // usually the owner, sometimes someone else
		if u, ok := owner[id]; ok && rng.IntN(10) != 0 {
			return u
		}
		return user()
	}
	pick := func() core.OrderID {
		if len(orders) == 0 || rng.IntN(20) == 0 {
			return core.OrderID(1 + rng.IntN(len(orders)+5)) // sometimes unknown
		}
		return orders[len(orders)-1-rng.IntN(min(len(orders), 60))] // mostly recent ones
	}
	cid := func() string { return fmt.Sprintf("c%d", rng.IntN(300)) } // collisions: duplicates
	for i := 0; i < n; i++ {
		var c core.Command
		switch x := rng.IntN(100); {
		case x < 45:
			side := core.Side(1 + rng.IntN(2))
			off := core.Price(rng.IntN(21) - 3) // mostly passive, sometimes crossing
			price := mid - off*oneUSDT
			if side == core.Sell {
				price = mid + off*oneUSDT
			}
			tif := []core.TimeInForce{core.GTC, core.GTC, core.GTC, core.GTC, core.GTC, core.IOC, core.FOK, core.PostOnly}[rng.IntN(8)]
			c = limit(user(), side, tif, price, core.Units(1+rng.IntN(200))*100_000, "")
			c.STP = core.STP(rng.IntN(2))
			if rng.IntN(5) == 0 {
				c.Key = key(cid())
			}
		case x < 53:
			c = core.Command{Kind: core.KindPlaceOrder, User: user(), Market: btcUSDT, Type: core.Market,
				Side: core.Side(1 + rng.IntN(2)), Qty: core.Units(1+rng.IntN(100)) * 100_000}
			if c.Side == core.Buy && rng.IntN(2) == 0 {
				c.Qty, c.QuoteQty = 0, core.Units(1+rng.IntN(5_000))*oneUSDT
			}
		case x < 73:
			id := pick()
			c = core.Command{Kind: core.KindCancelOrder, User: ownerOf(id), OrderID: id}
			if rng.IntN(8) == 0 {
				c.OrderID, c.Key = 0, key(cid())
			}
		case x < 85:
			id := pick()
			c = core.Command{Kind: core.KindModifyOrder, User: ownerOf(id), OrderID: id}
			if rng.IntN(2) == 0 {
				c.Price = mid + core.Price(rng.IntN(31)-15)*oneUSDT
			}
			if c.Price == 0 || rng.IntN(2) == 0 {
				c.Qty = core.Units(1+rng.IntN(300)) * 100_000
			}
		case x < 93:
			kinds := []core.Kind{core.KindSpotDeposit, core.KindSpotWithdraw, core.KindSpotRefund, core.KindAdjust}
			c = core.Command{Kind: kinds[rng.IntN(4)], User: user(), Asset: core.AssetID(1 + rng.IntN(2)),
				Amount: core.Units(1+rng.IntN(1_000)) * 10_000, Key: key(fmt.Sprintf("op%d", rng.IntN(200)))}
			if c.Kind == core.KindAdjust && rng.IntN(2) == 0 {
				c.Amount = -c.Amount
			}
			if c.Kind == core.KindSpotRefund && len(withdrawals) > 0 && rng.IntN(2) == 0 {
				c = withdrawals[rng.IntN(len(withdrawals))]
				c.Kind, c.Seq, c.Time = core.KindSpotRefund, 0, 0
			}
		case x < 94:
			st := core.Active
			if rng.IntN(4) == 0 {
				st = core.Frozen
			}
			c = core.Command{Kind: core.KindSetAccountStatus, User: user(), Status: st}
		case x < 95:
			c = core.Command{Kind: core.KindHaltMarket, Market: btcUSDT}
			if rng.IntN(2) == 0 {
				c.Kind = core.KindResumeMarket
			}
		default:
			c = core.Command{Kind: core.KindTick, Flags: core.TickFullCheck}
		}
		res := r.apply(c)
		switch {
		case c.Kind == core.KindPlaceOrder && res.Code == core.OK:
			orders = append(orders, res.OrderID)
			owner[res.OrderID] = c.User
		case c.Kind == core.KindSpotWithdraw && res.Code == core.OK:
			withdrawals = append(withdrawals, c)
		case c.Kind == core.KindSetAccountStatus && c.Status == core.Frozen && rng.IntN(3) != 0:
			r.apply(core.Command{Kind: core.KindSetAccountStatus, User: c.User, Status: core.Active}) // thaw soon
		}
		if c.Kind == core.KindHaltMarket && res.Code == core.OK && rng.IntN(4) != 0 {
			r.apply(core.Command{Kind: core.KindResumeMarket, Market: btcUSDT})
		}
	}
	r.apply(core.Command{Kind: core.KindResumeMarket, Market: btcUSDT}) // leave the market open
}

// counts of what the stream should produce.
type streamCounts struct {
	trades, ledger, audit, placed int
	tradeQty                      int64
}

func (r *recorder) counts() streamCounts {
	var s streamCounts
	for i := range r.recs {
		rec := &r.recs[i]
		for j := range rec.Events {
			e := &rec.Events[j]
			switch {
			case e.Kind == core.EvTrade:
				s.trades++
				s.tradeQty += int64(e.Qty)
			case e.Kind == core.EvBalance:
				s.ledger++
			case auditType(e) != "":
				s.audit++
			case e.Kind == core.EvResult && e.CmdKind == core.KindPlaceOrder && e.Code == core.OK:
				s.placed++
			}
		}
	}
	return s
}
