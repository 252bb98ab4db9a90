package core

// The transfer service's commands (p2p.go). Each validates everything
// first, in the spec's check order, and only then mutates.
//
// Command fields:
//
//	KindP2PCreateUser  User = id (0: allocate from P2PUserBase up), Text = handle,
//	                   Asset, Amount = initial credit (>= 0)
//	KindP2PTransfer    User = sender, OrderID = the recipient's UserID, Asset, Amount > 0,
//	                   Key = requestId (optional), Qty = hold in ns (0..MaxP2PHold)
//	KindP2PCancel      User = caller, OrderID = transfer id, Flags = P2PCancelAdmin or 0
//	KindP2PTick        nothing: executes what is due at the command's time
//	KindP2PForget      Price = cutoff (unix ns): forgets every finished transfer with
//	                   doneAt <= cutoff; result Qty = how many
//
// Events: EvP2PUser (User, Asset, Amount = initial, Fee = the user's balance
// of the asset after it, available + frozen) and EvP2PTransfer
// (OrderID = transfer id, User = sender, OtherUser = recipient, Asset, Amount,
// Detail = the P2PStatus it is in now, Code = DEBIT_FAILED's reason, Price =
// executeAt, Key = requestId, Flags = 1 for a repeated requestId; when
// COMPLETED, Fee and Fee2 are the sender's and the recipient's balance of the
// asset after it, available + frozen), beside the EvBalance of every move.

func (p *Processor) p2pCreateUser(c *Command) Code {
	s := &p.p2p
	s.init()
	if !ValidP2PHandle(c.Text) {
		return CodeInvalidHandle
	}
	if c.Amount < 0 {
		return CodeInvalidBalance
	}
	if c.Asset == 0 || c.Asset > MaxAssets || !p.assets[c.Asset].configured {
		return CodeInvalidAsset
	}
	if c.Flags != 0 || c.OrderID != 0 || !c.Key.IsZero() || c.Qty != 0 {
		return CodeInvalidCommand
	}
	if _, dup := s.byHandle[c.Text]; dup {
		return CodeUserAlreadyExists
	}
	u := c.User
	if u != 0 {
		if u >= P2PUserBase {
			return CodeInvalidUser // the reserved range is allocated, never named
		}
		if _, dup := s.byID[u]; dup {
			return CodeUserAlreadyExists // one handle per id
		}
	} else {
		u = s.nextID
		for p.accountIdx(u) >= 0 {
			u++ // an account made there by another command: skip it
		}
	}
	if len(s.users) >= MaxP2PUsers || !p.canCreateAccount(u) {
		return CodeTooManyUsers
	}
	st := &p.assets[c.Asset]
	if _, ok := addUnits(st.credited, c.Amount); !ok {
		return CodeOverflow
	}
	if _, ok := addUnits(st.total, c.Amount); !ok {
		return CodeOverflow
	}
	if c.User == 0 {
		s.nextID = u + 1
	}
	a := p.ensureAccount(u)
	s.byHandle[c.Text] = int32(len(s.users))
	s.byID[u] = int32(len(s.users))
	s.users = append(s.users, P2PUser{ID: u, Handle: c.Text, Asset: c.Asset, Initial: c.Amount, CreatedAt: p.lastTime, Seq: c.Seq})
	if c.Amount > 0 { // an audited credit, counted as an adjustment
		st.credited += c.Amount
		st.adjusted += c.Amount
		p.move(a, c.Asset, c.Amount, 0)
	}
	b := p.balance(a, c.Asset)
	p.emit(Event{Kind: EvP2PUser, User: u, Asset: c.Asset, Amount: c.Amount, Fee: b.Avail + b.Frozen})
	return OK
}

