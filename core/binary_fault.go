package core

// injectBinaryFault applies one of the binary faults (fault.go) to market
// c.Market, past every per-command check: only the full check (or the next
// command that touches the market) finds it.
func (p *Processor) injectBinaryFault(c *Command) Code {
	m, code := p.binaryOf(c)
	if code != OK {
		return code
	}
	b := m.bin
	if Fault(c.Flags) == FaultBinaryReserve {
		if b.reserve < c.Amount {
			return CodeInvalidAmount
		}
		b.reserve -= c.Amount
		b.pnlPool += c.Amount // the quote asset's total is unchanged: only the reserve is wrong
		return OK
	}
	a := p.accountIdx(c.User)
	if a < 0 {
		return CodeAccountNotFound
	}
	i := b.positionOf(a)
	if i < 0 {
		return CodeAccountNotFound
	}
	ps := &b.pos[i]
	switch Fault(c.Flags) {
	case FaultBinaryShares:
		ps.noVol += c.Amount
		b.noShares += c.Amount
	case FaultBinaryCostSum:
		ps.yesCost += c.Amount
		b.costSum += c.Amount
	case FaultBinaryOversold:
		ps.yesPending = ps.yesVol + c.Amount
	}
	return OK
}
