package core

// property_test.go proves the determinism rules of docs/design.md, the rules for core on long seeded
// random streams: every command leaves every invariant intact, a rejected
// command changes nothing, a snapshot restored mid-stream replays to the same
// events and hash, and the same seed twice gives the same events and hash.
// A failure prints the seed; -core.seed N (or UBSCORE_SEED=N) replays it.

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
)

var (
	flagSeed = flag.Uint64("core.seed", 0, "seed of the random command streams (0: random; also env UBSCORE_SEED)")
	flagCmds = flag.Int("core.cmds", 0, "commands per property run (0: 1M, 100k with -short)")
)

// propSeed returns the seed to use and logs how to replay it.
func propSeed(t testing.TB) uint64 {
	seed := *flagSeed
	if s := os.Getenv("UBSCORE_SEED"); seed == 0 && s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("UBSCORE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	if seed == 0 {
		seed = rand.Uint64()>>1 | 1
	}
	short := ""
	if testing.Short() {
		short = " -short"
	}
	t.Logf("seed %d (replay: go test ./core%s -run '^%s$' -core.seed %d)", seed, short, t.Name(), seed)
	return seed
}

// propProfile is the property mix; -short keeps the books at about half the
// depth (~170 resting orders) so the race-enabled run stays fast.
func propProfile() genProfile {
	prof := propertyProfile
	if testing.Short() {
		prof.targetLive /= 2
	}
	return prof
}

func propCmds(long, short int) int {
	switch {
	case *flagCmds > 0:
		return *flagCmds
	case testing.Short():
		return short
	}
	return long
}

// stateBody is the canonical serialization of p with the command envelope
// (last seq and time, which every command advances) set to the given values
// and the processed-ops log cut to entries [nOps-window, nOps): the ops log
// only grows, so the window plus the length checks in stateProbe.verify cover
// it without serializing it whole on every command.
func stateBody(p *Processor, dst []byte, seq Seq, time int64, nOps, window int) []byte {
	saveSeq, saveTime, saveLog := p.lastSeq, p.lastTime, p.opLog
	p.lastSeq, p.lastTime = seq, time
	p.opLog = p.opLog[max(0, nOps-window):nOps]
	dst = p.AppendSnapshot(dst)
	p.lastSeq, p.lastTime, p.opLog = saveSeq, saveTime, saveLog
	return dst
}

// stateProbe captures the state before a command so that a rejection can be
// proven to have changed nothing.
type stateProbe struct {
	window int
	seq    Seq
	time   int64
	nOps   int
	key    opKey
	rec    opRecord
	had    bool
	body   []byte
	after  []byte
}

func (s *stateProbe) capture(p *Processor, c *Command) {
	s.seq, s.time, s.nOps = p.lastSeq, p.lastTime, len(p.opLog)
	s.key = opKey{c.Kind, c.Key}
	s.rec, s.had = p.op(s.key)
	s.body = stateBody(p, s.body[:0], s.seq, s.time, s.nOps, s.window)
}

func isTransferKind(k Kind) bool { return k >= KindSpotDeposit && k <= KindAdjust }

