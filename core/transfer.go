package core

// The processed-ops limits the code reads (MaxProcessedOps and the
// reserve above it); variables only so that tests can reach them with a
// few records.
var (
	opsSoftLimit = MaxProcessedOps
	opsHardLimit = MaxProcessedOps + OpsReserve
)

// opKey identifies a processed spot transfer operation or adjustment: the same
// req_id may appear once as a withdraw and once as its refund.
type opKey struct {
	kind Kind
	key  Key
}

// opRecord is the first result of an operation; a repeat returns it unchanged.
type opRecord struct {
	user   UserID
	asset  AssetID
	amount Units
	code   Code
	flags  uint8 // the command's Flags (AdjustFrozen)
}

// AdjustFrozen, in a KindAdjust's Flags, applies the adjustment to the
// frozen balance instead of the available one: the operator's repair of
// frozen funds no order holds (or of an order holding too little). It
// counts as an adjustment like any other (credited/debited, AdjustedTotal).
const AdjustFrozen uint8 = 1

// opEntry is one processed operation. The records live in Processor.opLog,
// in insertion order, and the ops map only indexes them, so a snapshot
// walks the slice without a map lookup per op (which cost ~70% of
// AppendSnapshot when the map held the records).
type opEntry struct {
	k opKey
	r opRecord
}

// op returns the first result of operation k, if it was processed.
func (p *Processor) op(k opKey) (opRecord, bool) {
	i, ok := p.ops[k]
	if !ok {
		return opRecord{}, false
	}
	return p.opLog[i].r, true
}

// recordOp adds operation k with its first result; k must be new and
// liveOps() < MaxProcessedOps+OpsReserve (opLog then fits an int32: it is
// compacted before it holds as many forgotten entries as live ones).
func (p *Processor) recordOp(k opKey, r opRecord) {
	p.ops[k] = int32(len(p.opLog))
	p.opLog = append(p.opLog, opEntry{k, r})
}

// liveOps is the number of processed ops remembered.
func (p *Processor) liveOps() int { return len(p.opLog) - p.opsDead }

// forgetOps forgets the spot deposit, withdraw and refund records of req_id
// c.Key. The transfer service issues it once that transfer is terminal in
// Postgres (never by age alone): no retry of its operations can come any
// more, and a refund no longer needs its withdraw. Adjustment refs are
// never forgotten (AdjustedTotal is derived from them). Forgetting nothing
// is OK.
func (p *Processor) forgetOps(c *Command) Code {
	if c.Key.IsZero() || !c.Key.canonical() {
		return CodeInvalidKey
	}
	n := 0
	for _, kind := range [...]Kind{KindSpotWithdraw, KindSpotDeposit, KindSpotRefund} {
		k := opKey{kind, c.Key}
		if i, ok := p.ops[k]; ok {
			delete(p.ops, k)
			p.opLog[i].k.kind = 0
			p.opsDead++
			n++
		}
	}
	if n > 0 {
		p.emit(Event{Kind: EvOpsForgotten, Key: c.Key, Qty: Units(n)})
		if p.opsDead >= 1024 && p.opsDead*2 >= len(p.opLog) {
			p.compactOps()
		}
	}
	return OK
}

// compactOps drops forgotten entries from opLog and re-indexes the rest
// (amortized O(1) per forget: it runs once half the log is forgotten).
func (p *Processor) compactOps() {
	live := p.opLog[:0]
	for _, e := range p.opLog {
		if e.k.kind != 0 {
			p.ops[e.k] = int32(len(live))
			live = append(live, e)
		}
	}
	clear(p.opLog[len(live):])
	p.opLog, p.opsDead = live, 0
}

