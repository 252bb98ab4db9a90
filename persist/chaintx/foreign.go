package chaintx

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// A nonce taken outside the exchange (issue 33 item 1): someone with the
// hot key signed another tx in the nonce of one of ours and it was mined.
// Ours can never be mined then; it goes STUCK and its withdrawal is not
// refunded (it might still be mined, as far as the tracker can tell), and a
// CANCEL or REPLACE in that nonce can never be mined either (refused with
// ErrNonceTaken). RESOLVE_FOREIGN is the operator's way out, after a proof
// from the chain that the payload did not and will not happen:
//
//  1. the tx is STUCK, with no receipt recorded (else ErrNotStuck / ErrTxMined);
//  2. the nonce is used at a block --chain-finality deep: with head H and
//     finality F, eth_getTransactionCount(submitter, H+1-F) > nonce (the
//     same depth at which the tracker finalizes a receipt; else
//     ErrNonceNotFinal);
//  3. none of the txs we signed for the nonce (original, replacements,
//     cancels) has a receipt (else ErrTxMined: the mined tx is ours, and the
//     tracker finalizes it). One tx per nonce can be mined, so the one that
//     used it is none of ours.
//
// Then, in one fenced transaction: FAILED_FINAL (sub_state FOREIGN_NONCE),
// the completion (the withdrawal settler refunds it, once: CAS from
// PENDING), and the audit row with the operator's reason and the proof.

// resolveForeign runs the proof and, if it holds, the resolution.
func (m *Manager) resolveForeign(ctx context.Context, l Lease, t Tx, reason string) error {
	switch {
	case t.State.Final():
		return ErrTxFinal
	case t.Nonce == nil:
		return ErrNoNonce
	case t.Receipt != nil:
		return fmt.Errorf("%w: receipt %s recorded: the tracker finalizes it", ErrTxMined, t.Receipt.TxHash)
	case t.State != Stuck:
		return fmt.Errorf("%w (it is %s): only a STUCK tx can be resolved as foreign", ErrNotStuck, t.State)
	}
	nonce := *t.Nonce
	head, err := m.cfg.Chain.Head(ctx)
	if err != nil {
		return err
	}
	if head+1 < m.cfg.Finality {
		return fmt.Errorf("%w: head %d is younger than the finality depth %d", ErrNonceNotFinal, head, m.cfg.Finality)
	}
	final := head + 1 - m.cfg.Finality
	used, err := m.cfg.Chain.MinedNonceAt(ctx, t.Submitter, final)
	if err != nil {
		return err
	}
	if used <= nonce {
		return fmt.Errorf("%w: nonce %d is unused at block %d (%d deep of head %d): the submitter's tx count there is %d",
			ErrNonceNotFinal, nonce, final, m.cfg.Finality, head, used)
	}
	hashes := make([]string, 0, len(t.Signed))
	for _, s := range t.Signed {
		r, err := m.cfg.Chain.Receipt(ctx, s.Hash)
		switch {
		case err == nil:
			return fmt.Errorf("%w: our %s %s is mined in block %d: the tracker finalizes it", ErrTxMined, s.Kind, s.Hash, r.BlockNumber)
		case !errors.Is(err, ErrReceiptNotFound):
			return err
		}
		hashes = append(hashes, string(s.Hash))
	}
	rem := Remediation{Submitter: t.Submitter, TxID: t.ID, Nonce: nonce, Action: ActionResolveForeign, NodeID: m.cfg.NodeID,
		FencingToken: l.Token, Reason: fmt.Sprintf("%s (proof: nonce %d used at block %d, %d deep of head %d, tx count %d; none of ours mined: %s)",
			reason, nonce, final, m.cfg.Finality, head, used, strings.Join(hashes, ","))}
	if err := m.cfg.Store.ResolveForeign(ctx, l, t.ID, rem); err != nil {
		return err
	}
	m.met.Remediations.WithLabelValues(string(ActionResolveForeign)).Inc()
	m.met.Finalized.WithLabelValues(string(FailedFinal)).Inc()
	m.log.Warn("chaintx: nonce taken outside the exchange: tx resolved FAILED_FINAL", "submitter", t.Submitter, "tx_id", t.ID,
		"nonce", nonce, "fencing_token", l.Token, "state_before", t.State, "state_after", FailedFinal, "sub_state", SubForeign,
		"reason", rem.Reason)
	return nil
}

// nonceTaken refuses a CANCEL or REPLACE in t's nonce once the chain has
// used it (by any tx: a new tx in it can never be mined).
func (m *Manager) nonceTaken(ctx context.Context, t Tx) error {
	used, err := m.cfg.Chain.MinedNonce(ctx, t.Submitter)
	if err != nil {
		return err
	}
	if used > *t.Nonce {
		return fmt.Errorf("%w: nonce %d is used (the submitter's tx count is %d); if no tx of ours took it, see RESOLVE_FOREIGN",
			ErrNonceTaken, *t.Nonce, used)
	}
	return nil
}
