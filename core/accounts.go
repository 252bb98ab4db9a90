package core

// Balance is one user's spot holding of one asset, in the asset's Units.
// Invariant: Avail >= 0, Frozen >= 0, Frozen == what the user's open orders hold.
type Balance struct {
	Avail  Units
	Frozen Units
}

// account is a user's spot account. Owned by the processor goroutine.
type account struct {
	id         UserID
	status     AccountStatus
	openOrders int32     // resting orders, all markets; <= MaxOpenOrdersPerUser
	bal        []Balance // indexed by AssetID; grown on first credit of an asset
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
	if i, ok := p.userIdx[u]; ok {
		return i
	}
	return -1
}

// ensureAccount returns the index of user's account, creating it. The caller
// has checked p.canCreateAccount when the account might not exist.
func (p *Processor) ensureAccount(u UserID) int32 {
	if i, ok := p.userIdx[u]; ok {
		return i
	}
	i := int32(len(p.accounts))
	p.accounts = append(p.accounts, account{id: u})
	p.userIdx[u] = i
	return i
}

func (p *Processor) canCreateAccount(u UserID) bool {
	_, ok := p.userIdx[u]
	return ok || len(p.accounts) < MaxUsers
}

// balance returns the balance of account a in asset (zero if never credited).
func (p *Processor) balance(a int32, asset AssetID) Balance {
	b := p.accounts[a].bal
	if int(asset) < len(b) {
		return b[asset]
	}
	return Balance{}
}

// move changes account a's balance of asset by (dAvail, dFrozen), keeps the
// asset's running total, and emits a BALANCE event. Callers validated the
// command first; a negative or overflowing result here is a bug, recorded as a
// balance-level invariant violation (the core halts after this command).
func (p *Processor) move(a int32, asset AssetID, dAvail, dFrozen Units) {
	if dAvail == 0 && dFrozen == 0 {
		return
	}
	acc := &p.accounts[a]
	if int(asset) >= len(acc.bal) {
		nb := make([]Balance, int(asset)+1)
		copy(nb, acc.bal)
		acc.bal = nb
	}
	b := &acc.bal[asset]
	av, ok1 := addUnits(b.Avail, dAvail)
	fr, ok2 := addUnits(b.Frozen, dFrozen)
	if !ok1 || !ok2 || av < 0 || fr < 0 {
		p.violate(0, asset, ViolNegativeBalance)
	}
	b.Avail, b.Frozen = av, fr
	st := &p.assets[asset]
	st.total += dAvail + dFrozen
	p.touch(asset)
	e := p.newEvent(EvBalance)
	e.User, e.Asset, e.DAvail, e.DFrozen = acc.id, asset, dAvail, dFrozen
}

// touch records that asset's conservation must be checked after this command.
func (p *Processor) touch(asset AssetID) {
	if p.touchedAssets&(1<<(asset-1)) == 0 {
		p.touchedAssets |= 1 << (asset - 1)
	}
}