// verify checks that the command just applied, rejected with code, left the
// state as captured. The one documented exception (transfer.go): a transfer
// records its own first failure under its fresh req_id, so a retry gets the
// same answer; that record must be exactly the command's and nothing else may move.
func (s *stateProbe) verify(p *Processor, c *Command, ev []Event, code Code) error {
	s.after = stateBody(p, s.after[:0], s.seq, s.time, s.nOps, s.window)
	if !bytes.Equal(s.after, s.body) {
		i := 0
		for i < len(s.after) && i < len(s.body) && s.after[i] == s.body[i] {
			i++
		}
		return fmt.Errorf("rejected (%v) but the state changed: serializations differ at byte %d of %d/%d",
			code, i, len(s.body), len(s.after))
	}
	switch len(p.opLog) {
	case s.nOps:
	case s.nOps + 1:
		e := p.opLog[s.nOps]
		want := opRecord{user: c.User, asset: c.Asset, amount: c.Amount, code: code}
		if idx, ok := p.ops[e.k]; !isTransferKind(c.Kind) || s.had || e.k != s.key || e.r != want || !ok || idx != int32(s.nOps) {
			return fmt.Errorf("rejected (%v) but recorded op %+v -> %+v (index %d)", code, e.k, e.r, idx)
		}
		found := false
		for i := range ev {
			found = found || (ev[i].Kind == EvTransfer && ev[i].Code == code && ev[i].Flags == 0)
		}
		if !found {
			return fmt.Errorf("rejected (%v) transfer recorded without its TRANSFER event", code)
		}
	default:
		return fmt.Errorf("rejected (%v) but the ops log grew from %d to %d", code, s.nOps, len(p.opLog))
	}
	if cur, _ := p.op(s.key); s.had && cur != s.rec {
		return fmt.Errorf("rejected (%v) but op %+v changed: %+v -> %+v", code, s.key, s.rec, cur)
	}
	return nil
}

// checkEvents checks the envelope of a command's events.
func checkEvents(c *Command, ev []Event, wantTime int64) error {
	if len(ev) == 0 {
		return fmt.Errorf("no events")
	}
	for i := range ev {
		e := &ev[i]
		if e.Seq != c.Seq || e.Time != wantTime {
			return fmt.Errorf("event %d (%v) stamped seq %d time %d, want %d %d", i, e.Kind, e.Seq, e.Time, c.Seq, wantTime)
		}
		switch {
		case e.Kind == EvResult && i != len(ev)-1:
			return fmt.Errorf("RESULT at %d of %d events", i, len(ev))
		case e.Kind == EvInvariantViolation:
			return fmt.Errorf("event %d: %v %+v", i, e.Kind, *e)
		case (e.Kind == EvCoreHalted || e.Kind == EvMarketHalted && e.Code != OK) && c.Kind != KindBreakerTrip:
			// an operator's (or the periodic check's) trip halts on purpose;
			// anything else halting means a command broke the state
			return fmt.Errorf("event %d: %v %+v", i, e.Kind, *e)
		}
	}
	if r := &ev[len(ev)-1]; r.Kind != EvResult || r.CmdKind != c.Kind {
		return fmt.Errorf("last event %v (cmd kind %v), want RESULT of %v", r.Kind, r.CmdKind, c.Kind)
	}
	return nil
}

// deepIndexCheck checks the indexes CheckInvariants does not: the client-id
// index holds exactly the keyed resting orders, the user index matches the
// accounts, and no pool slot leaks (between commands every live slot rests).
func deepIndexCheck(p *Processor) error {
	keyed, resting := 0, 0
	for _, m := range p.markets {
		if m == nil {
			continue
		}
		for _, s := range [2]*bookSide{&m.bids, &m.asks} {
			for li := range s.levels {
				lv := &s.levels[li]
				// CheckInvariants sums a level with the same wrapping
				// arithmetic as the book; here the sum is overflow-checked.
				var sum Units
				ok := true
				for oi := lv.head; oi >= 0; oi = p.pool.slots[oi].next {
					resting++
					if !p.pool.slots[oi].key.IsZero() {
						keyed++
					}
					var fits bool
					sum, fits = addUnits(sum, p.pool.slots[oi].remaining())
					ok = ok && fits
				}
				if !ok || sum != lv.qty || lv.qty <= 0 {
					return fmt.Errorf("market %d level %d: quantity %d, its orders sum to %d (overflow: %v)",
						m.id, lv.price, lv.qty, sum, !ok)
				}
			}
		}
	}
	if len(p.clientIdx) != keyed {
		return fmt.Errorf("client index has %d entries, %d keyed orders rest", len(p.clientIdx), keyed)
	}
	if live := len(p.pool.slots) - len(p.pool.free); live != resting {
		return fmt.Errorf("pool has %d live slots, %d orders rest", live, resting)
	}
	if p.userIdx.len() != len(p.accounts) {
		return fmt.Errorf("user index has %d entries, %d accounts", p.userIdx.len(), len(p.accounts))
	}
	if len(p.ops) != len(p.opLog) {
		return fmt.Errorf("ops map has %d entries, ops log %d", len(p.ops), len(p.opLog))
	}
	return nil
}

