package replication

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ubscore/ubscore/core"
)

// DefaultHashEvery is how many commands apart the divergence check's
// state hashes are taken (NodeConfig.HashEvery).
const DefaultHashEvery = 100_000

// ErrDivergedState: a standby's state hash at a seq differs from the
// primary's at the same seq (a non-deterministic command, a corrupt replica):
// the standby stops applying the log (CRITICAL), never drifting silently.
var ErrDivergedState = errors.New("replication: the standby's state diverges from the primary's")

// hashCheck is the divergence check (docs/design.md, "Replication"): every node hashes its
// state at every multiple of every commands, on its state follower; the
// primary appends its hashes to the log (KindHash), a standby compares them
// with its own at the same seq.
type hashCheck struct {
	every uint64

	mu     sync.Mutex
	local  map[core.Seq]string // this node's hashes not yet compared (standby)
	remote map[core.Seq]string // the log's hashes not yet compared

	compared atomic.Uint64 // hashes compared equal
	diverged atomic.Pointer[error]
}

// maxPendingHashes bounds each side's uncompared hashes (the oldest go).
const maxPendingHashes = 64

func newHashCheck(every uint64) *hashCheck {
	return &hashCheck{every: every, local: map[core.Seq]string{}, remote: map[core.Seq]string{}}
}

// hook is the state follower's callback: a primary (primary() true)
// appends the hash to log, a standby compares it; a divergence calls stop.
func (c *hashCheck) hook(log *Log, primary func() bool, stop func(error)) func(seq core.Seq, hash string) {
	return func(seq core.Seq, hash string) {
		if primary() {
			if err := log.AppendHash(seq, hash); err != nil && !errors.Is(err, ErrNotWriter) && !errors.Is(err, ErrFenced) {
				log.log.Warn("replication: state hash not appended", "seq", seq, "err", err)
			}
			return
		}
		if err := c.compare(seq, hash, true); err != nil {
			stop(err)
		}
	}
}

// compare records a hash at seq, this node's (mine) or the log's, and
// compares it with the other side's if that is known.
func (c *hashCheck) compare(seq core.Seq, hash string, mine bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.diverged.Load(); p != nil {
		return *p
	}
	own, other := c.remote, c.local
	if mine {
		own, other = c.local, c.remote
	}
	theirs, ok := other[seq]
	if !ok {
		own[seq] = hash
		if len(own) > maxPendingHashes {
			oldest := seq
			for s := range own {
				oldest = min(oldest, s)
			}
			delete(own, oldest)
		}
		return nil
	}
	delete(other, seq)
	if theirs != hash {
		err := fmt.Errorf("%w: at seq %d this node's state hash is %s, the log's %s", ErrDivergedState, seq,
			pick(mine, hash, theirs), pick(mine, theirs, hash))
		c.diverged.Store(&err)
		return err
	}
	c.compared.Add(1)
	return nil
}

func pick(mine bool, a, b string) string {
	if mine {
		return a
	}
	return b
}
