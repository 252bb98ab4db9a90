package transfer

// These tests prove the transition table is exactly spec 2.2's, and that the
// Store applies it as a compare-and-set: every (from, to) pair of the eight
// states is tried against the database, and racing drivers get one winner.

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ubscore/ubscore/persist/transfer/model"
)

// legalPairs is spec 2.2 written out independently of fsm.go.
var legalPairs = map[[2]State]bool{
	{Init, SourcePending}:         true,
	{SourcePending, SourceDone}:   true,
	{SourcePending, Failed}:       true,
	{SourceDone, TargetPending}:   true,
	{TargetPending, Committed}:    true,
	{TargetPending, Compensating}: true,
	{Compensating, RolledBack}:    true,
}

func TestTransitionTableExact(t *testing.T) {
	for _, from := range AllStates {
		for _, to := range AllStates {
			if got, want := CanTransition(from, to), legalPairs[[2]State{from, to}]; got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
		if from.Terminal() != (from == Committed || from == Failed || from == RolledBack) {
			t.Errorf("%s: Terminal() = %v", from, from.Terminal())
		}
	}
	if CanTransition(State(5), SourcePending) || State(5).Valid() {
		t.Error("an unknown state id is accepted")
	}
	ids := map[State]int16{Init: 0, SourcePending: 10, SourceDone: 20, TargetPending: 30, Committed: 40,
		Failed: -10, Compensating: -20, RolledBack: -30}
	for s, id := range ids {
		if int16(s) != id {
			t.Errorf("%s has id %d, spec says %d", s, int16(s), id)
		}
	}
}

// TestStoreTransitionAllPairs walks every (from, to) pair through the
// database: exactly the legal ones are applied, and only from the expected
// state (FSM-001..006 rest on this).
func TestStoreTransitionAllPairs(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, from := range AllStates {
		for _, to := range AllStates {
			tr := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 100, from)
			won, err := h.store.Transition(ctx, tr.ReqID, from, to, "")
			legal := legalPairs[[2]State{from, to}]
			if legal && (!won || err != nil) {
				t.Errorf("%s -> %s: legal but refused (won=%v err=%v)", from, to, won, err)
			}
			if !legal && (won || err == nil) {
				t.Errorf("%s -> %s: illegal but accepted (won=%v err=%v)", from, to, won, err)
			}
			want := from
			if legal {
				want = to
			}
			if got := h.get(tr.ReqID).State; got != want {
				t.Errorf("%s -> %s: row in %s, want %s", from, to, got, want)
			}
			// A legal pair from the wrong current state is a lost CAS.
			if legal {
				won, err := h.store.Transition(ctx, tr.ReqID, from, to, "")
				if won || err != nil {
					t.Errorf("%s -> %s repeated: won=%v err=%v, want a lost CAS", from, to, won, err)
				}
			}
		}
	}
}

// TestCON001_CASOneWinner: many drivers CAS the same transfer at once;
// exactly one wins each transition.
func TestCON001_CASOneWinner(t *testing.T) {
	h := newHarness(t)
	tr := h.insertAt(7, model.AccountFunding, model.AccountSpot, usdt, 100, Init)
	for _, step := range [][2]State{{Init, SourcePending}, {SourcePending, SourceDone}} {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				won, err := h.store.Transition(context.Background(), tr.ReqID, step[0], step[1], "")
				if err != nil {
					t.Error(err)
				}
				if won {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%s -> %s: %d winners, want 1", step[0], step[1], wins.Load())
		}
	}
}
