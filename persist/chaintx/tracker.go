package chaintx

import (
	"context"
	"errors"
	"time"

	"github.com/ubscore/ubscore/logging"
)

// The tracker: for every submitter this node leads, each TrackInterval,
// the ReceiptChecker, the FinalityManager, the ResubmitScheduler and the
// STUCK detector (spec §2.3.2, §2.3.3, §3.6, §3.9), then the pile-up gauges.
// One loop, so one chain view per pass.

// trackBatch bounds the txs one pass handles per step and submitter.
const trackBatch = 500

func (m *Manager) trackLoop(ctx context.Context) {
	Every(ctx, m.cfg.TrackInterval, func() { m.TrackOnce(ctx) })
}

// TrackOnce runs one pass of the tracker for every submitter this node
// leads (exported for tests that drive it step by step).
func (m *Manager) TrackOnce(ctx context.Context) {
	for _, s := range m.subs {
		l, ok := m.lease(s)
		if !ok {
			continue
		}
		m.workerOf(s).nudge(s) // CREATED rows (e.g. withdrawals) get nonces
		// The gauges first: they never wait for the chain (a hung node
		// must not freeze the oldest-pending alert).
		if st, err := m.cfg.Store.Stats(ctx, s); err == nil {
			m.met.PendingOldest.WithLabelValues(string(s)).Set(st.OldestAge.Seconds())
			m.met.Pending.WithLabelValues(string(s)).Set(float64(st.Pending))
		}
		for _, step := range []func(context.Context, Lease) error{m.resubmit, m.checkReceipts, m.finality, m.detectStuck} {
			if err := step(ctx, l); err != nil {
				if m.fenced(l, "track", err) || ctx.Err() != nil {
					break
				}
				m.log.Warn("chaintx: tracker step failed", "submitter", s, "err", err)
			}
		}
	}
}

// resubmit is the ResubmitScheduler: fenced claim first, then the same
// nonce and signed payload (the latest signed tx of the nonce) again. A
// STUCK tx backs off (backoff.go): one WARN per doubling, DEBUG at the cap.
func (m *Manager) resubmit(ctx context.Context, l Lease) error {
	txs, err := m.cfg.Store.ClaimResubmit(ctx, l, trackBatch, m.resubmitDelay)
	if err != nil || len(txs) == 0 {
		return err
	}
	rs := make([]SubmitResult, 0, len(txs))
	for _, t := range txs {
		res, errText := m.send(ctx, t.Latest().Raw)
		m.met.Resubmit.WithLabelValues(res).Inc()
		rs = append(rs, SubmitResult{ID: t.ID, Err: errText})
		args := []any{"submitter", t.Submitter, "tx_id", t.ID, "nonce", *t.Nonce, "tx_hash", t.Latest().Hash,
			"fencing_token", l.Token, "result", res, "attempt", t.SubmitAttempts}
		switch next := m.resubmitDelay(t); {
		case t.State != Stuck:
			m.log.Info("chaintx: resubmitted", args...)
		case next > t.ResubmitBackoff:
			m.log.Warn("chaintx: resubmitted a STUCK tx: backing off", append(args, "next_in", next.String(),
				"max_interval", m.cfg.ResubmitMaxInterval.String())...)
		default:
			m.log.Debug("chaintx: resubmitted a STUCK tx", append(args, "next_in", next.String())...)
		}
	}
	return m.submitted(ctx, l, rs)
}

// checkReceipts is the ReceiptChecker: every signed tx of a nonce is asked
// for (whichever is mined decides); "not found" re-queues after
// ReceiptInterval, an error backs off and goes to the end of the queue.
func (m *Manager) checkReceipts(ctx context.Context, l Lease) error {
	txs, err := m.cfg.Store.ReceiptCandidates(ctx, l.Submitter, trackBatch)
	if err != nil || len(txs) == 0 {
		return err
	}
	us := make([]ReceiptUpdate, 0, len(txs))
	for _, t := range txs {
		u := ReceiptUpdate{ID: t.ID, Retry: m.cfg.ReceiptInterval}
		for _, s := range t.Signed {
			r, err := m.cfg.Chain.Receipt(ctx, s.Hash)
			if errors.Is(err, ErrReceiptNotFound) {
				continue
			}
			if err != nil {
				u.Err = err.Error()
				u.Retry = min(m.cfg.ReceiptMaxDelay, m.cfg.ReceiptInterval*4)
				break
			}
			u.Receipt = &Receipt{TxHash: s.Hash, Kind: s.Kind, BlockNumber: r.BlockNumber, BlockHash: r.BlockHash, Success: r.Success}
			break
		}
		switch {
		case u.Receipt != nil:
			m.met.ReceiptCheck.WithLabelValues("found").Inc()
			m.log.Info("chaintx: receipt", "submitter", t.Submitter, "tx_id", t.ID, "nonce", *t.Nonce,
				"tx_hash", u.Receipt.TxHash, "kind", u.Receipt.Kind, "block", u.Receipt.BlockNumber, "success", u.Receipt.Success)
		case u.Err != "":
			m.met.ReceiptCheck.WithLabelValues("error").Inc()
		default:
			m.met.ReceiptCheck.WithLabelValues("not_found").Inc()
		}
		us = append(us, u)
	}
	return m.cfg.Store.RecordReceipts(ctx, l, us)
}

