package core

import "unicode/utf8"

// Binary YES/NO prediction markets (issue 22, spec 004's market model): a
// second market kind beside spot, in the same sequenced core, with one book
// per market (the YES book) and per-(user, market) positions instead of a
// base asset. The rules are written in doc.go ("Binary markets"); this file
// holds the state and the lifecycle commands.

// Outcome of a binary order or resolution. Values are part of the WAL
// (Command.Flags of orders and resolutions) and of events (Event.Detail of
// a binary market's order events): append only.
type Outcome uint8

const (
	OutcomeYes Outcome = 1
	OutcomeNo  Outcome = 2
)

var outcomeNames = [...]string{"", "YES", "NO"}

func (o Outcome) String() string { return enumName(outcomeNames[:], uint8(o)) }

// FillKind is the kind of a binary fill (EvTrade.Flags in a binary market).
type FillKind uint8

const (
	FillTransferYes FillKind = 1 // BUY YES x SELL YES: YES shares move seller -> buyer
	FillTransferNo  FillKind = 2 // BUY NO x SELL NO: NO shares move, at payout - book price
	FillMint        FillKind = 3 // BUY YES x BUY NO: both pay, the reserve gains payout per share
	FillBurn        FillKind = 4 // SELL YES x SELL NO: both give shares, the reserve pays payout per share
)

var fillKindNames = [...]string{"", "TRANSFER_YES", "TRANSFER_NO", "MINT", "BURN"}

func (k FillKind) String() string { return enumName(fillKindNames[:], uint8(k)) }

// MaxSettleSlice bounds the orders and positions one settle (or the first
// slice run by resolve / void) processes, so settling a market of a million
// positions never stalls the processor: the operator tool submits slices.
const MaxSettleSlice = 10_000

// binaryMarket is the binary part of a market (market.bin; nil for spot).
// Money here is in the quote asset's Units; shares are whole shares.
// Owned by the processor goroutine.
//
// Invariants (checked on every command that touched the market, and by the
// full check; binary_check.go), while not settling:
//
//	yesShares == noShares
//	reserve   == payout x yesShares
//	reserve + pnlPool == costSum == sum over positions of yesCost + noCost
//
// While settling, the first two are replaced by reserve == payout x
// unsettled winning shares (VOID: payout/2 x unsettled YES + NO shares) and
// pnlPool does not change; after the last slice reserve, pnlPool and every
// position are 0. reserve and pnlPool count in the quote asset's
// conservation (assetState.total includes them).
type binaryMarket struct {
	question  string  // what the market asks; ValidQuestion; "" only for a market configured before questions (WAL or v3 snapshot)
	payout    Units   // quote Units one winning share pays; a multiple of 100 (tick = payout/100)
	closeTime int64   // unix ns at and after which no order is accepted; 0: none
	outcome   Outcome // set by resolve; 0 before it and for a voided market
	settling  bool    // RESOLVED / VOIDED and orders or positions remain to settle
	// after is the status a breaker resolution returns the market to once it
	// was resolved or voided (never trading again), or DRAFT while a halt
	// interrupts a market not yet activated (cleared when it returns: a
	// halt must not open a market the operator never activated); 0 while it
	// can trade.
	after MarketStatus

	reserve   Units // quote held for the outstanding shares
	pnlPool   Units // fees collected; paid to FeeUser when settlement ends
	yesShares Units // YES shares outstanding (not yet settled)
	noShares  Units // NO shares outstanding
	costSum   Units // running sum of every position's yesCost + noCost

	pos    []position // positions in creation order (the canonical order of snapshots and settlement)
	posIdx posIndex   // account index -> index in pos
	cursor int32      // settlement progress: positions before it are paid and zeroed
}