func (p *Processor) p2pTransfer(c *Command) Code {
	s := &p.p2p
	s.init()
	from, to := c.User, UserID(c.OrderID)
	if c.Amount <= 0 {
		return CodeInvalidAmount
	}
	if c.Asset == 0 || c.Asset > MaxAssets || !p.assets[c.Asset].configured {
		return CodeInvalidAsset
	}
	if c.Qty < 0 || c.Qty > MaxP2PHold || c.Flags != 0 || !c.Key.canonical() {
		return CodeInvalidCommand
	}
	if from == to {
		return CodeSelfTransfer
	}
	if _, ok := s.byID[from]; !ok {
		return CodeSenderNotFound
	}
	if _, ok := s.byID[to]; !ok {
		return CodeRecipientNotFound
	}
	if !c.Key.IsZero() {
		if id, ok := s.reqs[p2pReq{from, c.Key}]; ok {
			t := s.transfers.at(id)
			if t.To != to || t.Amount != c.Amount || t.Asset != c.Asset {
				return CodeReqIDConflict
			}
			p.emitP2P(t, 1)
			p.res.orderID = OrderID(t.ID)
			return OK
		}
	}
	a := p.accountIdx(from)
	switch p.accounts[a].status {
	case Frozen:
		return CodeAccountFrozen
	case Disabled:
		return CodeAccountDisabled
	}
	if s.transfers.len() >= p2pTransferLimit {
		return CodeTooManyTransfers
	}
	if len(s.pending) >= p2pPendingLimit {
		return CodePendingTransfersFull
	}
	if s.pendingPer[from] >= p2pPerUserLimit {
		return CodeTooManyPendingTransfers
	}
	if p.balance(a, c.Asset).Avail < c.Amount {
		return CodeInsufficientBalance
	}
	executeAt, ok := addUnits(Units(p.lastTime), c.Qty)
	if !ok {
		return CodeOverflow
	}
	t := s.transfers.add(s.transfers.last+1, P2PTransfer{From: from, To: to, Asset: c.Asset,
		Amount: c.Amount, Status: P2PPending, CreatedAt: p.lastTime, ExecuteAt: int64(executeAt), ReqID: c.Key, heapIdx: -1})
	if !c.Key.IsZero() {
		s.reqs[p2pReq{from, c.Key}] = t.ID
	}
	s.push(t.ID)
	s.pendingPer[from]++
	s.link(t)
	p.move(a, c.Asset, -c.Amount, c.Amount)
	p.emitP2P(t, 0)
	p.res.orderID = OrderID(t.ID)
	return OK
}

func (p *Processor) p2pCancel(c *Command) Code {
	s := &p.p2p
	if c.Flags&^P2PCancelAdmin != 0 || c.Asset != 0 || c.Amount != 0 {
		return CodeInvalidCommand
	}
	id := uint64(c.OrderID)
	t := s.transfers.get(id)
	if t == nil {
		return CodeTransferNotFound // never made, or forgotten (finished long ago)
	}
	if t.From != c.User && c.Flags&P2PCancelAdmin == 0 {
		return CodeNotTransferSender
	}
	if t.Status != P2PPending {
		return CodeCannotCancelTransfer
	}
	if p.lastTime >= t.ExecuteAt {
		return CodeCancelWindowExpired
	}
	p.p2pFinish(id, P2PCancelled, OK)
	p.res.orderID = OrderID(t.ID)
	return OK
}

// p2pTick executes every PENDING transfer due at the command's time, up to
// MaxP2PExecPerTick, in (executeAt, id) order. res.filled reports how many.
func (p *Processor) p2pTick(c *Command) Code {
	if c.Flags != 0 || c.User != 0 || c.OrderID != 0 {
		return CodeInvalidCommand
	}
	s := &p.p2p
	n := 0
	for len(s.pending) > 0 && n < p2pExecPerTick {
		ti := s.pending[0]
		t := s.transfers.at(ti)
		if t.ExecuteAt > p.lastTime {
			break
		}
		reason := OK
		for _, u := range [2]UserID{t.From, t.To} {
			if st, _ := p.AccountStatusOf(u); st == Frozen {
				reason = CodeAccountFrozen
			} else if st == Disabled {
				reason = CodeAccountDisabled
			}
			if reason != OK {
				break
			}
		}
		if reason == OK {
			p.p2pFinish(ti, P2PCompleted, OK)
		} else {
			p.p2pFinish(ti, P2PDebitFailed, reason)
		}
		n++
	}
	p.res.filled = Units(n)
	return OK
}

