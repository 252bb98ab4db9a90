package core

// fuzz_test.go fuzzes the edges of core: the command decoder (it never
// panics, and what it accepts re-encodes to exactly the same bytes) and Apply
// on a processor with real state (no panic, invariants hold after every
// command, a rejected command changes nothing). The plain tests round-trip
// every generated command and the integer boundaries through the codec.
// Seed corpus: testdata/fuzz/Fuzz*/; -core.writecorpus regenerates it.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

var flagWriteCorpus = flag.Bool("core.writecorpus", false, "rewrite the seed corpus under testdata/fuzz/")

// genCommands returns n realistic commands (seeded), generated against a
// processor so cancels and modifies name real orders.
func genCommands(seed uint64, n int) []Command {
	g := newGen(seed, propertyProfile)
	p := New(Config{})
	out := make([]Command, n)
	for i := range out {
		g.next(&out[i])
		g.observe(p.Apply(&out[i]))
	}
	return out
}

// boundaryCommands are commands whose fields sit at 0, ±1, the integer
// limits and the scale limits, one field at a time.
func boundaryCommands() []Command {
	var out []Command
	i64 := []int64{1, -1, 127, 128, -64, -65, math.MaxInt32, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1,
		math.MinInt64 + 1, 1 << 62, -(1 << 62)}
	u64 := []uint64{1, 127, 128, 16383, 16384, math.MaxUint32, math.MaxUint32 + 1, 1 << 63, math.MaxUint64}
	u32 := []uint32{1, 127, 128, MaxMarkets, MaxAssets + 1, math.MaxUint32}
	u8 := []uint8{1, 2, 4, 127, 128, MaxBaseScale, MaxBaseScale + 1, 255}
	base := Command{Kind: KindPlaceOrder}
	add := func(f func(c *Command)) {
		c := base
		f(&c)
		out = append(out, c)
	}
	for _, v := range u64 {
		add(func(c *Command) { c.Seq = Seq(v) })
		add(func(c *Command) { c.User = UserID(v) })
		add(func(c *Command) { c.OrderID = OrderID(v) })
	}
	for _, v := range i64 {
		add(func(c *Command) { c.Time = v })
		add(func(c *Command) { c.Price = Price(v) })
		add(func(c *Command) { c.Qty = Units(v) })
		add(func(c *Command) { c.QuoteQty = Units(v) })
		add(func(c *Command) { c.Amount = Units(v) })
		add(func(c *Command) {
			c.Kind, c.Cfg.Tick, c.Cfg.MaxQty, c.Cfg.TakerFee = KindConfigMarket, Price(v), Units(v), Rate(v)
		})
		add(func(c *Command) {
			c.Kind, c.Cfg.Lot, c.Cfg.MinQty, c.Cfg.MakerFee = KindConfigMarket, Units(v), Units(v), Rate(v)
		})
	}
	for _, v := range u32 {
		add(func(c *Command) { c.Market = MarketID(v) })
		add(func(c *Command) { c.Asset = AssetID(v) })
		add(func(c *Command) { c.Kind, c.Cfg.Base, c.Cfg.Quote = KindConfigMarket, AssetID(v), AssetID(v) })
	}
	for _, v := range u8 {
		add(func(c *Command) { c.Side, c.Type, c.TIF = Side(v), OrderType(v), TimeInForce(v) })
		add(func(c *Command) { c.STP, c.Status, c.Flags = STP(v), AccountStatus(v), v })
		add(func(c *Command) { c.Kind, c.BaseScale, c.Cfg.BaseScale = KindConfigAsset, v, v })
	}
	for _, n := range []int{1, 2, 31, 32} {
		k, _ := KeyFrom(string(bytes.Repeat([]byte{0xff}, n)))
		add(func(c *Command) { c.Key = k })
	}
	for k := Kind(1); k <= kindMax; k++ {
		add(func(c *Command) { c.Kind = k })
	}
	// every field at its largest at once: the longest encoding
	add(func(c *Command) {
		k, _ := KeyFrom(string(bytes.Repeat([]byte{0xff}, 32)))
		*c = Command{Seq: math.MaxUint64, Time: math.MinInt64, Kind: kindMax, Side: 255, Type: 255, TIF: 255, STP: 255,
			Status: 255, Flags: 255, BaseScale: 255, User: math.MaxUint64, Market: math.MaxUint32, Asset: math.MaxUint32,
			OrderID: math.MaxUint64, Price: math.MinInt64, Qty: math.MinInt64, QuoteQty: math.MinInt64,
			Amount: math.MinInt64, Key: k, Cfg: MarketCfg{Base: math.MaxUint32, Quote: math.MaxUint32, BaseScale: 255,
				Tick: math.MinInt64, Lot: math.MinInt64, MinQty: math.MinInt64, MaxQty: math.MinInt64,
				MakerFee: math.MinInt64, TakerFee: math.MinInt64}}
	})
	return out
}

