package core

import (
	"cmp"
	"slices"
)

// The transfer service's section of a snapshot (version 5, after the ops):
//
//	p2p: nextID | users: count, then in creation order: id, handle (len, bytes), asset,
//	     initial, createdAt, seq, forgot, forgotMax
//	     last (the last transfer id made)
//	     transfers: count, then the retained ones by id: id - previous id, from, to, asset,
//	     amount, status (u8), reason, createdAt, executeAt, doneAt, requestId (key)
//
// Versions 3 and 4 had neither forgot, forgotMax nor last, and every
// transfer ever made, ids implicit (1, 2, ...).
//
// The pending heap, the requestId index, the per-sender pending counts, the
// per-user history and the finished list are derived from the transfers on
// restore (not stored, so not in the state hash: the heap's layout depends
// on history, its pop order does not; the finished list is rebuilt in
// (doneAt, id) order, and a forget selects by doneAt alone).

func (p *Processor) appendP2P(w *wbuf) {
	s := &p.p2p
	w.uv(uint64(s.nextID))
	w.uv(uint64(len(s.users)))
	for i := range s.users {
		w.pace()
		u := &s.users[i]
		w.uv(uint64(u.ID))
		w.uv(uint64(len(u.Handle)))
		w.raw([]byte(u.Handle))
		w.uv(uint64(u.Asset))
		w.sv(int64(u.Initial))
		w.sv(u.CreatedAt)
		w.uv(uint64(u.Seq))
		w.uv(u.forgot)
		w.uv(u.forgotMax)
	}
	w.uv(s.transfers.last)
	w.uv(uint64(s.transfers.len()))
	prev := uint64(0)
	s.transfers.each(func(t *P2PTransfer) {
		w.pace()
		w.uv(t.ID - prev)
		prev = t.ID
		w.uv(uint64(t.From))
		w.uv(uint64(t.To))
		w.uv(uint64(t.Asset))
		w.sv(int64(t.Amount))
		w.u8(uint8(t.Status))
		w.uv(uint64(t.Reason))
		w.sv(t.CreatedAt)
		w.sv(t.ExecuteAt)
		w.sv(t.DoneAt)
		w.key(t.ReqID)
	})
}

func (p *Processor) readP2P(r *rbuf, ver uint8) error {
	s := &p.p2p
	s.init()
	s.nextID = UserID(r.uv())
	n := r.uv()
	if n > MaxP2PUsers || n > uint64(len(r.b)) || s.nextID < P2PUserBase {
		return ErrSnapshot
	}
	// sized once: growing these maps and the slice by doubling was half of a
	// restore's time at 1M users (rehashing)
	s.byHandle, s.byID = make(map[string]int32, n), make(map[UserID]int32, n)
	s.users = slices.Grow(s.users, int(n))
	for ; n > 0 && r.err == nil; n-- {
		u := P2PUser{ID: UserID(r.uv())}
		hl := r.uv()
		if hl > MaxP2PHandleLen || hl > uint64(len(r.b)) {
			return ErrSnapshot
		}
		u.Handle = string(r.b[:hl])
		r.b = r.b[hl:]
		u.Asset, u.Initial, u.CreatedAt, u.Seq = AssetID(r.uv()), Units(r.sv()), r.sv(), Seq(r.uv())
		if ver >= 5 {
			u.forgot, u.forgotMax = r.uv(), r.uv()
		}
		// One map operation each, not a lookup and then an insert: a
		// duplicate leaves the map's length unchanged (and fails the
		// restore, so what it overwrote does not matter).
		nh, nid := len(s.byHandle), len(s.byID)
		s.byHandle[u.Handle] = int32(len(s.users))
		s.byID[u.ID] = int32(len(s.users))
		dupH, dupID := len(s.byHandle) == nh, len(s.byID) == nid
		if r.err != nil || dupH || dupID || !ValidP2PHandle(u.Handle) || u.Initial < 0 || (u.forgot == 0) != (u.forgotMax == 0) ||
			u.Asset == 0 || u.Asset > MaxAssets || !p.assets[u.Asset].configured || p.accountIdx(u.ID) < 0 {
			return ErrSnapshot
		}
		s.users = append(s.users, u)
		p.assets[u.Asset].adjusted += u.Initial
	}
	last := uint64(0)
	if ver >= 5 {
		last = r.uv()
	}
	n = r.uv()
	if n > MaxP2PTransfers || n > uint64(len(r.b)) {
		return ErrSnapshot
	}
	s.byUser = make(map[UserID]*p2pHist, min(n, uint64(len(s.users))))
	id := uint64(0)
	for ; n > 0 && r.err == nil; n-- {
		step := uint64(1)
		if ver >= 5 {
			step = r.uv()
		}
		if step == 0 || id+step < id {
			return ErrSnapshot
		}
		id += step
		t := P2PTransfer{From: UserID(r.uv()), To: UserID(r.uv()), Asset: AssetID(r.uv()),
			Amount: Units(r.sv()), Status: P2PStatus(r.u8()), Reason: Code(r.uv()), heapIdx: -1}
		t.CreatedAt, t.ExecuteAt, t.DoneAt, t.ReqID = r.sv(), r.sv(), r.sv(), r.key()
		_, okF := s.byID[t.From]
		_, okT := s.byID[t.To]
		if r.err != nil || !okF || !okT || t.Amount <= 0 || t.Status == 0 || t.Status > P2PCancelled ||
			t.Reason >= codeCount || t.Asset == 0 || t.Asset > MaxAssets || !p.assets[t.Asset].configured {
			return ErrSnapshot
		}
		tp := s.transfers.add(id, t)
		if !t.ReqID.IsZero() {
			k := p2pReq{t.From, t.ReqID}
			if _, dup := s.reqs[k]; dup {
				return ErrSnapshot
			}
			s.reqs[k] = id
		}
		if t.Status == P2PPending {
			s.push(id)
			s.pendingPer[t.From]++
		} else {
			s.done = append(s.done, id)
		}
		s.link(tp)
	}
	if ver < 5 {
		last = id
	}
	if r.err != nil || last < id {
		return ErrSnapshot
	}
	s.transfers.last = last
	slices.SortFunc(s.done, func(a, b uint64) int {
		da, db := s.transfers.at(a).DoneAt, s.transfers.at(b).DoneAt
		if da != db {
			return cmp.Compare(da, db)
		}
		return cmp.Compare(a, b)
	})
	return nil
}
