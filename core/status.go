package core

// The market status state machine. Every status change of a market goes
// through setStatus, which refuses a transition this table does not list:
//
//	ACTIVE    --trip-->    HALTED      (circuit breaker, any BreakerReason)
//	SUSPENDED --trip-->    HALTED
//	HALTED    --resolve--> ACTIVE | SUSPENDED   (the market's full check passes)
//	SUSPENDED --resume-->  ACTIVE
//
// Binary markets add their lifecycle (binary.go; spot markets never enter
// these states):
//
//	DRAFT     --activate--> ACTIVE          DRAFT --void--> VOIDED
//	ACTIVE    --suspend-->  SUSPENDED       (also for spot markets)
//	ACTIVE | SUSPENDED --resolve--> RESOLVED (settling) --last settle slice--> SETTLED
//	ACTIVE | SUSPENDED --void-->    VOIDED (settling)   --last settle slice--> VOIDED
//	DRAFT | RESOLVED | SETTLED | VOIDED --trip--> HALTED --resolve--> back to that state
//	                                      (never to trading: binaryMarket.after)

// marketEdges[from] is the set of statuses a market may move to from from.
var marketEdges = [...][]MarketStatus{
	MarketActive:    {MarketHalted, MarketSuspended, MarketResolved, MarketVoided},
	MarketHalted:    {MarketActive, MarketSuspended, MarketResolved, MarketSettled, MarketVoided, MarketDraft},
	MarketSuspended: {MarketHalted, MarketActive, MarketResolved, MarketVoided},
	MarketDraft:     {MarketActive, MarketVoided, MarketHalted},
	MarketResolved:  {MarketSettled, MarketHalted},
	MarketSettled:   {MarketHalted},
	MarketVoided:    {MarketHalted},
}

// canMove reports whether a market may go from one status to another.
func canMove(from, to MarketStatus) bool {
	if int(from) >= len(marketEdges) {
		return false
	}
	for _, s := range marketEdges[from] {
		if s == to {
			return true
		}
	}
	return false
}

// validStatus reports whether s is a status a market can be in.
func validStatus(s MarketStatus) bool { return int(s) < len(marketEdges) }

// allowsOrders reports whether new orders and modifies are accepted, and if
// not, the refusal.
func (s MarketStatus) allowsOrders() Code {
	switch s {
	case MarketActive:
		return OK
	case MarketSuspended:
		return CodeMarketSuspended
	case MarketDraft:
		return CodeMarketNotOpen
	case MarketResolved, MarketSettled, MarketVoided:
		return CodeMarketClosed
	}
	return CodeMarketHalted
}

// allowsCancels reports whether users may cancel, and if not, the refusal
// (HALTED: the state must not change further until an operator resolves it).
func (s MarketStatus) allowsCancels() Code {
	switch s {
	case MarketActive, MarketSuspended, MarketResolved, MarketVoided:
		return OK // a resolved or voided market's orders go anyway: cancelling one early is harmless
	case MarketDraft, MarketSettled:
		return CodeOrderNotFound // no orders there
	}
	return CodeMarketHalted
}
