package core

// Snapshot layout of binary markets (version 4; snapshot.go has the rest):
//
//	kind (u8) after the market id: 0 spot, 1 binary; a binary market then has
//	  head:  payout, closeTime, outcome (u8), settling (u8), after (u8),
//	         reserve, pnlPool, yesShares, noShares, costSum, cursor,
//	         question (len 0..MaxQuestionLen, bytes; version 4 on: a version-3
//	         head ends at cursor and restores with the empty question)
//	each of its orders ends with its outcome (u8), and after its asks:
//	  positions: count, then in creation order: user, yesVol, noVol,
//	             yesCost, noCost, yesPending, noPending
//
// Everything is stored as it is (running totals included), never
// recomputed, so a drifted total is restored for the full check to find.

func appendBinaryHead(w *wbuf, m *market) {
	b := m.bin
	if b == nil {
		w.u8(0)
		return
	}
	w.u8(1)
	w.sv(int64(b.payout))
	w.sv(b.closeTime)
	w.u8(uint8(b.outcome))
	w.u8(uint8(b2i(b.settling)))
	w.u8(uint8(b.after))
	for _, v := range [...]Units{b.reserve, b.pnlPool, b.yesShares, b.noShares, b.costSum} {
		w.sv(int64(v))
	}
	w.sv(int64(b.cursor))
	w.uv(uint64(len(b.question)))
	w.raw([]byte(b.question))
}

func appendPositions(w *wbuf, m *market) {
	b := m.bin
	if b == nil {
		return
	}
	w.uv(uint64(len(b.pos)))
	for i := range b.pos {
		ps := &b.pos[i]
		w.uv(uint64(ps.user))
		for _, v := range [...]Units{ps.yesVol, ps.noVol, ps.yesCost, ps.noCost, ps.yesPending, ps.noPending} {
			w.sv(int64(v))
		}
	}
}

// readBinaryHead reads the kind byte and, for a binary market, its head
// (snapshot version ver, 3 or later).
func readBinaryHead(r *rbuf, m *market, ver uint8) bool {
	switch r.u8() {
	case 0:
		return r.err == nil
	case 1:
	default:
		return false
	}
	b := &binaryMarket{}
	b.payout, b.closeTime = Units(r.sv()), r.sv()
	b.outcome = Outcome(r.u8())
	settling := r.u8()
	b.after = MarketStatus(r.u8())
	b.reserve, b.pnlPool, b.yesShares, b.noShares, b.costSum = Units(r.sv()), Units(r.sv()), Units(r.sv()),
		Units(r.sv()), Units(r.sv())
	b.cursor = int32(r.sv())
	b.settling = settling == 1
	if ver >= 4 {
		n := r.uv()
		if n > MaxQuestionLen || n > uint64(len(r.b)) {
			return false
		}
		b.question = string(r.b[:n])
		r.b = r.b[n:]
	}
	m.bin = b
	return r.err == nil && ValidQuestion(b.question) && settling <= 1 && b.outcome <= OutcomeNo && b.cursor >= 0 &&
		(b.after == 0 || b.after == MarketDraft || b.after == MarketResolved || b.after == MarketSettled ||
			b.after == MarketVoided)
}

// validCfgOf checks a restored market's config and status against its kind.
func (p *Processor) validCfgOf(m *market) bool {
	if m.bin == nil {
		return p.validMarketCfg(&m.cfg) == OK && m.status <= MarketSuspended
	}
	return p.validBinaryCfg(&m.cfg, m.bin.payout) == OK
}

// readPositions decodes a binary market's positions (accounts resolved later).
func (s *stagedMarket) readPositions(r *rbuf) bool {
	if s.m.bin == nil {
		return true
	}
	n := r.uv()
	if n > MaxUsers || n > uint64(len(r.b)) {
		return false
	}
	s.pos = make([]position, 0, n)
	for ; n > 0 && r.err == nil; n-- {
		ps := position{user: UserID(r.uv())}
		ps.yesVol, ps.noVol, ps.yesCost, ps.noCost = Units(r.sv()), Units(r.sv()), Units(r.sv()), Units(r.sv())
		ps.yesPending, ps.noPending = Units(r.sv()), Units(r.sv())
		s.pos = append(s.pos, ps)
	}
	return r.err == nil && int(s.m.bin.cursor) <= len(s.pos)
}

// placePositions links a staged binary market's positions to their accounts.
func (p *Processor) placePositions(s *stagedMarket) error {
	b := s.m.bin
	if b == nil {
		return nil
	}
	b.pos = s.pos
	for i := range b.pos {
		a := p.accountIdx(b.pos[i].user)
		if a < 0 {
			return ErrSnapshot
		}
		if _, dup := b.posIdx.get(a); dup {
			return ErrSnapshot
		}
		b.pos[i].acct = a
		b.posIdx.put(a, int32(i))
	}
	for _, side := range [2]*bookSide{&s.m.bids, &s.m.asks} { // each order to its owner's position
		for li := range side.levels {
			for oi := side.levels[li].head; oi >= 0; oi = p.pool.slots[oi].next {
				o := &p.pool.slots[oi]
				o.pos = b.positionOf(o.acct)
				if o.pos < 0 && o.userSide() == Sell {
					return ErrSnapshot // a SELL holds shares of a position
				}
			}
		}
	}
	return nil
}