// firstEventDiff describes where two event streams of one command differ.
func firstEventDiff(a, b []Event) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("event %d:\n  %+v\n  %+v", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}

// propStats counts outcomes so a -v run shows what the stream covered.
type propStats struct {
	kinds          [256]int
	events         [256]int
	codes          [codeCount + 1]int
	rejectsChecked int
}

func (s *propStats) add(k Kind, code Code, ev []Event) {
	for i := range ev {
		s.events[ev[i].Kind]++
	}
	s.kinds[k]++
	s.codes[min(int(code), int(codeCount))]++
}

func (s *propStats) log(t *testing.T) {
	var b bytes.Buffer
	for k, n := range s.kinds {
		if n > 0 {
			fmt.Fprintf(&b, " %v(%d)=%d", Kind(k), k, n)
		}
	}
	t.Logf("kinds:%s", b.String())
	b.Reset()
	for k, n := range s.events {
		if n > 0 {
			fmt.Fprintf(&b, " %v=%d", EventKind(k), n)
		}
	}
	t.Logf("events:%s", b.String())
	b.Reset()
	for c, n := range s.codes {
		if n > 0 {
			fmt.Fprintf(&b, " %v=%d", Code(c), n)
		}
	}
	t.Logf("codes:%s", b.String())
	t.Logf("rejections proven to change nothing: %d", s.rejectsChecked)
}

// TestPropertyRandomStream drives a long random stream through one processor,
// checking after every command: the event envelope, the full invariants, the
// index bookkeeping, that a rejection changed nothing and that a command the
// generator built to be invalid was rejected. At a random mid-point it
// restores a snapshot into a second processor and from then on requires
// identical events from both, and an identical hash at the end.
//
// The state before each command is a shadow processor one command behind
// (fed the same stream: identical events required, a determinism check of
// its own), so the before-state is serialized only for the commands that
// are rejected instead of before every command.
func TestPropertyRandomStream(t *testing.T) {
	seed := propSeed(t)
	n := propCmds(1_000_000, 100_000)
	g := newGen(seed, propProfile())
	p, shadow := New(Config{}), New(Config{})
	midRand := rand.New(rand.NewPCG(seed, 42))
	midAt := g.setupLen() + n/4 + midRand.IntN(n/2+1)
	var q *Processor
	var clones cloneCheck
	var c Command
	var probe stateProbe
	probe.window = 8
	var stats propStats
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, command %d %+v:\n%s\n(replay: -core.seed %d, see the first log line)", seed, i, c,
			fmt.Sprintf(format, args...), seed)
	}
	for i := 0; i < n; i++ {
		g.next(&c)
		prevTime := p.lastTime
		ev := applyRecover(p, &c)
		if ev == nil {
			fail(i, "Apply panicked")
		}
		if err := checkEvents(&c, ev, max(prevTime, c.Time)); err != nil {
			fail(i, "%v", err)
		}
		res := ev[len(ev)-1]
		stats.add(c.Kind, res.Code, ev)
		if res.Code != OK {
			probe.capture(shadow, &c) // the state before c
			if err := probe.verify(p, &c, ev, res.Code); err != nil {
				fail(i, "%v", err)
			}
			stats.rejectsChecked++
		} else if g.mustReject {
			fail(i, "an invalid command was applied: %+v", res)
		}
		if sev := shadow.Apply(&c); !slices.Equal(ev, sev) {
			fail(i, "the shadow processor diverged at %s", firstEventDiff(ev, sev))
		}
		if v := p.CheckInvariants(); len(v) != 0 {
			fail(i, "invariants broken: %+v\nevents: %+v", v, ev)
		}
		if err := deepIndexCheck(p); err != nil {
			fail(i, "%v", err)
		}
		if q != nil {
			if qev := q.Apply(&c); !slices.Equal(ev, qev) {
				fail(i, "restored processor diverged at %s", firstEventDiff(ev, qev))
			}
		}
		if err := clones.apply(&c, ev); err != nil {
			fail(i, "%v", err)
		}
		g.observe(ev)
		if i == midAt {
			snap := p.AppendSnapshot(nil)
			var err error
			if q, err = Restore(Config{}, snap); err != nil {
				fail(i, "restore of the mid-point snapshot: %v", err)
			}
			if !bytes.Equal(q.AppendSnapshot(nil), snap) {
				fail(i, "restored processor serializes differently")
			}
			if err := clones.start(p, snap); err != nil {
				fail(i, "%v", err)
			}
			t.Logf("snapshot at seq %d: %d bytes, %d resting orders, %d accounts, %d ops",
				c.Seq, len(snap), p.orderIdx.len(), len(p.accounts), len(p.opLog))
		}
	}
	if q == nil {
		t.Fatalf("seed %d: mid-point %d never reached", seed, midAt)
	}
	if hp, hq := p.StateHash(), q.StateHash(); hp != hq {
		t.Fatalf("seed %d: final hash %s, restored processor %s", seed, hp, hq)
	}
	if err := clones.end(p); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	stats.log(t)
}