// checkRoundTrip checks one command against the codec's contract.
func checkRoundTrip(c *Command) error {
	b := EncodeCommand(nil, c)
	if len(b) > MaxCommandSize {
		return fmt.Errorf("encoding is %d bytes, MaxCommandSize %d", len(b), MaxCommandSize)
	}
	var d Command
	err := DecodeCommand(b, &d)
	if c.Kind == 0 || c.Kind > kindMax {
		if err == nil {
			return fmt.Errorf("unknown kind %d decoded", c.Kind)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("decode of its own encoding: %v", err)
	}
	if d.Key != c.Key {
		return fmt.Errorf("key %q decoded as %q", c.Key[:], d.Key[:])
	}
	if d != *c {
		return fmt.Errorf("decode(encode(c)) != c:\n  %+v\n  %+v", *c, d)
	}
	if b2 := EncodeCommand(nil, &d); !bytes.Equal(b, b2) {
		return fmt.Errorf("encode(decode(b)) != b")
	}
	return nil
}

// TestCodecRoundTripGenerated round-trips every generated command.
func TestCodecRoundTripGenerated(t *testing.T) {
	seed := propSeed(t)
	n := propCmds(1_000_000, 100_000) / 2
	cmds := genCommands(seed, n)
	bad := 0
	for i := range cmds {
		if err := checkRoundTrip(&cmds[i]); err != nil {
			if bad++; bad <= 3 {
				t.Errorf("seed %d, command %d %+v: %v", seed, i, cmds[i], err)
			}
		}
	}
	if bad > 0 {
		t.Errorf("seed %d: %d of %d commands failed the round trip", seed, bad, n)
	}
}

// TestCodecBoundaries round-trips the boundary commands and checks that no
// strict prefix of an encoding and no encoding with a trailing byte decodes.
func TestCodecBoundaries(t *testing.T) {
	var d Command
	for _, c := range boundaryCommands() {
		if err := checkRoundTrip(&c); err != nil {
			t.Errorf("%+v: %v", c, err)
			continue
		}
		b := EncodeCommand(nil, &c)
		for n := 0; n < len(b); n++ {
			if err := DecodeCommand(b[:n], &d); !errors.Is(err, ErrDecode) {
				t.Errorf("%+v: prefix of %d/%d bytes: err %v", c, n, len(b), err)
			}
		}
		if err := DecodeCommand(append(b, 0), &d); !errors.Is(err, ErrDecode) {
			t.Errorf("%+v: trailing byte accepted", c)
		}
	}
}

// TestCodecNonCanonicalKey: a Key with a non-zero byte after a zero byte
// (which the core rejects with INVALID_KEY) must survive the WAL round trip
// unchanged. EncodeCommand writes only the bytes before the first zero, so
// the replayed command carries another, canonical key that the core accepts:
// the live run and the replay from the WAL diverge.
func TestCodecNonCanonicalKey(t *testing.T) {
	k := nonCanonicalKey()
	for _, kind := range []Kind{KindPlaceOrder, KindCancelOrder, KindSpotDeposit} {
		c := Command{Seq: 9, Kind: kind, User: 7, Key: k}
		if err := checkRoundTrip(&c); err != nil {
			t.Errorf("%v: %v", kind, err)
		}
	}
	live, replay := setupBTCUSDT(t), setupBTCUSDT(t)
	dep := Command{Kind: KindSpotDeposit, User: 7, Asset: 2, Amount: 1_000_000, Key: k}
	var dec Command
	if err := DecodeCommand(EncodeCommand(nil, &dep), &dec); err != nil {
		t.Fatal(err)
	}
	rl, rr := result(live.do(t, dep)), result(replay.do(t, dec))
	if rl.Code != rr.Code || live.p.StateHash() != replay.p.StateHash() {
		t.Errorf("live deposit %v, the same deposit replayed from its encoding %v: states differ", rl.Code, rr.Code)
	}
}

// FuzzDecodeCommand: DecodeCommand never panics, and whatever it accepts is
// the canonical encoding of the command it returns.
func FuzzDecodeCommand(f *testing.F) {
	for _, b := range decodeSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Command
		err := DecodeCommand(b, &c)
		if err != nil {
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("error %v does not wrap ErrDecode", err)
			}
			return
		}
		if len(b) > MaxCommandSize {
			t.Fatalf("accepted %d bytes, MaxCommandSize %d", len(b), MaxCommandSize)
		}
		if out := EncodeCommand(nil, &c); !bytes.Equal(out, b) {
			t.Fatalf("not canonical:\n in  %x\n out %x\n cmd %+v", b, out, c)
		}
	})
}