// transfer applies a spot deposit, withdraw, refund or an operator
// adjustment. Each is idempotent by (kind, key): a repeat with the same
// parameters returns the first result (Flags=1 on its EvTransfer) and changes
// nothing; a repeat with other parameters is REQ_ID_CONFLICT. Explicit
// failures (INSUFFICIENT_BALANCE, ACCOUNT_FROZEN, ...) are recorded too, so a
// retried withdraw can never succeed after its first answer was a failure.
func (p *Processor) transfer(c *Command) Code {
	if c.Key.IsZero() || !c.Key.canonical() {
		return CodeInvalidKey
	}
	if c.Asset == 0 || c.Asset > MaxAssets || !p.assets[c.Asset].configured {
		return CodeInvalidAsset
	}
	if c.Amount == 0 || (c.Kind != KindAdjust && c.Amount < 0) || c.Amount == -MaxUnits-1 {
		return CodeInvalidAmount
	}
	if c.Flags != 0 && (c.Kind != KindAdjust || c.Flags != AdjustFrozen) {
		return CodeInvalidCommand
	}
	k := opKey{c.Kind, c.Key}
	if r, ok := p.op(k); ok {
		if r.user != c.User || r.asset != c.Asset || r.amount != c.Amount || r.flags != c.Flags {
			return CodeReqIDConflict
		}
		p.emit(Event{Kind: EvTransfer, CmdKind: c.Kind, User: c.User, Asset: c.Asset, Amount: c.Amount,
			Key: c.Key, Code: r.code, Flags: 1})
		return r.code
	}
	if p.liveOps() >= opsHardLimit {
		return CodeTooManyOps // not even a refusal fits: not recorded, the caller retries
	}
	code := p.checkTransfer(c)
	if code == CodeInvalidUser {
		return code // not recorded: nothing was decided about this req_id
	}
	if code == OK && p.coreHalt != ReasonNone && c.Kind != KindAdjust {
		if c.Kind == KindSpotRefund {
			// Not recorded: a refund undoes a withdraw whose transfer is
			// compensating, so it must happen once the core is resolved;
			// recording the refusal would refuse every retry forever.
			return CodeCoreHalted
		}
		code = CodeCoreHalted // recorded: the transfer compensates or fails instead of retrying
	}
	if code == OK && p.liveOps() >= opsSoftLimit && (c.Kind == KindSpotDeposit || c.Kind == KindSpotWithdraw) {
		code = CodeTooManyOps
	}
	p.recordOp(k, opRecord{user: c.User, asset: c.Asset, amount: c.Amount, code: code, flags: c.Flags})
	if code == OK {
		p.applyTransfer(c)
	}
	p.emit(Event{Kind: EvTransfer, CmdKind: c.Kind, User: c.User, Asset: c.Asset, Amount: c.Amount,
		Key: c.Key, Code: code})
	return code
}

// checkTransfer decides the outcome without mutating anything.
func (p *Processor) checkTransfer(c *Command) Code {
	if c.User == FeeUser && c.Kind != KindAdjust {
		return CodeInvalidUser
	}
	a := p.accountIdx(c.User)
	credit := c.Amount > 0 && c.Kind != KindSpotWithdraw
	if credit {
		if a < 0 && !p.canCreateAccount(c.User) {
			return CodeTooManyUsers
		}
		if a >= 0 && c.Kind == KindSpotDeposit {
			switch p.accounts[a].status {
			case Disabled:
				return CodeAccountDisabled
			}
		}
		if c.Kind == KindSpotRefund {
			w, ok := p.op(opKey{KindSpotWithdraw, c.Key})
			if !ok || w.code != OK || w.user != c.User || w.asset != c.Asset || w.amount != c.Amount {
				return CodeRefundWithoutWithdraw
			}
		}
		st := &p.assets[c.Asset]
		if _, ok := addUnits(st.credited, c.Amount); !ok {
			return CodeOverflow
		}
		if _, ok := addUnits(st.total, c.Amount); !ok {
			return CodeOverflow
		}
		return OK
	}
	// Debit: withdraw, or a negative adjustment.
	amt := c.Amount
	if amt < 0 {
		amt = -amt
	}
	if a < 0 {
		return CodeInsufficientBalance
	}
	if c.Kind == KindSpotWithdraw {
		switch p.accounts[a].status {
		case Frozen:
			return CodeAccountFrozen
		case Disabled:
			return CodeAccountDisabled
		}
	}
	if b := p.balance(a, c.Asset); (c.Flags&AdjustFrozen == 0 && b.Avail < amt) || (c.Flags&AdjustFrozen != 0 && b.Frozen < amt) {
		return CodeInsufficientBalance
	}
	if _, ok := addUnits(p.assets[c.Asset].debited, amt); !ok {
		return CodeOverflow
	}
	return OK
}

func (p *Processor) applyTransfer(c *Command) {
	st := &p.assets[c.Asset]
	if c.Kind == KindAdjust {
		st.adjusted += c.Amount // |adjusted| <= credited + debited: no overflow
	}
	a, d := p.accountIdx(c.User), c.Amount
	if c.Amount > 0 && c.Kind != KindSpotWithdraw {
		a = p.ensureAccount(c.User)
		st.credited += c.Amount
	} else {
		if d > 0 {
			d = -d // a withdraw's amount is positive
		}
		st.debited -= d
	}
	if c.Flags&AdjustFrozen != 0 {
		p.move(a, c.Asset, 0, d)
	} else {
		p.move(a, c.Asset, d, 0)
	}
}
