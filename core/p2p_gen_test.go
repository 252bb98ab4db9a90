package core

import "testing"

// p2p draws a transfer-service command for the property mix: mostly
// transfers between random users (random holds of up to ~5 commands, a
// requestId one time in four, sometimes a recent one again), cancels of
// recent transfers by their sender or someone else, ticks, forgets of
// what finished a little while ago, and the
// refusals (self transfer, unknown users, zero amounts).
func (g *gen) p2p(c *Command) {
	u, v := g.pickUser(), g.pickUser()
	switch x := g.r.IntN(100); {
	case x < 55:
		*c = Command{Kind: KindP2PTransfer, User: u.id, OrderID: OrderID(v.id), Asset: genUSDT,
			Amount: Units(1 + g.r.IntN(2_000_000)), Qty: Units(g.r.IntN(200_000))} // ~0..100 commands
		if g.r.IntN(4) == 0 {
			k, _ := KeyFrom("p" + string(rune('a'+g.r.IntN(26))))
			c.Key = k // often a repeat (or a conflict) of an earlier one of this sender
		}
	case x < 75:
		id := uint64(1)
		if g.p2pLast > 0 {
			id = g.p2pLast - uint64(g.r.IntN(int(min(g.p2pLast, 20))))
		}
		*c = Command{Kind: KindP2PCancel, User: u.id, OrderID: OrderID(id)}
		if id <= uint64(len(g.p2pFrom)) && g.r.IntN(3) > 0 {
			c.User = g.p2pFrom[id-1] // mostly its sender
		}
		if g.r.IntN(10) == 0 {
			c.Flags = P2PCancelAdmin
		}
	case x < 89:
		*c = Command{Kind: KindP2PTick}
	case x < 92: // the retention: forget what finished a little while ago
		*c = Command{Kind: KindP2PForget, Price: Price(max(1, g.time-int64(g.r.IntN(100_000))))}
	case x < 95:
		*c = Command{Kind: KindP2PTransfer, User: u.id, OrderID: OrderID(u.id), Asset: genUSDT, Amount: 1}
	case x < 98:
		*c = Command{Kind: KindP2PTransfer, User: u.id, OrderID: OrderID(genUnknownUser), Asset: genUSDT, Amount: 1}
	default:
		*c = Command{Kind: KindP2PCreateUser, User: u.id, Text: "dup", Asset: genUSDT}
	}
}

// TestGenP2PMix: the property mix reaches every transfer outcome, and the
// full check passes along the way (the holds of pending transfers included).
func TestGenP2PMix(t *testing.T) {
	g := newGen(7, propertyProfile)
	g.setup()
	p := New(Config{})
	seen := map[P2PStatus]int{}
	var c Command
	for i := 0; i < 30_000; i++ {
		g.next(&c)
		evs := p.Apply(&c)
		for _, e := range evs {
			if e.Kind == EvP2PTransfer && e.Flags == 0 {
				seen[P2PStatus(e.Detail)]++
			}
		}
		g.observe(evs)
		if i%5_000 == 0 {
			if vs := p.CheckInvariants(); len(vs) != 0 {
				t.Fatalf("command %d: %+v", i, vs)
			}
		}
	}
	if seen[P2PPending] == 0 || seen[P2PCompleted] == 0 || seen[P2PCancelled] == 0 || seen[P2PDebitFailed] == 0 {
		t.Fatalf("outcomes %v", seen)
	}
}
