package gateway

import (
	"context"
	"errors"
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
// transfers it forgot, and a failure (nil when none; ErrP2PArchiveBehind
// when the archive had not persisted them in time and nothing was
// submitted).
type P2PRetentionObserver func(forgotten int, err error)

// ErrP2PArchiveBehind: the archive (the sink's p2p_transfers) has not
// persisted the view's seq within the round's wait, so the core keeps its
// finished transfers until a later round (they are not forgotten before
// Postgres holds them).
var ErrP2PArchiveBehind = errors.New("p2p: the archive has not persisted the transfers to forget yet")

// RunP2PRetention runs until ctx ends. persisted is the archive's persisted seq.
func RunP2PRetention(ctx context.Context, b Backend, retention, every time.Duration, persisted func() core.Seq,
	obs P2PRetentionObserver) {
	runRounds(ctx, every, func() bool {
		n, err := P2PForgetStep(ctx, b, time.Now().Add(-retention).UnixNano(), persisted, every)
		if obs != nil && (n > 0 || err != nil) {
			obs(n, err)
		}
		return err == nil && n >= P2PForgetBatch
	})
}

// P2PForgetStep forgets up to about P2PForgetBatch transfers finished at or
// before before, once the archive holds them (waiting at most wait for
// it), and returns how many the core forgot. When the archive is still
// behind after wait it submits nothing and returns ErrP2PArchiveBehind.
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
	if !awaitPersisted(ctx, persisted, seq, wait) { // the archive must hold them before the core lets go
		if ctx.Err() != nil {
			return 0, nil // stopping
		}
		return 0, fmt.Errorf("%w (at seq %d, the view at %d)", ErrP2PArchiveBehind, persisted(), seq)
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

// p2pRetentionLogEvery bounds the retention's warnings: a sink that lags
// (or a busy core) would otherwise log one every round.
const p2pRetentionLogEvery = time.Minute

// logLimiter lets one line through per interval and counts the others.
type logLimiter struct {
	every   time.Duration
	last    time.Time // of the last line let through (zero: none yet)
	dropped int       // since it
}

// allow reports whether a line may be logged at now, and how many were
// held back since the last one (reset when it allows).
func (l *logLimiter) allow(now time.Time) (bool, int) {
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.dropped++
		return false, 0
	}
	d := l.dropped
	l.last, l.dropped = now, 0
	return true, d
}

// StartP2PRetention runs RunP2PRetention in the background, every tenth of
// the retention (between 100 ms and a minute), logging what it forgets and
// (at most once a minute) why it could not; pm (may be nil) counts the
// rounds put off because the archive lags. It returns a stop function that
// also calls next (the service's other stop).
func StartP2PRetention(b Backend, retention time.Duration, persisted func() core.Seq, next func(), pm *P2PMetrics, log *slog.Logger) func() {
	every := min(max(retention/10, 100*time.Millisecond), time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lim := logLimiter{every: p2pRetentionLogEvery}
		RunP2PRetention(ctx, b, retention, every, persisted, func(n int, err error) {
			if err != nil {
				behind := errors.Is(err, ErrP2PArchiveBehind)
				if pm != nil {
					if behind {
						pm.forgetBehind.Inc()
					} else {
						pm.forgetErrs.Inc()
					}
				}
				if ok, held := lim.allow(time.Now()); ok {
					if behind {
						log.Warn("p2p: finished transfers past the retention are kept: the archive lags; retrying later",
							"err", err, "wait", every, "like_it_since_last_line", held)
					} else {
						log.Warn("p2p: forgetting finished transfers failed; retrying later", "err", err, "like_it_since_last_line", held)
					}
				}
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
