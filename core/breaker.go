package core

// The circuit breaker (spec 004 §5): a violation, a failed recovery or an
// operator halts a market (or, for balance-level damage, the whole core);
// nothing is repaired automatically; an operator resolves the halt once the
// full check passes. Every trip and resolution is a sequenced command, so
// replay reproduces it and the sink derives circuit_breaker_events from it.

// BreakerReason is why a breaker tripped (spec 004 §5.2). The values are
// part of the WAL (KindBreakerTrip.Flags), of snapshots and of events:
// append only. Binary markets trip INVARIANT_RESERVE, INVARIANT_COST_SUM and
// INVARIANT_SHARES through the same path (their checks set Violation.Reason).
type BreakerReason uint8

const (
	ReasonNone              BreakerReason = iota
	ReasonInvariantBalance                // sum of balances != credited - debited, or frozen != what orders hold
	ReasonNegativeBalance                 // an available or frozen balance below zero
	ReasonOrderbookDesync                 // a book's levels, index or counts disagree with its orders
	ReasonRecoveryFailed                  // the state failed verification after recovery
	ReasonClearingError                   // a fill found an order holding less than it costs
	ReasonManualHalt                      // an operator halted it
	ReasonInvariantReserve                // binary markets: reserve != shares x payout
	ReasonInvariantCostSum                // binary markets: reserve + pnl pool != sum of cost
	ReasonInvariantShares                 // binary markets: YES shares != NO shares
	ReasonInvariantOversold               // binary markets: a position's pending sell above its volume
	reasonCount
)

var reasonNames = [reasonCount]string{"", "INVARIANT_BALANCE", "NEGATIVE_BALANCE", "ORDERBOOK_DESYNC",
	"RECOVERY_FAILED", "CLEARING_ERROR", "MANUAL_HALT", "INVARIANT_RESERVE", "INVARIANT_COST_SUM", "INVARIANT_SHARES", "INVARIANT_OVERSOLD"}

func (r BreakerReason) String() string { return enumName(reasonNames[:], uint8(r)) }

// Valid reports whether r names a reason (ReasonNone does not).
func (r BreakerReason) Valid() bool { return r > ReasonNone && r < reasonCount }

// BreakerReasons returns every reason, in value order.
func BreakerReasons() []BreakerReason {
	out := make([]BreakerReason, 0, reasonCount-1)
	for r := ReasonNone + 1; r < reasonCount; r++ {
		out = append(out, r)
	}
	return out
}

// reasonOf is the breaker reason of a spot violation detail.
func reasonOf(detail uint8) BreakerReason {
	switch detail {
	case ViolNegativeBalance:
		return ReasonNegativeBalance
	case ViolConservation, ViolFrozenMismatch:
		return ReasonInvariantBalance
	case ViolOrderAccounting:
		return ReasonClearingError
	case ViolShares:
		return ReasonInvariantShares
	case ViolReserve:
		return ReasonInvariantReserve
	case ViolCostSum:
		return ReasonInvariantCostSum
	case ViolOversold:
		return ReasonInvariantOversold
	case ViolPending:
		return ReasonInvariantBalance
	}
	return ReasonOrderbookDesync
}

// ResumeRebuild, in a KindResumeMarket's Flags, rebuilds the book's level
// totals and counts from its orders before the check (the operator's
// cancel_all resolution).
const ResumeRebuild uint8 = 0x80

// MaxCancelSlice bounds the orders one KindCancelAll cancels, so a long
// operation never stalls the processor: the operator tool submits slices.
const MaxCancelSlice = 10_000

// tripMarket halts m for reason (a no-op if it is halted already: the first
// reason stands until an operator resolves it).
func (p *Processor) tripMarket(m *market, reason BreakerReason, user UserID) {
	if m.status == MarketHalted {
		return
	}
	if m.status == MarketDraft {
		m.bin.after = MarketDraft // only binary markets are ever DRAFT
	}
	m.status, m.haltReason, m.haltSeq = MarketHalted, reason, p.lastSeq
	code := CodeInvariantViolation
	if reason == ReasonManualHalt {
		code = OK
	}
	p.emit(Event{Kind: EvMarketHalted, Market: m.id, Detail: uint8(reason), Code: code, User: user})
}

// tripCore halts the whole core for reason (a no-op if it is halted).
func (p *Processor) tripCore(reason BreakerReason, user UserID) {
	if p.coreHalt != ReasonNone {
		return
	}
	p.coreHalt, p.coreHaltSeq = reason, p.lastSeq
	p.emit(Event{Kind: EvCoreHalted, Code: CodeInvariantViolation, Detail: uint8(reason), User: user})
}

// trip halts market id (0 = the core) for reason.
func (p *Processor) trip(id MarketID, reason BreakerReason, user UserID) {
	if id == 0 {
		p.tripCore(reason, user)
	} else if m := p.marketOf(id); m != nil {
		p.tripMarket(m, reason, user)
	}
}

// haltMarket is the operator's manual halt (MANUAL_HALT).
func (p *Processor) haltMarket(c *Command) Code {
	m := p.marketOf(c.Market)
	if m == nil {
		return CodeInvalidMarket
	}
	p.tripMarket(m, ReasonManualHalt, c.User)
	return OK
}

// breakerTrip applies a trip decided outside the processor (the periodic
// check on a replica, recovery): trusted as given, so the processor never
// runs the full check itself.
func (p *Processor) breakerTrip(c *Command) Code {
	r := BreakerReason(c.Flags)
	if !r.Valid() {
		return CodeInvalidCommand
	}
	if c.Market != 0 && p.marketOf(c.Market) == nil {
		return CodeInvalidMarket
	}
	p.trip(c.Market, r, c.User)
	return OK
}

