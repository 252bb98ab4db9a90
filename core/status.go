package core

// The market status state machine. Every status change of a market goes
// through setStatus, which refuses a transition this table does not list:
//
//	ACTIVE    --trip-->    HALTED      (circuit breaker, any BreakerReason)
//	SUSPENDED --trip-->    HALTED
//	HALTED    --resolve--> ACTIVE | SUSPENDED   (the market's full check passes)
//	SUSPENDED --resume-->  ACTIVE
//
// Binary markets (a later issue) add their lifecycle states (DRAFT,
// RESOLVED, SETTLED, VOIDED) as new MarketStatus values, rows here and
// cases in allowsOrders / allowsCancels; the breaker edges stay as they are.

// marketEdges[from] is the set of statuses a market may move to from from.
var marketEdges = [...][]MarketStatus{
	MarketActive:    {MarketHalted},
	MarketHalted:    {MarketActive, MarketSuspended},
	MarketSuspended: {MarketHalted, MarketActive},
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
	}
	return CodeMarketHalted
}

// allowsCancels reports whether users may cancel, and if not, the refusal
// (HALTED: the state must not change further until an operator resolves it).
func (s MarketStatus) allowsCancels() Code {
	if s == MarketActive || s == MarketSuspended {
		return OK
	}
	return CodeMarketHalted
}