// applyRecover applies c and returns nil if apply panicked.
func applyRecover(p *Processor, c *Command) (ev []Event) {
	defer func() {
		if r := recover(); r != nil {
			ev = nil
		}
	}()
	return p.Apply(c)
}

// TestPropertySameSeedTwice runs two generators and processors with the same
// seed side by side: the commands, every event and the final hash must match.
func TestPropertySameSeedTwice(t *testing.T) {
	seed := propSeed(t)
	n := propCmds(1_000_000, 100_000) / 3
	g1, g2 := newGen(seed, propProfile()), newGen(seed, propProfile())
	p1, p2 := New(Config{}), New(Config{})
	var c1, c2 Command
	for i := 0; i < n; i++ {
		g1.next(&c1)
		g2.next(&c2)
		if c1 != c2 {
			t.Fatalf("seed %d, command %d: generators diverged:\n  %+v\n  %+v", seed, i, c1, c2)
		}
		e1, e2 := p1.Apply(&c1), p2.Apply(&c2)
		if !slices.Equal(e1, e2) {
			t.Fatalf("seed %d, command %d %+v: %s", seed, i, c1, firstEventDiff(e1, e2))
		}
		g1.observe(e1)
		g2.observe(e2)
	}
	if h1, h2 := p1.StateHash(), p2.StateHash(); h1 != h2 {
		t.Fatalf("seed %d: hashes %s and %s", seed, h1, h2)
	}
}