// resumeMarket moves a market to Flags' status: out of HALTED (a breaker
// resolution: only while the core is not halted and only if the market's
// own checks pass, after rebuilding its level totals with ResumeRebuild),
// or from SUSPENDED to ACTIVE.
func (p *Processor) resumeMarket(c *Command) Code {
	m := p.marketOf(c.Market)
	if m == nil {
		return CodeInvalidMarket
	}
	target := MarketStatus(c.Flags &^ ResumeRebuild)
	rebuild := c.Flags&ResumeRebuild != 0
	if target != MarketActive && target != MarketSuspended {
		return CodeInvalidStatus
	}
	if m.status != MarketHalted && m.status != MarketSuspended {
		return CodeNotHalted // resume leaves HALTED or SUSPENDED only (suspend is its own command)
	}
	if m.status == MarketHalted && m.bin != nil && m.bin.after != 0 {
		target = m.bin.after // a resolved or voided market returns to settling, never to trading; a DRAFT one to DRAFT
	}
	if !canMove(m.status, target) {
		return CodeNotHalted
	}
	if m.status == MarketHalted {
		// The order-level checks do not depend on the totals a rebuild
		// replaces, so the command is validated before anything changes.
		if !p.bookOK(m, !rebuild) || (m.bin != nil && len(p.checkBinary(m, nil)) != 0) {
			return CodeInvariantViolation
		}
		if rebuild {
			p.rebuildBook(m)
		}
	} else if rebuild {
		return CodeInvalidCommand
	}
	m.status, m.haltReason, m.haltSeq = target, ReasonNone, 0
	if target == MarketDraft {
		m.bin.after = 0 // back where it was: activate opens it, a later halt returns to trading
	}
	p.emit(Event{Kind: EvMarketResumed, Market: m.id, Detail: uint8(target), User: c.User})
	return OK
}

// resumeCore lifts a core halt if the full check finds nothing outside
// markets that are halted themselves.
func (p *Processor) resumeCore(c *Command) Code {
	if p.coreHalt == ReasonNone {
		return CodeNotHalted
	}
	for _, v := range p.CheckInvariants() {
		if m := p.marketOf(v.Market); m == nil || m.status != MarketHalted {
			return CodeInvariantViolation
		}
	}
	p.coreHalt, p.coreHaltSeq = ReasonNone, 0
	p.emit(Event{Kind: EvCoreResumed, User: c.User})
	return OK
}

// cancelAll cancels up to c.Qty resting orders of a HALTED or SUSPENDED
// market (best levels first, FIFO within a level), returning their frozen
// funds. It walks the orders themselves, never the level totals, which may
// be what broke. EvResult's Qty is how many it cancelled: fewer than asked
// means the book is empty.
func (p *Processor) cancelAll(c *Command) Code {
	m := p.marketOf(c.Market)
	if m == nil {
		return CodeInvalidMarket
	}
	if c.Qty < 1 || c.Qty > MaxCancelSlice {
		return CodeInvalidQuantity
	}
	if m.status == MarketActive {
		return CodeNotHalted
	}
	n := Units(0)
	for _, s := range [2]*bookSide{&m.bids, &m.asks} {
		for n < c.Qty && len(s.levels) > 0 {
			li := len(s.levels) - 1
			if oi := s.levels[li].head; oi >= 0 {
				p.evict(m, s, li, oi)
				p.cancelResting(m, oi, CodeCancelledByOperator)
				n++
			}
			if s.levels[li].head < 0 {
				s.levels = s.levels[:li]
			}
		}
	}
	p.res.filled = n
	return OK
}

// evict takes order oi, the head of level li, off the book without
// trusting the level's totals (cancelAll): the level goes when its FIFO is
// empty.
func (p *Processor) evict(m *market, s *bookSide, li int, oi int32) {
	lv := &s.levels[li]
	o := &p.pool.slots[oi]
	lv.head = o.next
	if o.next >= 0 {
		p.pool.slots[o.next].prev = -1
	} else {
		lv.tail = -1
	}
	lv.count--
	lv.qty -= o.remaining()
	o.inBook, o.prev, o.next = false, -1, -1
	m.orders--
	p.accounts[o.acct].openOrders--
	p.orderIdx.del(uint64(o.id))
	if o.hasKey {
		delete(p.clientIdx, clientKey{o.user, o.key})
	}
}

// rebuildBook recomputes every level's total and count, and the market's
// order count, from the orders linked in it.
func (p *Processor) rebuildBook(m *market) {
	m.orders = 0
	for _, s := range [2]*bookSide{&m.bids, &m.asks} {
		for li := range s.levels {
			lv := &s.levels[li]
			lv.qty, lv.count = 0, 0
			for oi := lv.head; oi >= 0; oi = p.pool.slots[oi].next {
				lv.qty += p.pool.slots[oi].remaining()
				lv.count++
			}
			m.orders += lv.count
		}
	}
}

// BreakerState is a halt in force.
type BreakerState struct {
	Reason BreakerReason // ReasonNone: not halted
	Since  Seq           // the seq of the command that tripped it
}

// CoreBreaker returns the core's halt, if any.
func (p *Processor) CoreBreaker() BreakerState {
	return BreakerState{Reason: p.coreHalt, Since: p.coreHaltSeq}
}
