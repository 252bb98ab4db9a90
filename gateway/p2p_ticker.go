package gateway

import (
	"context"
	"time"

	"github.com/ubscore/ubscore/core"
)

// DefaultP2PTickEvery is how often the transfer service's timer looks for
// due transfers.
const DefaultP2PTickEvery = 250 * time.Millisecond

// P2PTickObserver hears about every tick submitted: how many transfers it
// executed, how long it took (sequenced to answered), and a failure.
type P2PTickObserver func(executed int, d time.Duration, err error)

// RunP2PTicker is the transfer service's timer: every `every` it reads the
// view and, when a PENDING transfer is due, submits a sequenced KindP2PTick
// (which executes what is due at the tick's own time, in order); while a
// tick executes a full core.MaxP2PExecPerTick it submits the next at once.
// An idle service journals nothing. Execution is never lost to a crash: a
// due transfer stays PENDING in the core (and in its snapshots) until a
// tick executes it, so the first tick after a restart does. It returns when
// ctx ends.
func RunP2PTicker(ctx context.Context, b Backend, every time.Duration, obs P2PTickObserver) {
	runRounds(ctx, every, func() bool {
		now := time.Now().UnixNano()
		due := false
		if err := b.Read(func(p *core.Processor, _ *History) error {
			next, ok := p.P2PNextDue()
			due = ok && next <= now && !p.Halted() // a halted core refuses ticks: they wait for its resolution
			return nil
		}); err != nil || !due {
			return false
		}
		start := time.Now()
		res, err := b.SubmitResult(&core.Command{Kind: core.KindP2PTick})
		n := 0
		if err == nil {
			n = int(res.Qty)
		}
		if obs != nil {
			obs(n, time.Since(start), err)
		}
		return err == nil && n >= core.MaxP2PExecPerTick
	})
}

// runRounds is the service's timers' loop (the ticker, the retention):
// every `every` it calls round, and again at once while round answers true
// (it did a full batch: more is waiting), until ctx ends.
func runRounds(ctx context.Context, every time.Duration, round func() (again bool)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil && round() {
		}
	}
}
