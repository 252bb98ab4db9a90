package bench

import (
	"fmt"

	"github.com/ubscore/ubscore/core"
)

// Defaults and limits of Options.
const (
	DefaultUsers       = 10_000
	DefaultSeedPerBook = 1_000
	MaxUsers           = 1_000_000 // well under core.MaxUsers
	MaxSeedPerBook     = 100_000   // well under core.MaxOrdersPerBook
)

// Shape of the stream; see the package doc.
const (
	assetCount      = len(assetTable)
	maxMarkets      = len(marketTable)
	firstSeq        = core.Seq(1)     // seq of the first command
	firstOrderID    = core.OrderID(1) // id of the first accepted place
	deepPerBlock    = 6               // deep places per steady block (each cancelled later)
	takersPerBlock  = 2
	cancelsPerBlock = 6
	idsPerBlock     = 2*deepPerBlock + takersPerBlock // every place (near, deep, taker) takes an order id
	blockLen        = uint64(len(blockPattern))       // commands per steady block
	minSeedTotal    = deepPerBlock                    // so a cancel's target was placed in an earlier block
)

// Options shape a Workload; zero fields take the defaults.
type Options struct {
	Users       int // funded accounts, ids 1..Users (DefaultUsers)
	Markets     int // markets traded, 1..2: BTC-USDT, then ETH-USDT (2)
	SeedPerBook int // resting orders seeded per book before the steady mix (DefaultSeedPerBook)
}

// slotKind is what a position of the steady block does.
type slotKind uint8

const (
	slotNear   slotKind = iota // GTC limit 1..5 ticks from mid, not crossing
	slotDeep                   // GTC limit 6..40 ticks from mid, cancelled later
	slotCancel                 // cancels the next order of the deep queue
	slotTaker                  // IOC limit crossing up to 10 ticks, or MARKET
)

// blockPattern is the steady mix: 60% places, 30% cancels, 10% takers.
var blockPattern = [...]slotKind{
	slotNear, slotDeep, slotCancel, slotNear, slotDeep, slotCancel, slotTaker, slotNear, slotDeep, slotCancel,
	slotNear, slotDeep, slotCancel, slotNear, slotDeep, slotCancel, slotTaker, slotNear, slotDeep, slotCancel,
}

// blockIndex holds, per position of blockPattern, how many order ids, deep
// places and cancels precede it in the block; deepPos maps a deep place's
// rank in the block back to its position.
var blockIndex = func() (ix struct {
	idsBefore, rank [blockLen]uint64
	deepPos         [deepPerBlock]int
}) {
	var ids, near, deep, takers, cancels uint64
	for p, k := range blockPattern {
		ix.idsBefore[p] = ids
		switch k {
		case slotNear:
			near++
			ids++
		case slotTaker:
			takers++
			ids++
		case slotDeep:
			ix.rank[p] = deep
			ix.deepPos[deep] = p
			deep++
			ids++
		case slotCancel:
			ix.rank[p] = cancels
			cancels++
		}
	}
	if ids != idsPerBlock || near != deepPerBlock || deep != deepPerBlock || takers != takersPerBlock ||
		cancels != cancelsPerBlock {
		panic("bench: blockPattern disagrees with its constants")
	}
	return ix
}()

// Workload is a deterministic command stream: Fill is a pure function of
// (seed, options, seq). It is immutable, so any number of goroutines may
// call Fill concurrently.
type Workload struct {
	seed    uint64
	opts    Options
	markets []marketSpec
	fund    [assetCount]core.Units // per-user credit of each asset

	// First seq of each phase; see the package doc.
	marketStart, fundStart, seedStart, steadyStart core.Seq
	seedTotal                                      uint64       // seeded orders (ids 1..seedTotal)
	firstSteadyID                                  core.OrderID // id of the first steady place

	shift Shift // see On
}