// TestSTPExpireTakerNeverRestsCrossed: with STP expire-taker, an incoming
// GTC limit that reaches its owner's resting order must not rest through it
// (found by TestPropertyRandomStream: the book crossed and the market halted
// with INVARIANT_VIOLATION). Its remainder expires, as command.go's STP
// comment says ("expire the incoming order's remainder").
func TestSTPExpireTakerNeverRestsCrossed(t *testing.T) {
	for _, viaModify := range []bool{false, true} {
		t.Run(fmt.Sprintf("modify=%v", viaModify), func(t *testing.T) {
			s := setupBTCUSDT(t)
			k1, _ := KeyFrom("stp-1")
			k2, _ := KeyFrom("stp-2")
			s.do(t, Command{Kind: KindSpotDeposit, User: 7, Asset: 1, Amount: 100_000_000, Key: k1})
			s.do(t, Command{Kind: KindSpotDeposit, User: 7, Asset: 2, Amount: 100_000 * 1_000_000, Key: k2})
			ask := Price(50_000 * 1_000_000)
			if r := result(s.do(t, Command{Kind: KindPlaceOrder, User: 7, Market: 1, Side: Sell, Type: Limit,
				TIF: GTC, Price: ask, Qty: 10_000_000})); r.Code != OK {
				t.Fatalf("ask: %v", r.Code)
			}
			var ev []Event
			if viaModify {
				r := result(s.do(t, Command{Kind: KindPlaceOrder, User: 7, Market: 1, Side: Buy, Type: Limit,
					TIF: GTC, STP: STPExpireTaker, Price: ask - 1_000_000, Qty: 10_000_000}))
				if r.Code != OK || r.Status != StatusNew {
					t.Fatalf("bid: %v %v", r.Code, r.Status)
				}
				ev = s.do(t, Command{Kind: KindModifyOrder, User: 7, OrderID: r.OrderID, Price: ask + 1_000_000})
			} else {
				ev = s.do(t, Command{Kind: KindPlaceOrder, User: 7, Market: 1, Side: Buy, Type: Limit, TIF: GTC,
					STP: STPExpireTaker, Price: ask + 1_000_000, Qty: 10_000_000})
			}
			for _, e := range ev {
				if e.Kind == EvInvariantViolation || e.Kind == EvMarketHalted {
					t.Errorf("event %v (detail %d): the remainder rested through its own order", e.Kind, e.Detail)
				}
			}
			if v := s.p.CheckInvariants(); len(v) != 0 {
				t.Errorf("invariants: %+v", v)
			}
			if m := s.p.markets[1]; m.status != MarketActive {
				t.Errorf("market status %d after a self-trade prevention", m.status)
			}
		})
	}
}

// TestMarketByBaseAtMaxUnits: match and finalize recognize a MARKET BUY by
// quote budget by o.qty == MaxUnits (the sentinel placeOrder stores), so a
// MARKET BUY by base whose Qty is exactly MaxUnits (legal where MaxQty ==
// MaxUnits) is taken for a by-quote order. On the same book it must end like
// any other by-base order that runs out of liquidity.
func TestMarketByBaseAtMaxUnits(t *testing.T) {
	run := func(qty Units) (Event, []EventKind) {
		s := &seqr{p: New(Config{})}
		s.do(t, Command{Kind: KindConfigAsset, Asset: 1})
		s.do(t, Command{Kind: KindConfigAsset, Asset: 2})
		s.do(t, Command{Kind: KindConfigMarket, Market: 1, Cfg: MarketCfg{Base: 1, Quote: 2, Tick: 1, Lot: 1,
			MinQty: 1, MaxQty: MaxUnits}})
		k1, _ := KeyFrom("a")
		k2, _ := KeyFrom("b")
		s.do(t, Command{Kind: KindSpotDeposit, User: 1, Asset: 1, Amount: 1_000, Key: k1})
		s.do(t, Command{Kind: KindSpotDeposit, User: 2, Asset: 2, Amount: 1_000_000, Key: k2})
		s.do(t, Command{Kind: KindPlaceOrder, User: 1, Market: 1, Side: Sell, Type: Limit, TIF: GTC, Price: 10, Qty: 100})
		ev := s.do(t, Command{Kind: KindPlaceOrder, User: 2, Market: 1, Side: Buy, Type: Market, Qty: qty})
		var kinds []EventKind
		for _, e := range ev {
			if e.Kind != EvBalance {
				kinds = append(kinds, e.Kind)
			}
		}
		return result(ev), kinds
	}
	want, wantKinds := run(1_000)
	got, gotKinds := run(MaxUnits)
	if got.Code != want.Code || got.Status != want.Status || got.Qty != want.Qty || !slices.Equal(gotKinds, wantKinds) {
		t.Errorf("MARKET BUY qty=MaxUnits: %v %v filled %d events %v; with qty=1000: %v %v filled %d events %v",
			got.Code, got.Status, got.Qty, gotKinds, want.Code, want.Status, want.Qty, wantKinds)
	}
}
