package replication

import (
	"context"
	"fmt"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// LeasedReplicator is the primary's journal.Replicator under automatic
// failover (issue 38): the log (safety: the expected-sequence fence), plus
// the lease (liveness: who should be the primary). Once the lease is not
// held — lost to its deadline, to another node's write, or released — it
// appends nothing more and reports no group commit stored, so the pipeline
// stops and acknowledges nothing more at once, even if the log would still
// take this node's appends (nobody has claimed it yet). A group commit
// stored but refused here stays in the log unacknowledged: its client sees
// an error, and the next primary applies it (the usual unknown outcome of a
// request whose answer is lost).
type LeasedReplicator struct {
	Log   journal.Replicator // the *Log in production
	Lease interface{ Held() bool }
}

// Append appends to the log while the lease is held.
func (r LeasedReplicator) Append(first core.Seq, cmds [][]byte) error {
	if !r.Lease.Held() {
		return fmt.Errorf("%w: not appending commands %d..", ErrLeaseLost, first)
	}
	return r.Log.Append(first, cmds)
}

// WaitStored waits for the log, then answers stored only if the lease is
// still held.
func (r LeasedReplicator) WaitStored(ctx context.Context, seq core.Seq) error {
	if err := r.Log.WaitStored(ctx, seq); err != nil {
		return err
	}
	if !r.Lease.Held() {
		return fmt.Errorf("%w: command %d stored in the log but not acknowledged", ErrLeaseLost, seq)
	}
	return nil
}

var (
	_ journal.Replicator       = LeasedReplicator{}
	_ journal.Replicator       = (*Log)(nil)
	_ interface{ Held() bool } = (*Lease)(nil)
)