// Shift moves a workload onto a data dir that already holds a state (a
// LargeState): its first command comes after Seq, and its ids, all above
// the state's, are the workload's own plus these (its asset ids + Asset,
// market ids + Market, user ids + User, order ids + OrderID).
type Shift struct {
	Seq     core.Seq     // the state's last seq
	OrderID core.OrderID // order ids the state assigned (its next id - 1)
	User    core.UserID  // the workload's users are User+1..User+Users
	Market  core.MarketID
	Asset   core.AssetID
}

// On returns the workload shifted by s (the zero Shift: w itself).
func (w *Workload) On(s Shift) *Workload {
	c := *w
	c.shift = s
	return &c
}

// ShiftOf is the Shift that puts a workload on top of the state b.
func ShiftOf(b LargeStateBuilt) Shift {
	return Shift{Seq: b.Seq, OrderID: b.NextOrderID - 1, User: b.NextUser - 1, Market: b.NextMarket - 1, Asset: b.NextAsset - 1}
}

// apply moves c's ids by s.
func (s *Shift) apply(c *core.Command) {
	switch c.Kind {
	case core.KindConfigAsset:
		c.Asset += s.Asset
	case core.KindConfigMarket:
		c.Market += s.Market
		c.Cfg.Base += s.Asset
		c.Cfg.Quote += s.Asset
	case core.KindAdjust:
		c.User += s.User
		c.Asset += s.Asset
	case core.KindPlaceOrder:
		c.User += s.User
		c.Market += s.Market
	case core.KindCancelOrder:
		c.User += s.User
		c.Market += s.Market
		c.OrderID += s.OrderID
	default:
		panic("bench: Shift of an unexpected command kind")
	}
}

// NewWorkload returns the workload for seed and opts.
func NewWorkload(seed uint64, opts Options) (*Workload, error) {
	if opts.Users == 0 {
		opts.Users = DefaultUsers
	}
	if opts.Markets == 0 {
		opts.Markets = maxMarkets
	}
	if opts.SeedPerBook == 0 {
		opts.SeedPerBook = DefaultSeedPerBook
	}
	switch {
	case opts.Users < 1 || opts.Users > MaxUsers:
		return nil, fmt.Errorf("bench: users %d outside 1..%d", opts.Users, MaxUsers)
	case opts.Markets < 1 || opts.Markets > maxMarkets:
		return nil, fmt.Errorf("bench: markets %d outside 1..%d", opts.Markets, maxMarkets)
	case opts.SeedPerBook < 1 || opts.SeedPerBook > MaxSeedPerBook || opts.SeedPerBook*opts.Markets < minSeedTotal:
		return nil, fmt.Errorf("bench: seed orders per book %d outside 1..%d (and at least %d in all)",
			opts.SeedPerBook, MaxSeedPerBook, minSeedTotal)
	}
	w := &Workload{seed: mix64(seed ^ 0x5eed), opts: opts, markets: marketTable[:opts.Markets]}
	for i, a := range assetTable {
		w.fund[i] = min(a.fund, core.Units(maxAssetTotal/int64(opts.Users)))
	}
	w.marketStart = firstSeq + core.Seq(assetCount)
	w.fundStart = w.marketStart + core.Seq(opts.Markets)
	w.seedStart = w.fundStart + core.Seq(assetCount*opts.Users)
	w.seedTotal = uint64(opts.SeedPerBook * opts.Markets)
	w.steadyStart = w.seedStart + core.Seq(w.seedTotal)
	w.firstSteadyID = firstOrderID + core.OrderID(w.seedTotal)
	return w, nil
}

// Options returns the options in effect (defaults filled in).
func (w *Workload) Options() Options { return w.opts }

// SetupLen is the number of setup commands (configs, funding, seeded
// orders); the steady mix starts at seq SetupLen()+1.
func (w *Workload) SetupLen() int { return int(w.steadyStart - firstSeq) }