// position is one user's holding in one binary market.
// Invariant: 0 <= yesPending <= yesVol, 0 <= noPending <= noVol, and each
// pending == the shares its owner's resting SELL orders of that outcome hold.
type position struct {
	acct       int32  // index into Processor.accounts
	user       UserID // the owner
	yesVol     Units  // YES shares held, pending sells included
	noVol      Units  // NO shares held, pending sells included
	yesCost    Units  // net quote put into YES: paid on buys and mints (fees included) minus received on sells and burns (net of fee)
	noCost     Units  // the same for NO
	yesPending Units  // YES shares frozen by resting SELL YES orders
	noPending  Units  // NO shares frozen by resting SELL NO orders
}

// vol, cost and pending return the fields of outcome o for update.
func (ps *position) vol(o Outcome) *Units {
	if o == OutcomeYes {
		return &ps.yesVol
	}
	return &ps.noVol
}

func (ps *position) cost(o Outcome) *Units {
	if o == OutcomeYes {
		return &ps.yesCost
	}
	return &ps.noCost
}

func (ps *position) pending(o Outcome) *Units {
	if o == OutcomeYes {
		return &ps.yesPending
	}
	return &ps.noPending
}

// positionOf returns the index of account a's position in b, or -1.
func (b *binaryMarket) positionOf(a int32) int32 {
	if i, ok := b.posIdx.get(a); ok {
		return i
	}
	return -1
}

// ensurePosition returns the index of account a's position, creating it.
func (p *Processor) ensurePosition(b *binaryMarket, a int32) int32 {
	if i, ok := b.posIdx.get(a); ok {
		return i
	}
	i := int32(len(b.pos))
	b.pos = append(b.pos, position{acct: a, user: p.accounts[a].id})
	b.posIdx.put(a, i)
	return i
}

// emitPosition reports position ps of market m after a change (EvPosition:
// followers keep the latest per user and market from it).
func (p *Processor) emitPosition(m *market, ps *position) {
	e := p.newEvent(EvPosition)
	e.Market, e.User, e.Qty, e.Amount = m.id, ps.user, ps.yesVol, ps.noVol
	e.DAvail, e.DFrozen, e.Fee, e.Fee2 = ps.yesCost, ps.noCost, ps.yesPending, ps.noPending
}

// userSide is the side of an order in its own outcome's terms: a NO order
// rests on the YES book on the other side (SYNTHETIC).
func (o *order) userSide() Side {
	if o.outcome == OutcomeNo {
		return 3 - o.side
	}
	return o.side
}

// bookTerms maps an order in its own outcome's terms to the YES book:
// BUY YES @p -> BUY @p, SELL YES @p -> SELL @p (NATIVE); BUY NO @p ->
// SELL @(payout-p), SELL NO @p -> BUY @(payout-p) (SYNTHETIC).
func (b *binaryMarket) bookTerms(out Outcome, side Side, price Price) (Side, Price) {
	if out == OutcomeNo {
		return 3 - side, Price(b.payout) - price
	}
	return side, price
}

// ownPrice is the price of a book-price fill in outcome out's terms.
func (b *binaryMarket) ownPrice(out Outcome, bookPrice Price) Price {
	if out == OutcomeNo {
		return Price(b.payout) - bookPrice
	}
	return bookPrice
}

// binaryTerms completes a closing event e of order o on market m when m is
// binary: the order's book price (its own limit on the YES book, so a
// follower can state it in the order's terms with Payout) and the payout.
// A spot event is left as it is.
func binaryTerms(e *Event, m *market, o *order) {
	if m.bin != nil {
		e.Price, e.Payout = o.price, m.bin.payout
	}
}

// --- configuration and lifecycle commands ---

// MaxQuestionLen bounds a binary market's question, in bytes.
const MaxQuestionLen = 256

