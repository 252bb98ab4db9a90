package core

import (
	"crypto/sha256"
	"encoding/hex"
)

// SnapshotVersion is the first byte of a serialized state.
//
// The serialization is canonical — the same state always gives the same
// bytes — so StateHash is a hash of it. It holds every field of the state,
// the running aggregates included (level totals and counts, order counts,
// asset totals): a state whose aggregates drifted from what they sum is
// stored, hashed and restored as it is, for the check to find, never
// silently recomputed. Layout (varints unless noted):
//
//	version | lastSeq | lastTime | nextOrderID | nextTradeID | coreHalt (u8) | coreHaltSeq
//	assets:   count, then per configured asset: id, scale, credited, debited, total
//	markets:  count, then per market: id, kind (u8: 0 spot, 1 binary), [binary head], cfg, status,
//	          haltReason, haltSeq, orders, bids, asks, [binary positions]
//	          side: level count, then per level best first: price, qty, count, n, n x order (FIFO)
//	          (an order of a binary market ends with its outcome, u8)
//	          binary head and positions: binary_snapshot.go
//	accounts: count, then in creation order: id, status, openOrders, n, n x (asset, avail, frozen)
//	ops:      count, then the live ones in insertion order: kind, key, user, asset, amount, code, flags
//	p2p:      the transfer service (version 5, p2p_snapshot.go)
//
// Version 1 (before the breaker and the stored aggregates: a halted byte,
// no totals, orders per side), version 2 (before binary markets and the
// transfer service: no market kind byte, no p2p section) and version 3
// (before binary market questions: a binary head without the question) and
// version 4 (before the transfer service's retention: every transfer, ids
// implicit) are still read (restore.go), never written.
const SnapshotVersion = 5

// AppendSnapshot appends the canonical serialization of the whole state to dst.
func (p *Processor) AppendSnapshot(dst []byte) []byte { return p.AppendSnapshotPaced(dst, nil) }

// AppendSnapshotPaced is AppendSnapshot calling yield (if not nil) every
// 64 KB or so of output, between entries: a caller that serializes off the
// critical path lets its other goroutines run meanwhile. yield must not
// change p. The bytes are AppendSnapshot's.
func (p *Processor) AppendSnapshotPaced(dst []byte, yield func()) []byte {
	w := wbuf{b: dst, yield: yield, next: len(dst) + paceBytes}
	w.u8(SnapshotVersion)
	w.uv(uint64(p.lastSeq))
	w.sv(p.lastTime)
	w.uv(uint64(p.nextOrderID))
	w.uv(p.nextTradeID)
	w.u8(uint8(p.coreHalt))
	w.uv(uint64(p.coreHaltSeq))
	n := 0
	for a := range p.assets {
		if p.assets[a].configured {
			n++
		}
	}
	w.uv(uint64(n))
	for a := range p.assets {
		st := &p.assets[a]
		if st.configured {
			w.uv(uint64(a))
			w.u8(st.scale)
			w.sv(int64(st.credited))
			w.sv(int64(st.debited))
			w.sv(int64(st.total))
		}
	}
	n = 0
	for _, m := range p.markets {
		if m != nil {
			n++
		}
	}
	w.uv(uint64(n))
	for _, m := range p.markets {
		if m != nil {
			p.appendMarket(&w, m)
		}
	}
	w.uv(uint64(len(p.accounts)))
	for i := range p.accounts {
		w.pace()
		acc := &p.accounts[i]
		w.uv(uint64(acc.id))
		w.u8(uint8(acc.status))
		w.sv(int64(acc.openOrders))
		ext := p.balExt[i]
		n = 0
		for _, b := range acc.inl {
			if b != (Balance{}) {
				n++
			}
		}
		for _, b := range ext {
			if b != (Balance{}) {
				n++
			}
		}
		w.uv(uint64(n))
		for j, b := range acc.inl { // assets in ascending order: inline ones, then the overflow run
			if b != (Balance{}) {
				w.balance(AssetID(j+1), b)
			}
		}
		for j, b := range ext {
			if b != (Balance{}) {
				w.balance(AssetID(j+inlineAssets+1), b)
			}
		}
	}
	w.uv(uint64(p.liveOps()))
	for i := range p.opLog {
		k, r := &p.opLog[i].k, &p.opLog[i].r
		if k.kind == 0 {
			continue // forgotten
		}
		w.pace()
		w.u8(uint8(k.kind))
		w.key(k.key)
		w.uv(uint64(r.user))
		w.uv(uint64(r.asset))
		w.sv(int64(r.amount))
		w.uv(uint64(r.code))
		w.u8(r.flags)
	}
	p.appendP2P(&w)
	return w.b
}

func (p *Processor) appendMarket(w *wbuf, m *market) {
	w.uv(uint64(m.id))
	appendBinaryHead(w, m)
	c := &m.cfg
	w.uv(uint64(c.Base))
	w.uv(uint64(c.Quote))
	w.u8(c.BaseScale)
	for _, v := range [...]int64{int64(c.Tick), int64(c.Lot), int64(c.MinQty), int64(c.MaxQty), int64(c.MakerFee), int64(c.TakerFee)} {
		w.sv(v)
	}
	w.u8(uint8(m.status))
	w.u8(uint8(m.haltReason))
	w.uv(uint64(m.haltSeq))
	w.sv(int64(m.orders))
	for _, s := range [2]*bookSide{&m.bids, &m.asks} {
		w.uv(uint64(len(s.levels)))
		for li := len(s.levels) - 1; li >= 0; li-- {
			lv := &s.levels[li]
			w.sv(int64(lv.price))
			w.sv(int64(lv.qty))
			w.sv(int64(lv.count))
			n := 0
			for oi := lv.head; oi >= 0 && n <= MaxOrdersPerBook; oi = p.pool.slots[oi].next {
				n++
			}
			w.uv(uint64(n))
			for oi := lv.head; oi >= 0 && n > 0; oi = p.pool.slots[oi].next {
				n--
				w.pace()
				o := &p.pool.slots[oi]
				w.uv(uint64(o.id))
				w.uv(uint64(o.user))
				w.u8(uint8(o.tif))
				w.u8(uint8(o.stp))
				w.sv(int64(o.price))
				w.sv(int64(o.qty))
				w.sv(int64(o.filled))
				w.sv(int64(o.frozen))
				w.key(o.key)
				w.uv(uint64(o.seq))
				if m.bin != nil {
					w.u8(uint8(o.outcome))
				}
			}
		}
	}
	appendPositions(w, m)
}

func (w *wbuf) balance(asset AssetID, b Balance) {
	w.uv(uint64(asset))
	w.sv(int64(b.Avail))
	w.sv(int64(b.Frozen))
}

// StateHash is the hex SHA-256 of the canonical serialization.
func (p *Processor) StateHash() string { return StateHashOf(p.AppendSnapshot(nil)) }

// StateHashOf is the state hash of a canonical serialization (AppendSnapshot's).
func StateHashOf(state []byte) string { return StateHashOfPaced(state, nil) }

// StateHashOfPaced is StateHashOf calling yield (if not nil) after every
// 1 MB hashed (a few ms of work at a large state's tens of MB).
func StateHashOfPaced(state []byte, yield func()) string {
	h := sha256.New()
	for len(state) > 0 {
		n := min(len(state), 1<<20)
		h.Write(state[:n]) //nolint:errcheck // a hash.Hash never fails
		state = state[n:]
		if yield != nil {
			yield()
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
