package bench

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/ubscore/ubscore/bench/bookshape"
	"github.com/ubscore/ubscore/core"
)

// The processor's side of the book-shape comparison (issue 25): the
// public-benchmark-shaped flow of package bookshape applied to the full
// core.Processor — validation, freezing, fees, settlement, events, the
// per-command checks — beside bookshape.Book, a bare FIFO book, on the same
// messages in the same run. core's BenchmarkProcessorBookShape and
// `bench processor --shape book` both run it.

// The shape market: prices in ticks and quantities in lots (BaseScale 0),
// so a notional is price*qty quote Units; fees are charged (0.1% maker,
// 0.2% taker).
const (
	ShapeMarket core.MarketID = 1
	shapeBase   core.AssetID  = 1
	shapeQuote  core.AssetID  = 2
	// ShapeOneEach as ShapeConfig.Accounts gives every order its own
	// account (user id = order id): the worst case for account state.
	ShapeOneEach = 1_000_000
	// ShapeSeed is the default seed of the flow.
	ShapeSeed = 23
	// shapeChunk is how many commands are converted (untimed) per batch
	// applied (timed): 200 KB of commands, which stay in cache.
	shapeChunk = 1024
	// shapeSegment is how many messages each side runs per turn: ~10 ms
	// of work, far longer than either needs to warm its caches again.
	shapeSegment = 1 << 16
	shapeFunds   = 1 << 40 // of each asset per account: more than its orders can hold
)

var shapeCfg = core.MarketCfg{Base: shapeBase, Quote: shapeQuote, BaseScale: 0, Tick: 1, Lot: 1, MinQty: 1,
	MaxQty: 1_000_000, MakerFee: 1_000, TakerFee: 2_000}

// ShapeConfig selects one comparison.
type ShapeConfig struct {
	Scenario bookshape.Scenario
	Orders   int    // new orders in the flow (0 = bookshape.DefaultOrders)
	Accounts int    // funded accounts, >= 2; >= ShapeOneEach: one per order
	Seed     uint64 // the flow's seed
}

// ShapeOwner is the account of order id on side: one per order with
// accounts >= ShapeOneEach, else buyers and sellers are two disjoint halves
// of the accounts, so no order ever meets one of its own user (no self-trade
// prevention, which the bare book does not have).
func ShapeOwner(side uint8, id uint32, accounts int) core.UserID {
	if accounts >= ShapeOneEach {
		return core.UserID(id)
	}
	half := uint32(accounts / 2)
	u := 1 + id%half
	if side == bookshape.Sell {
		u += half
	}
	return core.UserID(u)
}

// ShapeCommand turns message m into command c (the adapter: untimed).
func ShapeCommand(m *bookshape.Msg, accounts int, seq core.Seq, c *core.Command) {
	*c = core.Command{Seq: seq, Market: ShapeMarket, User: ShapeOwner(m.Side, m.ID, accounts)}
	switch m.Kind {
	case bookshape.New:
		c.Kind, c.Side, c.Type, c.TIF = core.KindPlaceOrder, core.Side(m.Side), core.Limit, core.GTC
		c.Price, c.Qty = core.Price(m.Price), core.Units(m.Qty)
		if m.IOC {
			c.TIF = core.IOC
		}
	case bookshape.Cancel:
		c.Kind, c.OrderID = core.KindCancelOrder, core.OrderID(m.ID)
	case bookshape.Modify:
		c.Kind, c.OrderID, c.Price, c.Qty = core.KindModifyOrder, core.OrderID(m.ID), core.Price(m.Price), core.Units(m.Qty)
	}
}

// ShapeWorkload is one flow and the funded state it starts from.
type ShapeWorkload struct {
	Cfg  ShapeConfig
	Msgs []bookshape.Msg
	Snap []byte   // the state after setup (market configured, accounts funded)
	From core.Seq // seq of the first message
	buf  []core.Command
}