// chainView is one consistent view of the chain for a finality pass (spec
// §3.6): the head and each height's canonical hash are read once.
type chainView struct {
	m      *Manager
	head   uint64
	hashes map[uint64]Hash
}

func (v *chainView) hashAt(ctx context.Context, n uint64) (Hash, error) {
	if h, ok := v.hashes[n]; ok {
		return h, nil
	}
	if n > v.head {
		return "", nil // beyond the head of this view: not canonical (a reorg shortened the chain)
	}
	h, err := v.m.cfg.Chain.BlockHash(ctx, n)
	if err != nil {
		return "", err
	}
	v.hashes[n] = h
	return h, nil
}

// finality is the FinalityManager: a receipt whose block is no longer
// canonical goes back to TRACKING; one Finality blocks deep becomes final.
func (m *Manager) finality(ctx context.Context, l Lease) error {
	txs, err := m.cfg.Store.FinalityCandidates(ctx, l.Submitter, trackBatch)
	if err != nil || len(txs) == 0 {
		return err
	}
	head, err := m.cfg.Chain.Head(ctx)
	if err != nil {
		return err
	}
	v := &chainView{m: m, head: head, hashes: map[uint64]Hash{}}
	for _, t := range txs {
		r := t.Receipt
		h, err := v.hashAt(ctx, r.BlockNumber)
		if err != nil {
			return err
		}
		if h != r.BlockHash {
			if err := m.cfg.Store.Reorged(ctx, l, t.ID, r.BlockHash); err != nil {
				return err
			}
			m.met.Reorgs.Inc()
			m.log.Warn("chaintx: receipt reorged out: back to TRACKING", "submitter", t.Submitter, "tx_id", t.ID,
				"nonce", *t.Nonce, "tx_hash", r.TxHash, "block", r.BlockNumber, "fencing_token", l.Token,
				"state_before", t.State, "state_after", Tracking)
			continue
		}
		if head+1 < r.BlockNumber+m.cfg.Finality {
			continue
		}
		st, sub := Confirmed, ""
		switch {
		case r.Kind.Consumes() && t.Signed[0].Kind == KindOriginal: // our CANCEL took the nonce
			st, sub = FailedFinal, SubCancelled
		case !r.Success:
			st, sub = FailedFinal, SubReverted
		}
		if err := m.cfg.Store.Finalize(ctx, l, t.ID, st, sub); err != nil {
			return err
		}
		m.met.Finalized.WithLabelValues(string(st)).Inc()
		m.log.Info("chaintx: final", "submitter", t.Submitter, "tx_id", t.ID, "nonce", *t.Nonce, "tx_hash", r.TxHash,
			"fencing_token", l.Token, "state_before", t.State, "state_after", st, "sub_state", sub)
	}
	return nil
}

// detectStuck moves txs without a receipt for StuckAfter to STUCK, raises
// the CRITICAL alert and asks the hook.
func (m *Manager) detectStuck(ctx context.Context, l Lease) error {
	txs, err := m.cfg.Store.MarkStuck(ctx, l, m.cfg.StuckAfter, trackBatch)
	if err != nil || len(txs) == 0 {
		return err
	}
	st, _ := m.cfg.Store.Stats(ctx, l.Submitter)
	for _, t := range txs {
		m.met.Stuck.Inc()
		age := time.Duration(0)
		if t.AllocatedAt != nil {
			age = t.UpdatedAt.Sub(*t.AllocatedAt)
		}
		logging.Critical(ctx, m.log, "chaintx: transaction STUCK: no receipt; operator action may be needed",
			"submitter", t.Submitter, "tx_id", t.ID, "nonce", *t.Nonce, "tx_hash", t.Hash, "fencing_token", l.Token,
			"state_before", Tracking, "state_after", Stuck, "age", age.String(), "attempts", t.SubmitAttempts)
		d := m.cfg.Hook.Decide(ctx, ResolutionContext{Submitter: t.Submitter, TxID: t.ID, RequestID: t.RequestID,
			Nonce: *t.Nonce, TxHash: t.Hash, State: Stuck, SubmitAttempts: t.SubmitAttempts, LastError: t.LastError,
			Age: age, PendingQueueDepth: st.Pending})
		if err := m.remediate(ctx, l, t, d.Action, "hook: "+d.Reason); err != nil {
			if m.fenced(l, "remediate", err) {
				return nil
			}
			m.log.Warn("chaintx: hook action failed", "tx_id", t.ID, "action", d.Action, "err", err)
		}
	}
	return nil
}
