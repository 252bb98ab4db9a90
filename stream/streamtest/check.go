package streamtest

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"testing"
)

// Dec parses a decimal string answer ("1.25") into units of scale
// decimals, failing the test on anything else.
func Dec(t testing.TB, v any, scale int) int64 {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("decimal %v (%T) is not a string", v, v)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("bad decimal %q", s)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !r.IsInt() {
		t.Fatalf("decimal %q has more than %d decimals", s, scale)
	}
	return r.Num().Int64()
}

// ID is an id answered as a number or a decimal string.
func ID(t testing.TB, v any) uint64 {
	t.Helper()
	switch x := v.(type) {
	case float64:
		return uint64(x)
	case string:
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			t.Fatalf("bad id %q", x)
		}
		return n
	}
	t.Fatalf("id %v (%T)", v, v)
	return 0
}

// Book is a depth book: price -> quantity per side, in units, as of Seq.
type Book struct {
	Bids, Asks map[int64]int64
	Seq        uint64
}

// NewBook is an empty book at seq.
func NewBook(seq uint64) Book {
	return Book{Bids: map[int64]int64{}, Asks: map[int64]int64{}, Seq: seq}
}

// RebuildBook rebuilds the depth stream of market (and outcome, "" for a
// spot market) from msgs: its snapshot, then each diff applied once. It
// fails on a diff before the snapshot, a gap (prev_seq not the last seq
// applied) or seqs that do not move forward.
func RebuildBook(t testing.TB, msgs []map[string]any, market, outcome string, pScale, qScale int) Book {
	t.Helper()
	var b Book
	started := false
	for _, m := range msgs {
		if m["channel"] != "depth" || m["market"] != market || fmt.Sprint(m["outcome"]) != fmt.Sprint(outcomeOrNil(outcome)) {
			continue
		}
		switch m["type"] {
		case "snapshot":
			b = NewBook(uint64(m["seq"].(float64)))
			b.apply(t, m, pScale, qScale)
			started = true
		case "diff":
			if !started {
				t.Fatalf("%s %s: a diff before the snapshot: %v", market, outcome, m)
			}
			if prev := uint64(m["prev_seq"].(float64)); prev != b.Seq {
				t.Fatalf("%s %s: gap: prev_seq %d after seq %d", market, outcome, prev, b.Seq)
			}
			first, last := uint64(m["first_seq"].(float64)), uint64(m["last_seq"].(float64))
			if first <= b.Seq || last < first {
				t.Fatalf("%s %s: seqs %d..%d after %d", market, outcome, first, last, b.Seq)
			}
			b.apply(t, m, pScale, qScale)
			b.Seq = last
		}
	}
	if !started {
		t.Fatalf("%s %s: no snapshot", market, outcome)
	}
	return b
}

// apply sets the levels of m's bids and asks ([price, quantity] pairs; a
// zero quantity removes the level).
func (b Book) apply(t testing.TB, m map[string]any, pScale, qScale int) {
	t.Helper()
	for _, side := range []struct {
		levels map[int64]int64
		key    string
	}{{b.Bids, "bids"}, {b.Asks, "asks"}} {
		for _, l := range m[side.key].([]any) {
			pq := l.([]any)
			p, q := Dec(t, pq[0], pScale), Dec(t, pq[1], qScale)
			if q == 0 {
				delete(side.levels, p)
			} else {
				side.levels[p] = q
			}
		}
	}
}

// RESTBook is an answer of GET /api/v1/depth (bids, asks, seq) as a Book.
func RESTBook(t testing.TB, d map[string]any, pScale, qScale int) Book {
	t.Helper()
	seq, ok := d["seq"].(float64)
	if !ok {
		t.Fatalf("depth answer without a seq: %v", d)
	}
	b := NewBook(uint64(seq))
	b.apply(t, d, pScale, qScale)
	return b
}

// Same says whether a and b hold the same levels (their seqs aside).
func (b Book) Same(o Book) bool {
	return fmt.Sprint(sortedLevels(b.Bids)) == fmt.Sprint(sortedLevels(o.Bids)) &&
		fmt.Sprint(sortedLevels(b.Asks)) == fmt.Sprint(sortedLevels(o.Asks))
}

func (b Book) String() string {
	return fmt.Sprintf("seq %d bids %v asks %v", b.Seq, sortedLevels(b.Bids), sortedLevels(b.Asks))
}

