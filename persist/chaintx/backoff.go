package chaintx

import "time"

// Resubmission backs off for STUCK txs (issue 33 item 4): a tx without a
// receipt is resent every ResubmitInterval until it goes STUCK; from then
// on the delay doubles at each resend, from ResubmitInterval up to
// ResubmitMaxInterval (managed_tx.resubmit_backoff_s holds the current
// one). Each doubling logs one WARN; resends at the cap log at DEBUG, so a
// tx STUCK for days costs a line per cap, not an INFO line per interval.

// stuckBackoff is the delay after a STUCK tx's resend, given the delay
// before it (prev, 0 = the first since STUCK): base, then doubled, capped.
func stuckBackoff(prev, base, limit time.Duration) time.Duration {
	if prev <= 0 {
		return min(base, limit)
	}
	return min(max(2*prev, base), limit)
}

// resubmitDelay is the delay after a resend of t (claimed by the resubmit
// scheduler): ResubmitInterval, or the STUCK back-off.
func (m *Manager) resubmitDelay(t Tx) time.Duration {
	if t.State != Stuck {
		return m.cfg.ResubmitInterval
	}
	return stuckBackoff(t.ResubmitBackoff, m.cfg.ResubmitInterval, m.cfg.ResubmitMaxInterval)
}