// Fill writes the command for seq (>= 1, or > Shift.Seq) into c,
// overwriting all of it (Seq and Time are left zero: the sequencer stamps
// them). It does not allocate.
func (w *Workload) Fill(seq core.Seq, c *core.Command) {
	if w.shift == (Shift{}) {
		w.fill(seq, c)
		return
	}
	if seq <= w.shift.Seq {
		panic("bench: Fill of a seq of the state under the workload")
	}
	w.fill(seq-w.shift.Seq, c)
	w.shift.apply(c)
}

func (w *Workload) fill(seq core.Seq, c *core.Command) {
	*c = core.Command{}
	switch {
	case seq < firstSeq:
		panic("bench: Fill of seq 0")
	case seq < w.marketStart:
		a := &assetTable[seq-firstSeq]
		c.Kind, c.Asset, c.BaseScale = core.KindConfigAsset, a.id, a.scale
	case seq < w.fundStart:
		m := &w.markets[seq-w.marketStart]
		c.Kind, c.Market, c.Cfg = core.KindConfigMarket, m.id, m.cfg
	case seq < w.seedStart:
		i := int(seq - w.fundStart)
		c.Kind, c.User = core.KindAdjust, core.UserID(1+i/assetCount)
		c.Asset, c.Amount = assetTable[i%assetCount].id, w.fund[i%assetCount]
		c.Key = adjustKey(seq)
	case seq < w.steadyStart:
		id := firstOrderID + core.OrderID(seq-w.seedStart)
		w.restingPlace(c, id, seedMin, seedSpan)
	default:
		w.fillSteady(seq, c)
	}
}

func (w *Workload) fillSteady(seq core.Seq, c *core.Command) {
	i := uint64(seq - w.steadyStart)
	b, p := i/blockLen, i%blockLen
	switch blockPattern[p] {
	case slotNear:
		w.restingPlace(c, w.steadyID(b, p), nearMin, nearSpan)
	case slotDeep:
		w.restingPlace(c, w.steadyID(b, p), deepMin, deepSpan)
	case slotTaker:
		w.taker(c, w.steadyID(b, p))
	case slotCancel:
		id := w.deepQueue(b*cancelsPerBlock + blockIndex.rank[p])
		c.Kind, c.User, c.Market, c.OrderID = core.KindCancelOrder, w.userOf(id), w.marketOf(id).id, id
	}
}

// OrderIDAt returns the order id the core assigns to the place command at
// seq, and false if seq is not a place command.
func (w *Workload) OrderIDAt(seq core.Seq) (core.OrderID, bool) {
	if w.shift != (Shift{}) {
		if seq <= w.shift.Seq {
			return 0, false
		}
		id, ok := w.orderIDAt(seq - w.shift.Seq)
		if ok {
			id += w.shift.OrderID
		}
		return id, ok
	}
	return w.orderIDAt(seq)
}

func (w *Workload) orderIDAt(seq core.Seq) (core.OrderID, bool) {
	switch {
	case seq < w.seedStart:
		return 0, false
	case seq < w.steadyStart:
		return firstOrderID + core.OrderID(seq-w.seedStart), true
	}
	i := uint64(seq - w.steadyStart)
	b, p := i/blockLen, i%blockLen
	if blockPattern[p] == slotCancel {
		return 0, false
	}
	return w.steadyID(b, p), true
}

// steadyID is the order id of the place at position p of steady block b.
func (w *Workload) steadyID(b, p uint64) core.OrderID {
	return w.firstSteadyID + core.OrderID(b*idsPerBlock+blockIndex.idsBefore[p])
}

// deepQueue is the id of the n-th order to cancel: the seeded orders, then
// the deep places in order. Cancel n runs in block n/6, and its target was
// placed at least seedTotal >= 6 deep places earlier, i.e. in an earlier block.
func (w *Workload) deepQueue(n uint64) core.OrderID {
	if n < w.seedTotal {
		return firstOrderID + core.OrderID(n)
	}
	d := n - w.seedTotal
	return w.steadyID(d/deepPerBlock, uint64(blockIndex.deepPos[d%deepPerBlock]))
}