// p2pFinish takes PENDING transfer ti to a terminal status: COMPLETED moves
// the hold to the recipient, the others release it.
func (p *Processor) p2pFinish(ti uint64, st P2PStatus, reason Code) {
	s := &p.p2p
	t := s.transfers.at(ti)
	s.remove(ti)
	if s.pendingPer[t.From]--; s.pendingPer[t.From] == 0 {
		delete(s.pendingPer, t.From)
	}
	t.Status, t.Reason, t.DoneAt = st, reason, p.lastTime
	s.done = append(s.done, ti)
	a := p.accountIdx(t.From)
	var e Event
	if st == P2PCompleted {
		b := p.ensureAccount(t.To)
		p.move(a, t.Asset, 0, -t.Amount)
		p.move(b, t.Asset, t.Amount, 0)
		fb, tb := p.balance(a, t.Asset), p.balance(b, t.Asset)
		e.Fee, e.Fee2 = fb.Avail+fb.Frozen, tb.Avail+tb.Frozen
	} else {
		p.move(a, t.Asset, t.Amount, -t.Amount)
	}
	p.emitP2PWith(t, 0, e.Fee, e.Fee2)
}

func (p *Processor) emitP2P(t *P2PTransfer, flags uint8) { p.emitP2PWith(t, flags, 0, 0) }

func (p *Processor) emitP2PWith(t *P2PTransfer, flags uint8, fromBal, toBal Units) {
	e := p.newEvent(EvP2PTransfer)
	e.OrderID, e.User, e.OtherUser, e.Asset, e.Amount = OrderID(t.ID), t.From, t.To, t.Asset, t.Amount
	e.Detail, e.Code, e.Price, e.Key, e.Flags = uint8(t.Status), t.Reason, Price(t.ExecuteAt), t.ReqID, flags
	e.Fee, e.Fee2 = fromBal, toBal
}

// p2pForget drops every finished transfer with DoneAt <= the cutoff
// (c.Price): its slot, its requestId (a repeat of it is a new transfer from
// then on), its place in both users' histories (counted in the user's
// forgot and forgotMax). DoneAt follows the sequence (the command time is
// clamped monotonic), so they are the front of s.done. res.filled reports
// how many. What it selects depends on the cutoff alone, never on the order
// of transfers finished at the same instant, so a restored state (whose
// done list is rebuilt sorted) forgets exactly what the live one did.
func (p *Processor) p2pForget(c *Command) Code {
	if c.Flags != 0 || c.User != 0 || c.OrderID != 0 || c.Asset != 0 || c.Amount != 0 || c.Qty != 0 || c.Price <= 0 {
		return CodeInvalidCommand
	}
	s := &p.p2p
	cutoff := int64(c.Price)
	n := 0
	for s.doneHead < len(s.done) {
		id := s.done[s.doneHead]
		t := s.transfers.at(id)
		if t.DoneAt > cutoff {
			break
		}
		s.doneHead++
		if !t.ReqID.IsZero() {
			delete(s.reqs, p2pReq{t.From, t.ReqID})
		}
		for _, u := range [2]UserID{t.From, t.To} {
			if i, ok := s.byID[u]; ok {
				usr := &s.users[i]
				usr.forgot++
				usr.forgotMax = max(usr.forgotMax, id)
			}
		}
		from, to := t.From, t.To
		s.transfers.forget(id) // zeroes *t
		s.unlink(from, id)
		s.unlink(to, id)
		n++
	}
	if s.doneHead == len(s.done) {
		s.done, s.doneHead = s.done[:0], 0
	} else if s.doneHead >= 1024 && s.doneHead*2 >= len(s.done) {
		s.done, s.doneHead = append(s.done[:0:0], s.done[s.doneHead:]...), 0
	}
	p.res.filled = Units(n)
	return OK
}

// unlink takes forgotten transfer id out of user u's history: at once at
// the front (the usual case: transfers finish roughly in id order), else as
// a tombstone, compacted once half the list is tombstones.
func (s *p2pState) unlink(u UserID, id uint64) {
	h := s.byUser[u]
	if h.ids[0] != id {
		if h.tomb++; h.tomb*2 > len(h.ids) {
			live := h.ids[:0]
			for _, x := range h.ids {
				if s.transfers.get(x) != nil {
					live = append(live, x)
				}
			}
			clear(h.ids[len(live):])
			h.ids, h.tomb = live, 0
		}
		return
	}
	h.ids = h.ids[1:]
	for len(h.ids) > 0 && h.tomb > 0 && s.transfers.get(h.ids[0]) == nil {
		h.ids, h.tomb = h.ids[1:], h.tomb-1
	}
	switch {
	case len(h.ids) == 0:
		delete(s.byUser, u)
	case cap(h.ids) >= 64 && len(h.ids)*4 < cap(h.ids):
		h.ids = append([]uint64(nil), h.ids...) // release the array's forgotten head
	}
}