func decodeSeeds() [][]byte {
	var out [][]byte
	cmds := genCommands(1, 400)
	for i := 0; i < len(cmds); i += 7 {
		b := EncodeCommand(nil, &cmds[i])
		out = append(out, b, b[:len(b)/2], b[:len(b)-1])
	}
	for _, c := range boundaryCommands() {
		out = append(out, EncodeCommand(nil, &c))
	}
	// hand-made malformed inputs: bad version, kind 0, a non-minimal varint,
	// a present-but-zero field, an 11-byte varint
	out = append(out, []byte{}, []byte{2, 3}, []byte{1, 0, 1, 2, 0}, []byte{1, 3, 0x81, 0x00, 0, 0},
		[]byte{1, 3, 1, 2, 0x80, 0x01, 0}, []byte{1, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	return out
}

// fuzzState is the processor state FuzzApply starts every input from:
// markets configured, users funded, books of resting orders, some of them
// partly filled, fees collected.
var fuzzState struct {
	once  sync.Once
	snap  []byte
	seeds [][]byte
	err   error
}

func fuzzBase() ([]byte, error) {
	fuzzState.once.Do(func() {
		prof := genProfile{users: 8, bench: true, targetLive: 40, seedOrders: 40}
		g := newGen(7, prof)
		p := New(Config{})
		var c Command
		for i := 0; i < g.setupLen()+300; i++ {
			g.next(&c)
			g.observe(p.Apply(&c))
		}
		if v := p.CheckInvariants(); len(v) != 0 {
			fuzzState.err = fmt.Errorf("fuzz base state breaks invariants: %+v", v)
			return
		}
		fuzzState.snap = p.AppendSnapshot(nil)
		// Seed inputs: short runs of property-mix commands against this state.
		g.prof.bench = false
		for i := 0; i < 96; i++ {
			var in []byte
			for k := 0; k < 1+i%4; k++ {
				g.next(&c)
				in = appendFrame(in, EncodeCommand(nil, &c))
			}
			fuzzState.seeds = append(fuzzState.seeds, in)
		}
	})
	return fuzzState.snap, fuzzState.err
}

// appendFrame appends one length-prefixed command encoding (FuzzApply's input format).
func appendFrame(dst, enc []byte) []byte {
	return append(append(dst, byte(len(enc))), enc...)
}

// fuzzApplyMaxCmds bounds the commands one FuzzApply input may carry.
const fuzzApplyMaxCmds = 8

// FuzzApply decodes up to eight length-prefixed commands from the input and
// applies them (seq renumbered) to a processor restored from fuzzBase. Apply
// must never panic, every invariant must hold after every command, and a
// rejected command must change nothing.
func FuzzApply(f *testing.F) {
	if _, err := fuzzBase(); err != nil {
		f.Fatal(err)
	}
	for _, s := range fuzzState.seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		snap, _ := fuzzBase()
		p, err := Restore(Config{}, snap)
		if err != nil {
			t.Fatal(err)
		}
		probe := stateProbe{window: math.MaxInt32}
		var c Command
		for n := 0; len(in) > 0 && n < fuzzApplyMaxCmds; n++ {
			l := min(int(in[0]), len(in)-1)
			frame := in[1 : 1+l]
			in = in[1+l:]
			if DecodeCommand(frame, &c) != nil {
				continue
			}
			c.Seq = p.LastSeq() + 1
			probe.capture(p, &c)
			ev := applyRecover(p, &c)
			if ev == nil {
				t.Fatalf("command %d %+v: Apply panicked", n, c)
			}
			if err := checkEvents(&c, ev, max(probe.time, c.Time)); err != nil {
				t.Fatalf("command %d %+v: %v", n, c, err)
			}
			if code := ev[len(ev)-1].Code; code != OK {
				if err := probe.verify(p, &c, ev, code); err != nil {
					t.Fatalf("command %d %+v: %v", n, c, err)
				}
			}
			if v := p.CheckInvariants(); len(v) != 0 {
				t.Fatalf("command %d %+v: invariants broken: %+v", n, c, v)
			}
			if err := deepIndexCheck(p); err != nil {
				t.Fatalf("command %d %+v: %v", n, c, err)
			}
		}
	})
}