// Per-order attributes are functions of the order id, so a cancel can name
// the user and market of the order it targets.
func (w *Workload) userOf(id core.OrderID) core.UserID {
	return core.UserID(1 + w.hash(uint64(id), orderSaltUser)%uint64(w.opts.Users))
}

func (w *Workload) marketOf(id core.OrderID) *marketSpec {
	if uint64(id) <= w.seedTotal { // seeded orders alternate, so every book gets SeedPerBook
		return &w.markets[uint64(id-1)%uint64(len(w.markets))]
	}
	return &w.markets[w.hash(uint64(id), orderSaltMarket)%uint64(len(w.markets))]
}

func (w *Workload) sideOf(id core.OrderID) core.Side {
	if w.hash(uint64(id), orderSaltSide)&1 == 0 {
		return core.Buy
	}
	return core.Sell
}

// restingPlace is a GTC limit that never crosses: bids below the fixed mid,
// asks above it, offset lo..lo+span-1 ticks.
func (w *Workload) restingPlace(c *core.Command, id core.OrderID, lo, span uint64) {
	m := w.marketOf(id)
	off := core.Price(lo+w.hash(uint64(id), orderSaltPrice)%span) * m.cfg.Tick
	c.Kind, c.Type, c.TIF = core.KindPlaceOrder, core.Limit, core.GTC
	c.User, c.Market, c.Side = w.userOf(id), m.id, w.sideOf(id)
	c.Price = m.mid + off
	if c.Side == core.Buy {
		c.Price = m.mid - off
	}
	c.Qty = core.Units(1+w.hash(uint64(id), orderSaltQty)%restMaxSteps) * m.step
}

// taker is a marketable order: half IOC limits crossing up to takerReach
// ticks past the mid, a quarter MARKET by quantity, a quarter MARKET by
// quote budget (buys; sells by quantity).
func (w *Workload) taker(c *core.Command, id core.OrderID) {
	m := w.marketOf(id)
	c.Kind, c.User, c.Market, c.Side = core.KindPlaceOrder, w.userOf(id), m.id, w.sideOf(id)
	qty := core.Units(takerMinSteps+w.hash(uint64(id), orderSaltTakerQty)%takerSpanSteps) * m.step
	switch w.hash(uint64(id), orderSaltTakerTyp) % 4 {
	case 0, 1:
		c.Type, c.TIF, c.Qty = core.Limit, core.IOC, qty
		c.Price = m.mid + takerReach*m.cfg.Tick
		if c.Side == core.Sell {
			c.Price = m.mid - takerReach*m.cfg.Tick
		}
	case 2:
		c.Type, c.Qty = core.Market, qty
	default:
		c.Type = core.Market
		if c.Side == core.Buy {
			c.QuoteQty = core.Units(int64(m.mid) * int64(qty) / notionalDivisor * feeHeadroom / feeHeadroomDenom)
		} else {
			c.Qty = qty
		}
	}
}

// adjustKey is "adj-<seq>": unique per funding command.
func adjustKey(seq core.Seq) core.Key {
	var k core.Key
	n := copy(k[:], "adj-")
	var digits [20]byte
	i := len(digits)
	for v := uint64(seq); ; v /= 10 {
		i--
		digits[i] = byte('0' + v%10)
		if v < 10 {
			break
		}
	}
	copy(k[n:], digits[i:])
	return k
}

// hash is a keyed mix of (seed, x, salt): the workload's only randomness.
func (w *Workload) hash(x, salt uint64) uint64 {
	return mix64(w.seed ^ x*0x9e3779b97f4a7c15 ^ salt*0xd1b54a32d192ed03)
}

// mix64 is the splitmix64 finalizer.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	return z ^ z>>31
}
