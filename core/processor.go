package core

import "strconv"

// Config holds processor options that are not part of the command stream.
type Config struct {
	// AllowDebugPanic makes KindDebugPanic panic inside apply (after a partial
	// mutation), so tests can prove that a poison command is discarded whole.
	// Off in production.
	AllowDebugPanic bool
	// AllowFaults accepts KindFault (fault.go): sequenced commands that
	// corrupt one piece of state, for the fault-injection suite. Off in
	// production (--enable-fault-injection).
	AllowFaults bool
}

// Processor is the single-threaded business-logic processor. Every method
// must be called from one goroutine (the driver's); nothing here is safe for
// concurrent use. Events returned by Apply are valid until the next call.
type Processor struct {
	cfg Config

	lastSeq     Seq           // seq of the last applied (or skipped) command
	lastTime    int64         // monotonic clamp of command time, unix ns
	nextOrderID OrderID       // next id to assign, starts at 1
	nextTradeID uint64        // next trade id, starts at 1
	coreHalt    BreakerReason // != ReasonNone: the core's breaker tripped; only the commands haltedAllowed lists apply
	coreHaltSeq Seq           // seq of the command that tripped it

	assets    [MaxAssets + 1]assetState // index 0 unused
	markets   [MaxMarkets + 1]*market   // nil = not configured
	accounts  []account                 // in creation order (canonical order for snapshots)
	balExt    [][]Balance               // per account: balances of assets inlineAssets+1.. (index asset-inlineAssets-1)
	userIdx   userIndex                 // user -> index into accounts
	pool      orderPool
	orderIdx  orderIndex            // resting order id -> pool index
	clientIdx map[clientKey]OrderID // (user, client order id) -> resting order id
	ops       map[opKey]int32       // processed transfer/adjust keys (the ProcessedTransferSet) -> index in opLog
	opLog     []opEntry             // the ops with their first results, in insertion order (canonical order for snapshots); forgotten ones have kind 0
	opsDead   int                   // forgotten entries still in opLog (compactOps removes them)

	// per-command scratch, reset by Apply
	events        []Event
	res           cmdResult
	touchedAssets uint64   // bit (asset-1) set when asset's balances moved
	touchedMarket MarketID // market whose book changed (at most one per command)
	// levelHint is 1 + the level index the last canAdd found for its price
	// (0 = none): placing an order searches its side once, in checkCapacity,
	// and insert checks the hint in O(1) instead of searching again. A stale
	// or foreign hint fails the check (bookSide.at) and insert searches.
	levelHint int
	// broken is the first per-command check that failed during this
	// command (rollback.go): finish panics with it.
	broken Rollback

	chk checkScratch // the full check's buffers, reused (not state)

	p2p p2pState // the transfer service (p2p.go)
}

// cmdResult is what the final EvResult of a command reports.
type cmdResult struct {
	orderID OrderID
	status  OrderStatus
	filled  Units
}

// New returns an empty processor whose next command must have Seq 1.
func New(cfg Config) *Processor {
	p := &Processor{
		cfg:         cfg,
		nextOrderID: 1,
		nextTradeID: 1,
		clientIdx:   make(map[clientKey]OrderID),
		ops:         make(map[opKey]int32),
	}
	p.ensureAccount(FeeUser)
	p.p2p.init()
	return p
}

// LastSeq is the seq of the last command applied or skipped.
func (p *Processor) LastSeq() Seq { return p.lastSeq }

// Halted reports whether the core's breaker is tripped (CoreBreaker says why).
func (p *Processor) Halted() bool { return p.coreHalt != ReasonNone }

// Apply applies one command and returns its events, the last of which is
// always EvResult. The command's Seq must be LastSeq()+1: a gap is a bug in
// the driver and panics.
func (p *Processor) Apply(c *Command) []Event {
	p.begin(c)
	code := p.dispatch(c)
	return p.finish(c, code)
}

func (p *Processor) begin(c *Command) {
	if c.Seq != p.lastSeq+1 {
		panic("core: command seq " + strconv.FormatUint(uint64(c.Seq), 10) +
			" does not follow " + strconv.FormatUint(uint64(p.lastSeq), 10))
	}
	p.lastSeq = c.Seq
	if c.Time > p.lastTime {
		p.lastTime = c.Time
	}
	p.events = p.events[:0]
	p.res = cmdResult{}
	p.touchedAssets = 0
	p.touchedMarket = 0
	p.levelHint = 0
}

func (p *Processor) finish(c *Command, code Code) []Event {
	p.checkCheap()
	if p.broken.Reason != ReasonNone {
		rb := p.broken
		p.broken = Rollback{}
		panic(&rb)
	}
	e := p.newEvent(EvResult)
	e.CmdKind, e.Code, e.User, e.Market = c.Kind, code, c.User, c.Market
	e.OrderID, e.Status, e.Qty, e.Key = p.res.orderID, p.res.status, p.res.filled, c.Key
	return p.events
}