// ValidQuestion reports whether q may be a binary market's question: at
// most MaxQuestionLen bytes of valid UTF-8 with no control character (C0,
// DEL, C1: no newlines or tabs either, so it prints on one line in logs
// and tools). The empty question is valid here: it is what a market
// configured before questions existed has (a WAL record or a version-3
// snapshot), so replaying those stays exact; the gateway requires one.
func ValidQuestion(q string) bool {
	if len(q) > MaxQuestionLen || !utf8.ValidString(q) {
		return false
	}
	for _, r := range q {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return false
		}
	}
	return true
}

// validBinaryCfg checks a binary market's config; payout is the resolved
// payout (the default applied).
func (p *Processor) validBinaryCfg(cfg *MarketCfg, payout Units) Code {
	if cfg.Quote == 0 || cfg.Quote > MaxAssets || !p.assets[cfg.Quote].configured {
		return CodeInvalidAsset
	}
	if cfg.Base != 0 || cfg.BaseScale != 0 || payout <= 0 || payout%100 != 0 || cfg.Tick != Price(payout/100) {
		return CodeInvalidMarketConfig
	}
	if cfg.Lot <= 0 || cfg.MinQty <= 0 || cfg.MaxQty < cfg.MinQty || cfg.MinQty%cfg.Lot != 0 || cfg.MaxQty%cfg.Lot != 0 {
		return CodeInvalidMarketConfig
	}
	if cfg.MakerFee < 0 || cfg.MakerFee > MaxFeeRate || cfg.TakerFee < 0 || cfg.TakerFee > MaxFeeRate {
		return CodeInvalidMarketConfig
	}
	// The largest order's worst-case cost must fit: payout x MaxQty with the fee.
	n, ok := notional(Price(payout), cfg.MaxQty, 0)
	if ok {
		_, ok = withFee(n, MaxFeeRate)
	}
	if !ok {
		return CodeInvalidMarketConfig
	}
	return OK
}

// configBinary creates a binary market in DRAFT, or reconfigures one that
// is still DRAFT.
func (p *Processor) configBinary(c *Command) Code {
	if c.Market == 0 || c.Market > MaxMarkets {
		return CodeInvalidMarket
	}
	cfg := c.Cfg
	payout := c.Amount
	if payout == 0 && cfg.Quote != 0 && cfg.Quote <= MaxAssets {
		if s := p.assets[cfg.Quote].scale; s <= 17 {
			payout = Units(pow10[s]) // one whole quote unit
		}
	}
	if payout > 0 && cfg.Tick == 0 {
		cfg.Tick = Price(payout / 100)
	}
	if code := p.validBinaryCfg(&cfg, payout); code != OK {
		return code
	}
	if c.Price < 0 {
		return CodeInvalidMarketConfig
	}
	if !ValidQuestion(c.Text) {
		return CodeInvalidQuestion
	}
	m := p.markets[c.Market]
	if m != nil && (m.bin == nil || m.status != MarketDraft) {
		return CodeMarketExists
	}
	if m == nil {
		m = &market{id: c.Market, bids: bookSide{bid: true}, status: MarketDraft, bin: &binaryMarket{}}
		p.markets[c.Market] = m
	}
	m.cfg = cfg
	m.bin.payout, m.bin.closeTime, m.bin.question = payout, int64(c.Price), c.Text
	p.emit(Event{Kind: EvMarketConfigured, Market: c.Market, Amount: payout})
	return OK
}

// binaryOf returns the binary market c names, or a refusal.
func (p *Processor) binaryOf(c *Command) (*market, Code) {
	m := p.marketOf(c.Market)
	if m == nil {
		return nil, CodeInvalidMarket
	}
	if m.bin == nil {
		return nil, CodeNotBinary
	}
	return m, OK
}

// setBinaryStatus moves m to s along status.go's edges and reports it.
func (p *Processor) setBinaryStatus(m *market, s MarketStatus, out Outcome, user UserID) {
	if !canMove(m.status, s) {
		p.fail(m.id, 0, ViolBookIndex) // a caller skipped its check: a bug
		return
	}
	m.status = s
	p.emit(Event{Kind: EvMarketStatus, Market: m.id, Detail: uint8(s), Flags: uint8(out), User: user})
}

