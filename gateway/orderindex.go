package gateway

import "github.com/ubscore/ubscore/core"

// orderIndexBits sizes orderIndex's window: 2^18 = 262,144 consecutive
// order ids, more than the MaxFinishedOrders History keeps, so while fewer
// than ~62k orders rest for longer than the window spans every tracked id
// is found in the window and the overflow map stays (nearly) empty.
const orderIndexBits = 18

// The window must span the finished orders History keeps.
var _ = [1]struct{}{}[min(1<<orderIndexBits-MaxFinishedOrders, 1)-1]

// orderIndex maps order ids to History slots. The core hands out order ids
// in increasing order and History mostly touches recent ones, so the index
// is a direct-mapped window (id mod 2^orderIndexBits, each entry holding its
// id) backed by a map for ids pushed out of the window while still tracked
// (an order resting for a long time, records restored out of order by
// Seed). Compared with one map of a few hundred thousand ids it hashes
// nothing, and consecutive ids are neighbours in memory.
//
// Invariant: a tracked id is either in win[id & mask] (with that id) or in
// old, never both.
type orderIndex struct {
	win []orderIndexEntry      // allocated on first put
	old map[core.OrderID]int32 // ids pushed out of win while still tracked (bounded by History's limits)
}

type orderIndexEntry struct {
	id   core.OrderID // 0: empty (order ids start at 1)
	slot int32
}

const orderIndexMask = 1<<orderIndexBits - 1

func (x *orderIndex) get(id core.OrderID) (int32, bool) {
	if x.win != nil {
		if e := &x.win[id&orderIndexMask]; e.id == id && id != 0 {
			return e.slot, true
		}
	}
	if len(x.old) == 0 {
		return 0, false
	}
	slot, ok := x.old[id]
	return slot, ok
}

// put sets id's slot. Of two ids sharing a window entry the newer (larger)
// keeps it and the older moves to old.
func (x *orderIndex) put(id core.OrderID, slot int32) {
	if x.win == nil {
		x.win = make([]orderIndexEntry, 1<<orderIndexBits)
	}
	e := &x.win[id&orderIndexMask]
	switch {
	case e.id == id || e.id == 0:
		if e.id == 0 && len(x.old) > 0 {
			delete(x.old, id) // never both
		}
		e.id, e.slot = id, slot
	case e.id < id:
		x.oldPut(e.id, e.slot)
		delete(x.old, id)
		e.id, e.slot = id, slot
	default:
		x.oldPut(id, slot)
	}
}

// reserve sizes old for n ids before a bulk insert (Seed: at 1M resting
// orders nearly all of them land there, and a map grown by doubling moves
// every entry once per doubling). It does nothing once old exists.
func (x *orderIndex) reserve(n int) {
	if x.old == nil && n > 0 {
		x.old = make(map[core.OrderID]int32, n)
	}
}

func (x *orderIndex) oldPut(id core.OrderID, slot int32) {
	if x.old == nil {
		x.old = make(map[core.OrderID]int32)
	}
	x.old[id] = slot
}

func (x *orderIndex) del(id core.OrderID) {
	if x.win != nil {
		if e := &x.win[id&orderIndexMask]; e.id == id && id != 0 {
			*e = orderIndexEntry{}
			return
		}
	}
	if len(x.old) > 0 {
		delete(x.old, id)
	}
}