// NewShapeWorkload generates cfg's flow and its starting state.
func NewShapeWorkload(cfg ShapeConfig) (*ShapeWorkload, error) {
	if cfg.Orders <= 0 {
		cfg.Orders = bookshape.DefaultOrders
	}
	if cfg.Accounts < 2 || (cfg.Accounts < ShapeOneEach && cfg.Accounts > cfg.Orders) {
		return nil, errors.New("bench: shape accounts must be 2..orders, or >= 1000000 (one per order)")
	}
	if cfg.Orders >= core.MaxUsers && cfg.Accounts >= ShapeOneEach {
		return nil, errors.New("bench: one account per order needs orders < core.MaxUsers")
	}
	p := core.New(core.Config{})
	seq := core.Seq(0)
	apply := func(c core.Command) error {
		seq++
		c.Seq = seq
		if ev := p.Apply(&c); ev[len(ev)-1].Code != core.OK {
			return fmt.Errorf("bench: shape setup: %v rejected: %v", c.Kind, ev[len(ev)-1].Code)
		}
		return nil
	}
	if err := errors.Join(apply(core.Command{Kind: core.KindConfigAsset, Asset: shapeBase}),
		apply(core.Command{Kind: core.KindConfigAsset, Asset: shapeQuote}),
		apply(core.Command{Kind: core.KindConfigMarket, Market: ShapeMarket, Cfg: shapeCfg})); err != nil {
		return nil, err
	}
	users := cfg.Accounts
	if cfg.Accounts >= ShapeOneEach {
		users = cfg.Orders
	}
	for u := 1; u <= users; u++ {
		for _, a := range [...]core.AssetID{shapeBase, shapeQuote} {
			var k core.Key
			copy(k[:], strconv.AppendUint([]byte{'d', '0' + byte(a), '-'}, uint64(u), 10))
			if err := apply(core.Command{Kind: core.KindSpotDeposit, User: core.UserID(u), Asset: a, Amount: shapeFunds, Key: k}); err != nil {
				return nil, err
			}
		}
	}
	msgs := bookshape.Generate(bookshape.Config{Seed: cfg.Seed, Orders: cfg.Orders, Scenario: cfg.Scenario})
	return &ShapeWorkload{Cfg: cfg, Msgs: msgs, Snap: p.AppendSnapshot(nil), From: p.LastSeq() + 1,
		buf: make([]core.Command, shapeChunk)}, nil
}

// Start returns a processor in the workload's starting state.
func (w *ShapeWorkload) Start() (*core.Processor, error) { return core.Restore(core.Config{}, w.Snap) }

// Apply applies msgs (message index off onwards of w.Msgs) to p, converting
// them in chunks, and returns the thread time spent inside Apply (the
// caller holds its thread). each, if not nil, sees every message's events.
func (w *ShapeWorkload) Apply(p *core.Processor, off int, msgs []bookshape.Msg, each func(*bookshape.Msg, []core.Event)) time.Duration {
	var spent time.Duration
	seq := w.From + core.Seq(off)
	for lo := 0; lo < len(msgs); lo += shapeChunk {
		part := msgs[lo:min(lo+shapeChunk, len(msgs))]
		for i := range part {
			ShapeCommand(&part[i], w.Cfg.Accounts, seq+core.Seq(i), &w.buf[i])
		}
		t0 := threadClock()
		for i := range part {
			ev := p.Apply(&w.buf[i])
			if each != nil {
				each(&part[i], ev)
			}
		}
		spent += threadClock() - t0
		seq += core.Seq(len(part))
	}
	return spent
}

// ShapeResult is one comparison's outcome; its JSON form is the report.
type ShapeResult struct {
	Scenario      string  `json:"scenario"`
	Accounts      int     `json:"accounts"` // funded accounts (one per order: = orders)
	Messages      int     `json:"messages"` // per run
	Runs          int     `json:"runs"`
	ProcPerSec    float64 `json:"proc_msgs_per_sec"` // the full processor
	BookPerSec    float64 `json:"book_msgs_per_sec"` // the bare book, same messages, same runs
	Ratio         float64 `json:"ratio"`             // ProcPerSec / BookPerSec
	ProcAllocsMsg float64 `json:"proc_allocs_per_msg"`
	ProcSeconds   float64 `json:"proc_seconds"`
	BookSeconds   float64 `json:"book_seconds"`
	ProcAllocs    uint64  `json:"proc_allocs"` // every allocation during the processor's turns, heap growth included
	// SteadyAllocs are those after each run's first segment (65,536
	// messages): a fresh processor's tables grow in its first segment;
	// later only a new peak of the book grows one.
	SteadyAllocs uint64  `json:"proc_steady_allocs"`
	SteadyPerMsg float64 `json:"proc_steady_allocs_per_msg"`
	Trades       int     `json:"trades"` // fills per run
	Clock        string  `json:"clock"`  // what the seconds are
}

// RunShape runs w's flow runs times through a fresh processor and the bare
// book. The two take turns by segments of shapeSegment messages, each timed
// alone on the thread's clock, so a neighbour's load falls on both alike.
func RunShape(w *ShapeWorkload, runs int) (ShapeResult, error) {
	if runs < 1 {
		return ShapeResult{}, errors.New("bench: shape runs must be >= 1")
	}
	runtime.LockOSThread() // threadClock reads this thread's clock
	defer runtime.UnlockOSThread()
	book := bookshape.NewBook(w.Cfg.Orders)
	var procT, bookT time.Duration
	var allocs, steady uint64
	var ms runtime.MemStats
	for r := 0; r < runs; r++ {
		p, err := w.Start()
		if err != nil {
			return ShapeResult{}, err
		}
		book.Reset()
		runtime.GC()
		for off := 0; off < len(w.Msgs); off += shapeSegment {
			seg := w.Msgs[off:min(off+shapeSegment, len(w.Msgs))]
			runtime.ReadMemStats(&ms)
			a0 := ms.Mallocs
			procT += w.Apply(p, off, seg, nil)
			runtime.ReadMemStats(&ms)
			allocs += ms.Mallocs - a0
			if off > 0 {
				steady += ms.Mallocs - a0
			}
			t0 := threadClock()
			for i := range seg {
				book.Apply(&seg[i])
			}
			bookT += threadClock() - t0
		}
	}
	msgs := float64(runs) * float64(len(w.Msgs))
	res := ShapeResult{Scenario: w.Cfg.Scenario.String(), Accounts: w.Cfg.Accounts, Messages: len(w.Msgs), Runs: runs,
		ProcSeconds: procT.Seconds(), BookSeconds: bookT.Seconds(), ProcAllocs: allocs, SteadyAllocs: steady,
		Trades: book.Trades, Clock: ThreadClockName}
	if w.Cfg.Accounts >= ShapeOneEach {
		res.Accounts = w.Cfg.Orders
	}
	res.ProcPerSec, res.BookPerSec = msgs/procT.Seconds(), msgs/bookT.Seconds()
	res.Ratio = res.ProcPerSec / res.BookPerSec
	res.ProcAllocsMsg = float64(allocs) / msgs
	if steadyMsgs := msgs - float64(runs)*float64(min(shapeSegment, len(w.Msgs))); steadyMsgs > 0 {
		res.SteadyPerMsg = float64(steady) / steadyMsgs
	}
	return res, nil
}

