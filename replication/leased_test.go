package replication

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/ubscore/ubscore/core"
)

type fakeRep struct{ appended, waited atomic.Int64 }

func (f *fakeRep) Append(first core.Seq, cmds [][]byte) error {
	f.appended.Add(int64(len(cmds)))
	return nil
}

func (f *fakeRep) WaitStored(ctx context.Context, seq core.Seq) error {
	f.waited.Add(1)
	return nil
}

type fakeLease struct{ held atomic.Bool }

func (l *fakeLease) Held() bool { return l.held.Load() }

// Without the lease nothing more is appended and nothing stored is
// reported stored.
func TestLeasedReplicator(t *testing.T) {
	var rep fakeRep
	var lease fakeLease
	lease.held.Store(true)
	r := LeasedReplicator{Log: &rep, Lease: &lease}
	if err := r.Append(1, [][]byte{{1}, {2}}); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitStored(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if err := r.Append(3, [][]byte{{3}}); err != nil {
		t.Fatal(err)
	}
	lease.held.Store(false)
	if err := r.WaitStored(context.Background(), 3); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("WaitStored without the lease: %v", err)
	}
	if err := r.Append(4, [][]byte{{4}}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Append without the lease: %v", err)
	}
	if rep.appended.Load() != 3 || rep.waited.Load() != 2 {
		t.Fatalf("the log saw %d commands appended, %d waits", rep.appended.Load(), rep.waited.Load())
	}
}
