package core

// Fault injection through the sequence (KindFault, refused with
// UNKNOWN_COMMAND unless Config.AllowFaults): each fault corrupts one piece
// of state the way a bug or a bit flip would, past the per-command checks,
// so that only the full check (periodic, at recovery) can find it. They are
// journaled like any command, so replay reproduces the corruption. Binary
// markets add their own (shares, reserve, cost sum, oversold) as new values.

// Fault is a kind of injected corruption (KindFault.Flags). Values are part
// of the WAL: append only.
type Fault uint8

const (
	// FaultLevelDrift adds Amount to the total of the best level of Side in
	// Market (found by the full check as ORDERBOOK_DESYNC).
	FaultLevelDrift Fault = 1
	// FaultStrayFrozen moves Amount of User's Asset from available to
	// frozen, held by no order (INVARIANT_BALANCE).
	FaultStrayFrozen Fault = 2
	// FaultNegativeBalance moves Amount of User's available Asset to the fee
	// account, below zero if the user had less (NEGATIVE_BALANCE).
	FaultNegativeBalance Fault = 3
	// Binary markets (binary_fault.go), each breaking one invariant:
	FaultBinaryShares   Fault = 4 // User gains Amount NO shares from nothing (INVARIANT_SHARES)
	FaultBinaryReserve  Fault = 5 // Amount moves from the reserve to the pnl pool (INVARIANT_RESERVE)
	FaultBinaryCostSum  Fault = 6 // User's YES cost sum and the running sum grow by Amount (INVARIANT_COST_SUM)
	FaultBinaryOversold Fault = 7 // User's YES pending sell set to its volume + Amount (INVARIANT_OVERSOLD)
)

func (p *Processor) fault(c *Command) Code {
	if !p.cfg.AllowFaults {
		return CodeUnknownCommand
	}
	return p.InjectFault(c)
}

// InjectFault applies the corruption c describes (a KindFault command) to
// the state, emitting BALANCE events for balances it changes (so a ledger
// derived from events still sums to the balances). The sequenced path is
// KindFault; tests call it directly to build a state that breaks invariants
// without a WAL record of it (a snapshot damaged in memory).
func (p *Processor) InjectFault(c *Command) Code {
	if c.Amount <= 0 {
		return CodeInvalidAmount
	}
	switch Fault(c.Flags) {
	case FaultLevelDrift:
		m := p.marketOf(c.Market)
		if m == nil {
			return CodeInvalidMarket
		}
		if c.Side != Buy && c.Side != Sell {
			return CodeInvalidSide
		}
		s := m.side(c.Side)
		bi := s.best()
		if bi < 0 {
			return CodeOrderNotFound
		}
		q, ok := addUnits(s.levels[bi].qty, c.Amount)
		if !ok {
			return CodeOverflow
		}
		s.levels[bi].qty = q
		return OK
	case FaultStrayFrozen, FaultNegativeBalance:
		if c.Asset == 0 || c.Asset > MaxAssets || !p.assets[c.Asset].configured {
			return CodeInvalidAsset
		}
		a := p.accountIdx(c.User)
		if a < 0 || c.User == FeeUser {
			return CodeAccountNotFound
		}
		if Fault(c.Flags) == FaultStrayFrozen {
			p.poke(a, c.Asset, -c.Amount, c.Amount)
			return OK
		}
		p.poke(a, c.Asset, -c.Amount, 0)
		p.poke(feeAcct, c.Asset, c.Amount, 0)
		return OK
	case FaultBinaryShares, FaultBinaryReserve, FaultBinaryCostSum, FaultBinaryOversold:
		return p.injectBinaryFault(c)
	}
	return CodeInvalidCommand
}

// poke changes a balance like move but past every check: no overflow or
// sign test and no conservation check after the command.
func (p *Processor) poke(a int32, asset AssetID, dAvail, dFrozen Units) {
	b := p.balanceRef(a, asset)
	b.Avail += dAvail
	b.Frozen += dFrozen
	p.assets[asset].total += dAvail + dFrozen
	p.emit(Event{Kind: EvBalance, User: p.accounts[a].id, Asset: asset, DAvail: dAvail, DFrozen: dFrozen})
}
