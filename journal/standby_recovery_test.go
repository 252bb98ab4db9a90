package journal

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

// brokenMarketDir is a data dir whose WAL holds a corruption of market 1
// (a fault command that no check saw before the stop): its next recovery
// finds market 1 open (not halted).
func brokenMarketDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	pl := protStart(t, dir)
	runAll(t, pl, protSetup())
	if r := submit(t, pl, core.Command{Kind: core.KindFault, Flags: uint8(core.FaultLevelDrift), Market: 1, Side: core.Sell, Amount: 4}); r.Code != core.OK {
		t.Fatal(r.Code)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStandbyRecoverySubmitsNothing: a standby whose recovery finds a
// market broken starts (before, its recovery's breaker trip was a Submit,
// refused on a standby, and Start failed: every replicated node starts as a
// standby), submits nothing (its WAL ends where it did; the market stays
// as the primary's commands leave it) and logs CRITICAL. Once promoted,
// TripDeferred halts the market with RECOVERY_FAILED through the ring.
func TestStandbyRecoverySubmitsNothing(t *testing.T) {
	dir := brokenMarketDir(t)
	var logs walLogBuf
	pl := protStart(t, dir, func(c *Config) { c.Standby, c.Logger = true, textLog(&logs) })
	defer pl.Close()
	last := pl.DurableSeq()
	if rep := pl.Recovery(); len(rep.Open) != 1 || rep.Open[0].Market != 1 {
		t.Fatalf("recovery report %+v", rep)
	}
	if v := marketOf(t, pl, 1); v.Status != core.MarketActive {
		t.Fatalf("a standby's recovery changed market 1: %+v", v)
	}
	if pl.DurableSeq() != last || pl.AppliedSeq() != last {
		t.Fatalf("a standby's recovery submitted: durable %d applied %d, WAL ended at %d", pl.DurableSeq(), pl.AppliedSeq(), last)
	}
	if !strings.Contains(logs.String(), "CRITICAL") || !strings.Contains(logs.String(), "not tripping") {
		t.Fatalf("no CRITICAL line for the untripped violations:\n%s", logs.String())
	}
	if err := pl.TripDeferred(context.Background()); !errors.Is(err, ErrStandby) {
		t.Fatalf("TripDeferred before the promotion: %v, want ErrStandby", err)
	}
	pl.Promote(nil)
	if err := pl.TripDeferred(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := marketOf(t, pl, 1); v.Status != core.MarketHalted || v.HaltReason != core.ReasonRecoveryFailed {
		t.Fatalf("market 1 after the promotion %+v", v)
	}
	if pl.DurableSeq() != last+1 {
		t.Fatalf("the promoted node's trip: durable %d, want %d", pl.DurableSeq(), last+1)
	}
	if err := pl.TripDeferred(context.Background()); err != nil || pl.DurableSeq() != last+1 {
		t.Fatalf("a second TripDeferred: %v, durable %d: it trips once", err, pl.DurableSeq())
	}
	if v := marketOf(t, pl, 2); v.Status != core.MarketActive {
		t.Fatalf("market 2 %+v", v)
	}
}

// TestPromotedStandbyTripsOnlyWhatIsStillOpen: the primary's own trip of
// the market, applied by the standby before its promotion, leaves the
// promoted node nothing to trip (the state is checked again, not the
// recovery's list replayed).
func TestPromotedStandbyTripsOnlyWhatIsStillOpen(t *testing.T) {
	dir := brokenMarketDir(t)
	pl := protStart(t, dir, func(c *Config) { c.Standby = true })
	defer pl.Close()
	last := pl.DurableSeq()
	trip := core.Command{Kind: core.KindBreakerTrip, Seq: last + 1, Time: 1, Market: 1, Flags: uint8(core.ReasonInvariantBalance),
		Text: BreakerContext("periodic", last, pl.Recovery().Open)}
	if err := pl.SubmitSequenced([]core.Command{trip}); err != nil {
		t.Fatal(err)
	}
	for pl.DurableSeq() < last+1 || pl.ViewSeq() < last+1 {
		select {
		case <-pl.Dead():
			t.Fatal(pl.Err())
		case <-time.After(time.Millisecond):
		}
	}
	pl.Promote(nil)
	if err := pl.TripDeferred(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pl.DurableSeq() != last+1 {
		t.Fatalf("the promoted node tripped a halted market again: durable %d, want %d", pl.DurableSeq(), last+1)
	}
	if v := marketOf(t, pl, 1); v.Status != core.MarketHalted || v.HaltReason != core.ReasonInvariantBalance {
		t.Fatalf("market 1 %+v", v)
	}
}