func (p *Processor) dispatch(c *Command) Code {
	if p.coreHalt != ReasonNone && !haltedAllowed[c.Kind] {
		return CodeCoreHalted
	}
	switch c.Kind {
	case KindConfigAsset:
		return p.configAsset(c)
	case KindConfigMarket:
		return p.configMarket(c)
	case KindPlaceOrder:
		return p.placeOrder(c)
	case KindCancelOrder:
		return p.cancelOrder(c)
	case KindModifyOrder:
		return p.modifyOrder(c)
	case KindSpotDeposit, KindSpotWithdraw, KindSpotRefund, KindAdjust:
		return p.transfer(c)
	case KindSetAccountStatus:
		return p.setAccountStatus(c)
	case KindHaltMarket:
		return p.haltMarket(c)
	case KindResumeMarket:
		return p.resumeMarket(c)
	case KindTick:
		return p.tick(c)
	case KindSnapshot:
		p.emit(Event{Kind: EvSnapshotRequested})
		return OK
	case KindDebugPanic:
		return p.debugPanic(c)
	case KindBreakerTrip:
		return p.breakerTrip(c)
	case KindResumeCore:
		return p.resumeCore(c)
	case KindCancelAll:
		return p.cancelAll(c)
	case KindFault:
		return p.fault(c)
	case KindForgetOps:
		return p.forgetOps(c)
	case KindP2PCreateUser:
		return p.p2pCreateUser(c)
	case KindP2PTransfer:
		return p.p2pTransfer(c)
	case KindP2PCancel:
		return p.p2pCancel(c)
	case KindP2PTick:
		return p.p2pTick(c)
	case KindConfigBinary:
		return p.configBinary(c)
	case KindActivate:
		return p.activate(c)
	case KindSuspendMarket:
		return p.suspendMarket(c)
	case KindResolve:
		return p.resolve(c)
	case KindVoid:
		return p.void(c)
	case KindSettle:
		return p.settle(c)
	case KindArchive:
		return p.archive(c)
	case KindP2PForget:
		return p.p2pForget(c)
	}
	return CodeUnknownCommand
}

// haltedAllowed lists the commands a halted core still applies (spec 004
// §5.3: the state must not change further): the breaker's own commands,
// operator repairs (adjustments by reference, account status), config of new
// instruments, bookkeeping, and spot transfers, which answer a repeated
// req_id from its record and refuse a new one with CORE_HALTED themselves.
// Trading, cancels and market resolutions wait for the core's resolution.
var haltedAllowed = [kindMax + 1]bool{
	KindConfigAsset: true, KindConfigMarket: true, KindSpotDeposit: true, KindSpotWithdraw: true,
	KindSpotRefund: true, KindAdjust: true, KindSetAccountStatus: true, KindHaltMarket: true,
	KindTick: true, KindSnapshot: true, KindBreakerTrip: true, KindResumeCore: true, KindFault: true,
	KindForgetOps: true, KindP2PForget: true, KindConfigBinary: true,
}

// emit appends an event stamped with the current command's seq and time.
func (p *Processor) emit(e Event) {
	e.Seq = p.lastSeq
	e.Time = p.lastTime
	p.events = append(p.events, e)
}

// newEvent appends a zeroed event stamped with seq and time and returns it
// for the caller to fill in place (the hot paths: no temporary copy of a
// 170-byte struct). The pointer is valid until the next append.
func (p *Processor) newEvent(kind EventKind) *Event {
	n := len(p.events)
	if n < cap(p.events) {
		p.events = p.events[:n+1]
		p.events[n] = Event{}
	} else {
		p.events = append(p.events, Event{})
	}
	e := &p.events[n]
	e.Kind, e.Seq, e.Time = kind, p.lastSeq, p.lastTime
	return e
}

func (p *Processor) tick(c *Command) Code {
	if c.Flags&^TickFullCheck != 0 {
		return CodeInvalidCommand
	}
	if c.Flags&TickFullCheck != 0 {
		open, _ := p.UnhaltedViolations()
		for _, v := range open {
			p.violate(v)
		}
	}
	return OK
}

func (p *Processor) debugPanic(c *Command) Code {
	if !p.cfg.AllowDebugPanic {
		return CodeUnknownCommand
	}
	// Mutate first, so a driver that fails to discard the state is caught.
	a := p.ensureAccount(c.User)
	p.accounts[a].status = Disabled
	panic("core: debug panic at seq " + strconv.FormatUint(uint64(c.Seq), 10))
}
