package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ubscore/ubscore/core"
)

// The retention of finished spec 003 transfers (docs/p2p-retention.md).
//
// RunP2PRetention is the timer that makes the core forget transfers
// finished (COMPLETED, DEBIT_FAILED, CANCELLED) longer than retention ago:
// every `every` it reads the view, and when some are due it waits for the
// archive (the sink) to have persisted the view's seq — so every transfer
// it forgets is in p2p_transfers in its final state — and submits a
// sequenced KindP2PForget whose cutoff is min(now - retention, the view's
// last command time - 1). The strict bound matters: a transfer finished
// after the view, at the same nanosecond as its last command, is not yet
// persisted and must not go. The cutoff is in the command, so replay
// forgets exactly the same transfers at the same seq. One forget drops at
// most about P2PForgetBatch (the cutoff is lowered to the batch's last
// doneAt; those finished at that same instant go with it), so a backlog
// (a Postgres outage) drains in bounded steps instead of one long command.

// P2PForgetBatch is about how many transfers one forget drops.
const P2PForgetBatch = 20_000

// DefaultP2PRetention is --p2p-retention's default.
const DefaultP2PRetention = 24 * time.Hour

// P2PRetentionObserver hears about every forget submitted: how many
// transfers it forgot, and a failure (nil when none).
type P2PRetentionObserver func(forgotten int, err error)

// RunP2PRetention runs until ctx ends. persisted is the archive's persisted seq.
func RunP2PRetention(ctx context.Context, b Backend, retention, every time.Duration, persisted func() core.Seq,
	obs P2PRetentionObserver) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for ctx.Err() == nil {
			n, err := P2PForgetStep(ctx, b, time.Now().Add(-retention).UnixNano(), persisted, every)
			if obs != nil && (n > 0 || err != nil) {
				obs(n, err)
			}
			if err != nil || n < P2PForgetBatch {
				break
			}
		}
	}
}

// P2PForgetStep forgets up to about P2PForgetBatch transfers finished at or
// before before, once the archive holds them (waiting at most wait for
// it), and returns how many the core forgot.
func P2PForgetStep(ctx context.Context, b Backend, before int64, persisted func() core.Seq, wait time.Duration) (int, error) {
	var cutoff int64
	var seq core.Seq
	if err := b.Read(func(p *core.Processor, _ *History) error {
		seq = p.LastSeq()
		cutoff, _ = p.P2PForgetCutoff(min(before, p.LastTime()-1), P2PForgetBatch)
		return nil
	}); err != nil || cutoff == 0 {
		return 0, err
	}
	deadline := time.Now().Add(wait)
	for persisted() < seq { // the archive must hold them before the core lets go
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, nil // the sink lags: the next round tries again
		}
		time.Sleep(10 * time.Millisecond)
	}
	res, err := b.SubmitResult(&core.Command{Kind: core.KindP2PForget, Price: core.Price(cutoff)})
	if err != nil {
		return 0, err
	}
	if res.Code != core.OK {
		return 0, fmt.Errorf("p2p: forget refused: %v", res.Code)
	}
	return int(res.Qty), nil
}

// StartP2PRetention runs RunP2PRetention in the background, every tenth of
// the retention (between 100 ms and a minute), logging what it forgets. It
// returns a stop function that also calls next (the service's other stop).
func StartP2PRetention(b Backend, retention time.Duration, persisted func() core.Seq, next func(), log *slog.Logger) func() {
	every := min(max(retention/10, 100*time.Millisecond), time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunP2PRetention(ctx, b, retention, every, persisted, func(n int, err error) {
			if err != nil {
				log.Warn("p2p: forgetting finished transfers failed; retrying later", "err", err)
				return
			}
			log.Info("p2p: the core forgot finished transfers past the retention", "transfers", n, "retention", retention)
		})
	}()
	log.Info("p2p: retention on", "retention", retention, "every", every)
	return func() {
		cancel()
		<-done
		next()
	}
}