// activate opens a DRAFT binary market for trading.
func (p *Processor) activate(c *Command) Code {
	m, code := p.binaryOf(c)
	if code != OK {
		return code
	}
	if m.status != MarketDraft {
		return CodeInvalidStatus
	}
	p.setBinaryStatus(m, MarketActive, 0, c.User)
	return OK
}

// suspendMarket moves an ACTIVE market (spot or binary) to SUSPENDED:
// cancels only, until KindResumeMarket.
func (p *Processor) suspendMarket(c *Command) Code {
	m := p.marketOf(c.Market)
	if m == nil {
		return CodeInvalidMarket
	}
	if m.status != MarketActive {
		return CodeInvalidStatus
	}
	m.status = MarketSuspended
	p.emit(Event{Kind: EvMarketStatus, Market: m.id, Detail: uint8(MarketSuspended), User: c.User})
	return OK
}

// resolve sets the outcome of an ACTIVE or SUSPENDED binary market and
// starts settlement: the market is RESOLVED and settling; its first slice
// of open orders is cancelled at once, the rest by settle slices.
func (p *Processor) resolve(c *Command) Code {
	m, code := p.binaryOf(c)
	if code != OK {
		return code
	}
	out := Outcome(c.Flags)
	if out != OutcomeYes && out != OutcomeNo {
		return CodeInvalidOutcome
	}
	if m.status != MarketActive && m.status != MarketSuspended {
		return CodeInvalidStatus
	}
	return p.beginSettlement(m, MarketResolved, out, c.User)
}

// void cancels a binary market: every YES and NO share pays payout/2.
func (p *Processor) void(c *Command) Code {
	m, code := p.binaryOf(c)
	if code != OK {
		return code
	}
	if c.Flags != 0 {
		return CodeInvalidCommand
	}
	if m.status != MarketActive && m.status != MarketSuspended && m.status != MarketDraft {
		return CodeInvalidStatus
	}
	return p.beginSettlement(m, MarketVoided, 0, c.User)
}

func (p *Processor) beginSettlement(m *market, s MarketStatus, out Outcome, user UserID) Code {
	b := m.bin
	p.setBinaryStatus(m, s, out, user)
	b.outcome, b.settling, b.after, b.cursor = out, true, s, 0
	p.touchedMarket = m.id
	p.res.filled = p.settleSlice(m, MaxSettleSlice, true)
	return OK
}

// archive releases the slot of a binary market whose settlement is done
// (SETTLED, or VOIDED and no longer settling): the market id may then be
// configured again, so MaxMarkets bounds the markets alive at once, not
// every market ever listed. The operator archives it once its rows are
// kept downstream (the sink has them from the WAL).
func (p *Processor) archive(c *Command) Code {
	m, code := p.binaryOf(c)
	if code != OK {
		return code
	}
	if !(m.status == MarketSettled || (m.status == MarketVoided && !m.bin.settling)) || m.orders != 0 {
		return CodeInvalidStatus
	}
	p.markets[m.id] = nil
	p.emit(Event{Kind: EvMarketArchived, Market: c.Market, User: c.User})
	return OK
}

// settle runs one settlement slice of at most c.Qty orders and positions.
// EvResult's Qty is how many it processed; the market leaves settling (and
// EvMarketSettled is emitted) in the slice that finishes.
func (p *Processor) settle(c *Command) Code {
	m, code := p.binaryOf(c)
	if code != OK {
		return code
	}
	if c.Qty < 1 || c.Qty > MaxSettleSlice {
		return CodeInvalidQuantity
	}
	if !m.bin.settling || (m.status != MarketResolved && m.status != MarketVoided) {
		return CodeNothingToSettle
	}
	p.touchedMarket = m.id
	p.res.filled = p.settleSlice(m, c.Qty, false)
	return OK
}