// ShapeSetConfig selects every comparison of one `bench processor --shape
// book` run: each scenario with each account count.
type ShapeSetConfig struct {
	Scenarios []bookshape.Scenario
	Accounts  []int // e.g. 8000 and ShapeOneEach
	Orders    int   // new orders per flow (0 = bookshape.DefaultOrders)
	Seed      uint64
	Runs      int // runs per comparison, each measured alone; the report takes medians
}

// ShapeReport is the set's outcome: one row per comparison (rates and ratio
// are medians over the runs; Ratios lists every run's) and the worst ratio.
type ShapeReport struct {
	Shape    string        `json:"shape"` // "book"
	Results  []ShapeResult `json:"results"`
	Ratios   [][]float64   `json:"ratios"` // per result: every run's ratio
	MinRatio float64       `json:"min_ratio"`
	Worst    int           `json:"worst"` // index of the result with MinRatio
}

// RunShapeSet runs every comparison of cfg, one workload in memory at a time.
func RunShapeSet(cfg ShapeSetConfig) (ShapeReport, error) {
	if cfg.Runs < 1 || len(cfg.Scenarios) == 0 || len(cfg.Accounts) == 0 {
		return ShapeReport{}, errors.New("bench: shape set needs runs >= 1, a scenario and an account count")
	}
	rep := ShapeReport{Shape: "book"}
	for _, acc := range cfg.Accounts {
		for _, sc := range cfg.Scenarios {
			w, err := NewShapeWorkload(ShapeConfig{Scenario: sc, Orders: cfg.Orders, Accounts: acc, Seed: cfg.Seed})
			if err != nil {
				return ShapeReport{}, err
			}
			var runs []ShapeResult
			for r := 0; r < cfg.Runs; r++ {
				res, err := RunShape(w, 1)
				if err != nil {
					return ShapeReport{}, err
				}
				runs = append(runs, res)
			}
			med := medianShape(runs)
			ratios := make([]float64, len(runs))
			for i := range runs {
				ratios[i] = roundSig3(runs[i].Ratio)
			}
			if len(rep.Results) == 0 || med.Ratio < rep.MinRatio {
				rep.MinRatio, rep.Worst = med.Ratio, len(rep.Results)
			}
			rep.Results = append(rep.Results, med)
			rep.Ratios = append(rep.Ratios, ratios)
		}
	}
	return rep, nil
}

// medianShape is runs' first row with every rate and the ratio replaced by
// its median over the runs (and the sums of the raw counters).
func medianShape(runs []ShapeResult) ShapeResult {
	out := runs[0]
	pick := func(f func(*ShapeResult) float64) float64 {
		v := make([]float64, len(runs))
		for i := range runs {
			v[i] = f(&runs[i])
		}
		return median(v)
	}
	out.Runs = len(runs)
	out.ProcPerSec = math.Round(pick(func(r *ShapeResult) float64 { return r.ProcPerSec }))
	out.BookPerSec = math.Round(pick(func(r *ShapeResult) float64 { return r.BookPerSec }))
	out.Ratio = roundSig3(pick(func(r *ShapeResult) float64 { return r.Ratio }))
	out.ProcSeconds, out.BookSeconds, out.ProcAllocs, out.SteadyAllocs = 0, 0, 0, 0
	for i := range runs {
		out.ProcSeconds += runs[i].ProcSeconds
		out.BookSeconds += runs[i].BookSeconds
		out.ProcAllocs += runs[i].ProcAllocs
		out.SteadyAllocs += runs[i].SteadyAllocs
	}
	out.ProcAllocsMsg = float64(out.ProcAllocs) / (float64(len(runs)) * float64(out.Messages))
	if steadyMsgs := float64(len(runs)) * float64(out.Messages-min(shapeSegment, out.Messages)); steadyMsgs > 0 {
		out.SteadyPerMsg = float64(out.SteadyAllocs) / steadyMsgs
	}
	return out
}

// median of v (sorted in place); the mean of the middle two for an even count.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