// TestWriteFuzzCorpus rewrites testdata/fuzz/ when run with -core.writecorpus.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*flagWriteCorpus {
		t.Skip("run with -core.writecorpus to rewrite testdata/fuzz/")
	}
	write := func(target, name string, b []byte) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	seeds := decodeSeeds()
	for i, b := range slices.Clip(seeds) {
		if i%4 == 0 || i >= len(seeds)-6 {
			write("FuzzDecodeCommand", fmt.Sprintf("seed-%03d", i), b)
		}
	}
	if _, err := fuzzBase(); err != nil {
		t.Fatal(err)
	}
	for i, b := range fuzzState.seeds {
		if i%8 == 0 {
			write("FuzzApply", fmt.Sprintf("seed-%03d", i), b)
		}
	}
	// The regression that TestSTPExpireTakerNeverRestsCrossed pins down, as
	// FuzzApply input: on a new, empty market 3, user 1000 (funded in
	// fuzzBase) rests an ask, then crosses it with an expire-taker GTC bid.
	var in []byte
	in = appendFrame(in, EncodeCommand(nil, &Command{Kind: KindConfigMarket, Market: 3, Cfg: genMarketCfgs[1]}))
	in = appendFrame(in, EncodeCommand(nil, &Command{Kind: KindPlaceOrder, User: 1000, Market: 3, Side: Sell,
		Type: Limit, TIF: GTC, Price: genStartMid[1], Qty: genMarketCfgs[1].MinQty}))
	in = appendFrame(in, EncodeCommand(nil, &Command{Kind: KindPlaceOrder, User: 1000, Market: 3, Side: Buy,
		Type: Limit, TIF: GTC, STP: STPExpireTaker, Price: genStartMid[1] + genStep[1], Qty: genMarketCfgs[1].MinQty}))
	write("FuzzApply", "stp-expire-taker-rests-crossed", in)
}
