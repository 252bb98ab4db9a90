package replication

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/core"
)

// WAL is what async replication reads: the primary's durable commands.
type WAL interface {
	DurableSeq() core.Seq
	IterateWAL(from core.Seq, fn func(seq core.Seq, payload []byte) error) error
}

// Async is async replication (--replication async): a follower of the
// primary's durable WAL that appends it to the log behind the
// acknowledgements. A command is acknowledged once fsynced locally; the
// log lags by Lag. If the primary's host dies, the commands it acknowledged
// and the log did not yet hold are lost to a standby that takes over: the
// loss window is the lag (the ubs_replication_lag_* metrics).
type Async struct {
	log  *Log
	wal  WAL
	poll time.Duration

	appended atomic.Uint64 // the last command the log holds
}

// MaxAsyncBatch bounds the commands one append of Async carries.
const MaxAsyncBatch = 4096

// NewAsync returns async replication of wal into log, which must be
// claimed (the caller's Standby.Promote).
func NewAsync(log *Log, wal WAL) *Async {
	a := &Async{log: log, wal: wal, poll: time.Millisecond}
	a.appended.Store(uint64(log.Appended()))
	return a
}

// Appended is the last command the log holds.
func (a *Async) Appended() core.Seq { return core.Seq(a.appended.Load()) }

// Lag is how many durable commands the log does not hold yet.
func (a *Async) Lag() uint64 {
	d, ap := uint64(a.wal.DurableSeq()), a.appended.Load()
	if d > ap {
		return d - ap
	}
	return 0
}

// Run appends the WAL to the log until ctx ends or the log fences this
// node (ErrFenced).
func (a *Async) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		from := core.Seq(a.appended.Load()) + 1
		if a.wal.DurableSeq() < from {
			select {
			case <-ctx.Done():
			case <-time.After(a.poll):
			}
			continue
		}
		last, err := appendWAL(ctx, a.log, a.wal, from, a.wal.DurableSeq())
		if err != nil {
			return err
		}
		a.appended.Store(uint64(last))
	}
	return ctx.Err()
}

// appendWAL appends the WAL's commands from..to (at most MaxAsyncBatch of
// them) to log and waits until it stores them; it returns the last one
// appended. The WAL must hold them all, in order.
func appendWAL(ctx context.Context, log *Log, wal WAL, from, to core.Seq) (core.Seq, error) {
	to = min(to, from+MaxAsyncBatch-1)
	batch := make([][]byte, 0, to-from+1)
	err := wal.IterateWAL(from, func(seq core.Seq, p []byte) error {
		if seq > to {
			return errStop
		}
		if want := from + core.Seq(len(batch)); seq != want {
			return fmt.Errorf("replication: the WAL holds %d where %d was due", seq, want)
		}
		batch = append(batch, append([]byte(nil), p...))
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, err
	}
	if last := from + core.Seq(len(batch)) - 1; last != to {
		return 0, fmt.Errorf("replication: the WAL holds commands %d..%d of %d..%d", from, last, from, to)
	}
	if err := log.Append(from, batch); err != nil {
		return 0, err
	}
	return to, log.WaitStored(ctx, to)
}
