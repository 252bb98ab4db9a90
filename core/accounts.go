package core

// Balance is one user's spot holding of one asset, in the asset's Units.
// Invariant: Avail >= 0, Frozen >= 0, Frozen == what the user's open orders hold.
type Balance struct {
	Avail  Units
	Frozen Units
}

// inlineAssets is how many assets (ids 1..inlineAssets) keep their balances
// inside the account itself: placing an order reads the status and a balance
// of the same account, and with the first assets inline that is one cache
// line (the struct is exactly 64 bytes) instead of two scattered ones.
// Balances of higher asset ids live in Processor.balExt.
const inlineAssets = 3

// account is a user's spot account. Owned by the processor goroutine.
type account struct {
	id         UserID
	status     AccountStatus
	openOrders int32                 // resting orders, all markets; <= MaxOpenOrdersPerUser
	inl        [inlineAssets]Balance // balances of assets 1..inlineAssets (inl[asset-1])
}

// assetState holds an asset's config and its conservation counters.
// Invariant: total == credited - debited == sum over accounts of Avail+Frozen.
type assetState struct {
	configured bool
	scale      uint8
	credited   Units // everything that ever entered SPOT (deposits, refunds, positive adjustments)
	debited    Units // everything that ever left SPOT (withdrawals, negative adjustments)
	total      Units // running sum of Avail+Frozen, maintained by every balance mutation
	// adjusted is the net of every applied operator adjustment (KindAdjust),
	// part of credited/debited. Derived state: not in snapshots (Restore
	// rebuilds it from the processed-ops set), so not in the state hash.
	adjusted Units
}

// feeAcct is the index of FeeUser's account: New creates it first and
// snapshots keep creation order, so it is always 0 (Restore checks).
const feeAcct int32 = 0

// accountIdx returns the index of user's account, or -1.
func (p *Processor) accountIdx(u UserID) int32 {
	if i, ok := p.userIdx.get(u); ok {
		return i
	}
	return -1
}

// ensureAccount returns the index of user's account, creating it. The caller
// has checked p.canCreateAccount when the account might not exist.
func (p *Processor) ensureAccount(u UserID) int32 {
	if i, ok := p.userIdx.get(u); ok {
		return i
	}
	i := int32(len(p.accounts))
	p.accounts = append(p.accounts, account{id: u})
	p.balExt = append(p.balExt, nil)
	p.userIdx.put(u, i)
	return i
}

func (p *Processor) canCreateAccount(u UserID) bool {
	_, ok := p.userIdx.get(u)
	return ok || len(p.accounts) < MaxUsers
}

// balance returns the balance of account a in asset (zero if never credited).
func (p *Processor) balance(a int32, asset AssetID) Balance {
	if i := int(asset) - 1; uint(i) < inlineAssets {
		return p.accounts[a].inl[i]
	}
	if e := p.balExt[a]; asset > inlineAssets && int(asset-inlineAssets-1) < len(e) {
		return e[asset-inlineAssets-1]
	}
	return Balance{}
}

// balanceRef returns account a's balance of asset (1..MaxAssets) for
// update, growing its overflow run on the first credit of a high asset id.
// asset 0 is never configured, and every caller passes an asset its command
// validated first; 0 would index -4 and panic (a poison command), never
// write a wrong balance.
func (p *Processor) balanceRef(a int32, asset AssetID) *Balance {
	if i := int(asset) - 1; uint(i) < inlineAssets {
		return &p.accounts[a].inl[i]
	}
	return p.balanceExtRef(a, asset)
}

// balanceExtRef is balanceRef for an asset above inlineAssets: out of line,
// so the inline path stays free of the growth call and its register spills.
//
//go:noinline
func (p *Processor) balanceExtRef(a int32, asset AssetID) *Balance {
	i := int(asset) - inlineAssets - 1
	e := p.balExt[a]
	if i >= len(e) {
		ne := make([]Balance, i+1)
		copy(ne, e)
		p.balExt[a], e = ne, ne
	}
	return &e[i]
}

// balanceSlots is one more than the highest asset id account a may hold a
// non-zero balance of: balance(a, asset) is zero for every asset at or above it.
func (p *Processor) balanceSlots(a int32) AssetID {
	return AssetID(inlineAssets + 1 + len(p.balExt[a]))
}

// move changes account a's balance of asset by (dAvail, dFrozen), keeps the
// asset's running total, and emits a BALANCE event. Callers validated the
// command first; a negative or overflowing result here is a bug: a failed
// balance-level check, so the command is rolled back (rollback.go).
func (p *Processor) move(a int32, asset AssetID, dAvail, dFrozen Units) {
	if dAvail|dFrozen == 0 {
		return
	}
	// balanceRef, inlined by hand: with its out-of-line call it is over
	// the inliner's budget, and move is on every fill's path.
	acc := &p.accounts[a]
	var b *Balance
	if i := int(asset) - 1; uint(i) < inlineAssets {
		b = &acc.inl[i]
	} else {
		b = p.balanceExtRef(a, asset)
	}
	av, fr := b.Avail+dAvail, b.Frozen+dFrozen
	// One test for "overflowed or went negative" on the hot path: an
	// overflowed sum differs in sign from both operands (see addUnits).
	if (b.Avail^av)&(dAvail^av)|(b.Frozen^fr)&(dFrozen^fr)|av|fr < 0 {
		av, fr = p.moveBroken(b, asset, dAvail, dFrozen)
	}
	b.Avail, b.Frozen = av, fr
	st := &p.assets[asset]
	st.total += dAvail + dFrozen
	p.touch(asset)
	e := p.newEvent(EvBalance)
	e.User, e.Asset, e.DAvail, e.DFrozen = acc.id, asset, dAvail, dFrozen
}

// moveBroken is move's cold path: the new balance overflowed or went
// negative. It records the failure and returns what move stores (0 for an
// overflowed field, as addUnits gives) until the command is discarded.
func (p *Processor) moveBroken(b *Balance, asset AssetID, dAvail, dFrozen Units) (Units, Units) {
	av, ok1 := addUnits(b.Avail, dAvail)
	fr, ok2 := addUnits(b.Frozen, dFrozen)
	if !ok1 || !ok2 || av < 0 || fr < 0 {
		p.fail(0, asset, ViolNegativeBalance)
	}
	return av, fr
}

// touch records that asset's conservation must be checked after this command.
func (p *Processor) touch(asset AssetID) {
	p.touchedAssets |= 1 << (asset - 1)
}