func sortedLevels(m map[int64]int64) [][2]int64 {
	out := make([][2]int64, 0, len(m))
	for p, q := range m {
		out = append(out, [2]int64{p, q})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func outcomeOrNil(o string) any {
	if o == "" {
		return nil
	}
	return o
}

// PrivateLog applies a user's private streams exactly once: every
// message's seq is new and above the last of its channel (a repeat or a
// step back fails the test), balances are rebuilt from the snapshot and
// the deltas, and orders, fills, transfers and positions are gathered.
// N is how many messages of the current socket were taken: set it to 0
// after reconnecting on a new socket.
type PrivateLog struct {
	Last  map[string]uint64   // channel -> last seq taken
	Bal   map[string][2]int64 // asset -> [available, frozen] in units
	Fills map[uint64]int64    // order id -> filled quantity (units) from TRADE events
	IDs   map[uint64]bool     // order ids seen
	Xfers map[uint64][]string // spec 003 transfer id -> statuses in order
	Pos   map[string][2]int64 // binary market -> [yes, no] shares (the last POSITION)
	N     int

	seen       map[string]bool // channel/seq
	assetScale map[string]int
	qtyScale   func(market string) int
}

// NewPrivateLog is an empty log: assetScale gives each asset's decimals,
// qtyScale each market's quantity decimals.
func NewPrivateLog(assetScale map[string]int, qtyScale func(market string) int) *PrivateLog {
	return &PrivateLog{Last: map[string]uint64{}, seen: map[string]bool{}, Bal: map[string][2]int64{},
		Fills: map[uint64]int64{}, IDs: map[uint64]bool{}, Xfers: map[uint64][]string{}, Pos: map[string][2]int64{},
		assetScale: assetScale, qtyScale: qtyScale}
}

// Take applies msgs[N:] (every message of one socket so far).
func (p *PrivateLog) Take(t testing.TB, msgs []map[string]any) {
	t.Helper()
	for _, m := range msgs[p.N:] {
		p.N++
		ch, _ := m["channel"].(string)
		if typ, _ := m["type"].(string); ch == "" || (typ != "" && typ != "snapshot") {
			continue // answers (subscribed, pong), public messages
		}
		if m["type"] == "snapshot" {
			if ch == "balances" {
				for _, b := range m["balances"].([]any) {
					b := b.(map[string]any)
					a := b["asset"].(string)
					p.Bal[a] = [2]int64{Dec(t, b["available"], p.scale(t, a)), Dec(t, b["frozen"], p.scale(t, a))}
				}
				p.Last[ch] = uint64(m["seq"].(float64))
			}
			continue
		}
		seq := uint64(m["seq"].(float64))
		key := fmt.Sprint(ch, "/", seq)
		if p.seen[key] {
			t.Fatalf("%s seq %d delivered twice", ch, seq)
		}
		if seq <= p.Last[ch] {
			t.Fatalf("%s seq %d after %d", ch, seq, p.Last[ch])
		}
		p.seen[key], p.Last[ch] = true, seq
		for _, e := range m["events"].([]any) {
			p.event(t, ch, e.(map[string]any))
		}
	}
}

func (p *PrivateLog) event(t testing.TB, ch string, e map[string]any) {
	switch ch {
	case "balances":
		a := e["asset"].(string)
		b := p.Bal[a]
		p.Bal[a] = [2]int64{b[0] + Dec(t, e["d_available"], p.scale(t, a)), b[1] + Dec(t, e["d_frozen"], p.scale(t, a))}
	case "transfers":
		x := ID(t, e["transfer_id"])
		p.Xfers[x] = append(p.Xfers[x], e["status"].(string))
	case "positions":
		if e["event"] == "POSITION" {
			p.Pos[e["market"].(string)] = [2]int64{int64(e["yes"].(float64)), int64(e["no"].(float64))}
		}
	case "orders":
		oid := ID(t, e["order_id"])
		p.IDs[oid] = true
		if e["event"] == "TRADE" {
			p.Fills[oid] += Dec(t, e["quantity"], p.qtyScale(e["market"].(string)))
		}
	}
}

func (p *PrivateLog) scale(t testing.TB, asset string) int {
	s, ok := p.assetScale[asset]
	if !ok {
		t.Fatalf("no scale for asset %q", asset)
	}
	return s
}
