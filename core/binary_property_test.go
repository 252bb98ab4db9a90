package core

// binary_property_test.go runs the property test of property_test.go over a
// stream that mixes the spot generator's commands with binary-market
// commands (binary_gen_test.go) on the same users and quote asset: after
// every command the full check (spot and binary invariants) must pass, a
// rejected command must have changed nothing, a shadow processor must
// produce identical events, and a processor restored from a mid-stream
// snapshot must replay to identical events and the same final state hash.
// 1M commands in make test-long; a short run in make test. The seed is
// printed; -core.seed N replays it.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPropertyBinaryStream(t *testing.T) {
	seed := propSeed(t)
	n := propCmds(1_000_000, 100_000)
	g := newGen(seed, propProfile())
	p, shadow := New(Config{}), New(Config{})
	users := make([]UserID, len(g.users))
	for i := range g.users {
		users[i] = g.users[i].id
	}
	bg := newBinGen(seed, p, users)
	midRand := rand.New(rand.NewPCG(seed, 43))
	midAt := g.setupLen() + n/4 + midRand.IntN(n/2+1)
	var q *Processor
	var clones cloneCheck
	var c Command
	var probe stateProbe
	probe.window = 8
	var stats propStats
	binCmds := 0
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, command %d %+v:\n%s\n(replay: -core.seed %d, see the first log line)", seed, i, c,
			fmt.Sprintf(format, args...), seed)
	}
	for i := 0; i < n; i++ {
		binary := i >= g.setupLen() && midRand.IntN(100) < 40
		mustReject := false
		if binary {
			bg.next(&c)
			g.seq++
			c.Seq, c.Time = g.seq, g.time
			mustReject = bg.mustReject
			binCmds++
		} else {
			g.next(&c)
			mustReject = g.mustReject
		}
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
			probe.capture(shadow, &c)
			if err := probe.verify(p, &c, ev, res.Code); err != nil {
				fail(i, "%v", err)
			}
			stats.rejectsChecked++
		} else if mustReject {
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
		g.observe(ev) // balances of both kinds; spot orders only
		bg.observe(ev)
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
		}
	}
	if hp, hq := p.StateHash(), q.StateHash(); hp != hq {
		t.Fatalf("seed %d: final hash %s, restored processor %s", seed, hp, hq)
	}
	if err := clones.end(p); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if bg.markets < 2 || bg.settled < 1 {
		t.Errorf("the stream went through %d binary markets, %d settled: too few lifecycles", bg.markets, bg.settled)
	}
	t.Logf("%d commands, %d binary; %d binary markets, %d settled; %d rejections (both kinds)", n, binCmds, bg.markets,
		bg.settled, bg.rejected)
	stats.log(t)
}
