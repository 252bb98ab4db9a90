package chaintx

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
)

// Remediation actions (spec §3.7), leader-only and fenced: the signed
// transaction and its audit row are stored (fenced) before anything is
// broadcast, so two nodes can never both act, and a crash after storing
// leaves a tx the resubmit scheduler sends. Whichever signed tx of a nonce
// is mined decides the outcome: only one can be.
//
// Repeats: CANCEL re-sends the CANCEL already signed for the nonce, if any;
// PLACEHOLDER re-sends the placeholders of nonces it filled before (one
// managed tx per nonce); REPLACE signs a new replacement with fees bumped
// again over the latest (an operator who repeats it asks for more fee).
// Every call is audited.

// cancelGas is the gas of a plain value transfer.
const cancelGas = 21000

// Remediate runs action on tx id now (the manual hook trigger, POST
// /admin/v1/tx/{id}/remediate).
func (m *Manager) Remediate(ctx context.Context, id TxID, action Action, reason string) (Remediation, error) {
	t, err := m.cfg.Store.Get(ctx, id)
	if err != nil {
		return Remediation{}, err
	}
	if _, ok := m.signers[t.Submitter]; !ok {
		return Remediation{}, ErrNoSubmitter
	}
	l, ok := m.lease(t.Submitter)
	if !ok {
		return Remediation{}, ErrNotLeader
	}
	if action == ActionResolveForeign {
		err = m.resolveForeign(ctx, l, t, "operator: "+reason)
	} else {
		err = m.remediate(ctx, l, t, action, "operator: "+reason)
	}
	if err != nil {
		m.fenced(l, "remediate", err)
		return Remediation{}, err
	}
	rs, err := m.cfg.Store.Remediations(ctx, id)
	if err != nil || len(rs) == 0 {
		return Remediation{}, err
	}
	return rs[len(rs)-1], nil
}

func (m *Manager) remediate(ctx context.Context, l Lease, t Tx, action Action, reason string) error {
	if _, err := ParseAction(string(action)); err != nil {
		return err
	}
	switch {
	case t.State.Final():
		return ErrTxFinal
	case t.Nonce == nil:
		return ErrNoNonce
	case t.Receipt != nil && action != ActionNoop:
		return ErrTxMined
	}
	if action == ActionCancel || action == ActionReplace {
		if err := m.nonceTaken(ctx, t); err != nil {
			return err
		}
	}
	rem := Remediation{Submitter: t.Submitter, TxID: t.ID, Nonce: *t.Nonce, Action: action, NodeID: m.cfg.NodeID,
		FencingToken: l.Token, Reason: reason}
	m.met.Remediations.WithLabelValues(string(action)).Inc()
	m.log.Info("chaintx: remediation", "submitter", t.Submitter, "tx_id", t.ID, "nonce", *t.Nonce, "action", action,
		"fencing_token", l.Token, "reason", reason)
	switch action {
	case ActionNoop:
		return m.cfg.Store.Audit(ctx, l, rem)
	case ActionCancel:
		for _, s := range t.Signed {
			if s.Kind == KindCancel {
				rem.Hashes = []Hash{s.Hash}
				if err := m.cfg.Store.Audit(ctx, l, rem); err != nil {
					return err
				}
				m.send(ctx, s.Raw)
				return nil
			}
		}
		return m.signAndSend(ctx, l, t, KindCancel, Payload{To: t.Submitter, Value: new(big.Int), GasLimit: cancelGas}, rem)
	case ActionReplace:
		return m.signAndSend(ctx, l, t, KindReplace, t.Payload, rem)
	default:
		return m.placeholders(ctx, l, t, rem)
	}
}

// signAndSend signs p in t's nonce with fees bumped over its latest signed
// tx, stores it with the audit row, then broadcasts it.
func (m *Manager) signAndSend(ctx context.Context, l Lease, t Tx, kind SignedKind, p Payload, rem Remediation) error {
	now, err := m.currentFees(ctx)
	if err != nil {
		return err
	}
	last := t.Latest()
	fees := bump(Fees{MaxFee: last.MaxFee, MaxTip: last.MaxTip}, now)
	h, raw, err := m.signers[t.Submitter].Sign(Unsigned{Nonce: *t.Nonce, Payload: p, Fees: fees})
	if err != nil {
		return fmt.Errorf("chaintx: sign %s: %w", kind, err)
	}
	rem.Hashes = []Hash{h}
	if err := m.cfg.Store.AddSigned(ctx, l, t.ID, Signed{Hash: h, Raw: raw, Kind: kind, MaxFee: fees.MaxFee, MaxTip: fees.MaxTip}, rem); err != nil {
		return err
	}
	res, errText := m.send(ctx, raw)
	m.met.Resubmit.WithLabelValues(res).Inc()
	if errText != "" {
		m.log.Warn("chaintx: remediation broadcast failed (resubmitted later)", "tx_id", t.ID, "kind", kind, "err", errText)
	}
	return nil
}

// placeholders fills every nonce between the chain's mined nonce and t's
// that no managed tx holds with a zero-value transfer to self, each a
// managed tx of its own (request_id placeholder:<nonce>), tracked like any other.
func (m *Manager) placeholders(ctx context.Context, l Lease, t Tx, rem Remediation) error {
	mined, err := m.cfg.Chain.MinedNonce(ctx, t.Submitter)
	if err != nil {
		return err
	}
	held := map[uint64]bool{}
	if mined < *t.Nonce {
		if held, err = m.cfg.Store.NoncesHeld(ctx, t.Submitter, mined, *t.Nonce); err != nil {
			return err
		}
	}
	fees, err := m.currentFees(ctx)
	if err != nil {
		return err
	}
	var filled []Tx
	for n := mined; n < *t.Nonce; n++ {
		if held[n] {
			continue
		}
		p := Payload{To: t.Submitter, Value: new(big.Int), GasLimit: cancelGas}
		h, raw, err := m.signers[t.Submitter].Sign(Unsigned{Nonce: n, Payload: p, Fees: fees})
		if err != nil {
			return err
		}
		nn := n
		ph := Tx{Submitter: t.Submitter, RequestID: "placeholder:" + strconv.FormatUint(n, 10), Payload: p, Nonce: &nn, Hash: h,
			Signed: []Signed{{Hash: h, Raw: raw, Kind: KindPlaceholder, MaxFee: fees.MaxFee, MaxTip: fees.MaxTip}}}
		r := rem
		r.Hashes = []Hash{h}
		got, err := m.cfg.Store.InsertPlaceholder(ctx, l, ph, r)
		if err != nil {
			return err
		}
		filled = append(filled, got)
	}
	if len(filled) == 0 {
		rem.Reason += fmt.Sprintf(" (no gap: nonces %d..%d are held)", mined, *t.Nonce)
		return m.cfg.Store.Audit(ctx, l, rem)
	}
	rs := make([]SubmitResult, 0, len(filled))
	for _, p := range filled {
		res, errText := m.send(ctx, p.Latest().Raw)
		m.met.TxSubmit.WithLabelValues(res).Inc()
		rs = append(rs, SubmitResult{ID: p.ID, Err: errText})
	}
	return m.submitted(ctx, l, rs)
}
