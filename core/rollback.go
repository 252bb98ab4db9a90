package core

// Per-command checks that keep their promise (spec 004 §3, §6.2–6.3): a
// command whose own checks fail is never left applied. The check runs at the
// end of Apply, before any event of the command leaves the processor, and a
// failure panics with a *Rollback. The driver treats it as a poison command:
// it discards the in-memory state, rebuilds it from snapshot + WAL up to the
// previous command, and applies Discard, which rejects the command with
// INVARIANT_VIOLATION and trips the breaker of the market (or of the core for
// balance-level damage). Replay meets the same failure at the same seq and
// does the same, so the outcome is deterministic. The checks cost nothing
// more on the normal path: they already ran after every command.

// Rollback is why a command is discarded instead of applied: the value a
// failing per-command check panics with (Reason set), or, for any other
// panic inside apply (a poison command), the zero Rollback.
type Rollback struct {
	Reason BreakerReason // ReasonNone: a poison command (POISON_COMMAND, nothing is halted)
	Market MarketID      // the market whose check failed; 0 = balance level (halts the core)
	Asset  AssetID       // the asset of a balance-level failure
	Detail uint8         // Viol* constant
}

// AsRollback is the Rollback a recovered panic value of Apply stands for.
func AsRollback(v any) Rollback {
	if rb, ok := v.(*Rollback); ok {
		return *rb
	}
	return Rollback{}
}

// fail records a broken per-command check (the first one wins); finish
// panics with it once the command has run.
func (p *Processor) fail(m MarketID, asset AssetID, detail uint8) {
	if p.broken.Reason == ReasonNone {
		p.broken = Rollback{Reason: reasonOf(detail), Market: m, Asset: asset, Detail: detail}
	}
}

// Discard records command c as not applied, for the reason rb: a poison
// command is rejected with POISON_COMMAND; a failed check is rejected with
// INVARIANT_VIOLATION after an EvInvariantViolation, and trips the breaker
// of rb's market (or of the core). Call it on the state as of c.Seq-1 (the
// rebuilt one). It advances LastSeq.
func (p *Processor) Discard(c *Command, rb Rollback) []Event {
	p.begin(c)
	if rb.Reason == ReasonNone {
		return p.finish(c, CodePoisonCommand)
	}
	p.emit(Event{Kind: EvInvariantViolation, Market: rb.Market, Asset: rb.Asset, Code: CodeInvariantViolation, Detail: rb.Detail})
	p.trip(rb.Market, rb.Reason, 0)
	return p.finish(c, CodeInvariantViolation)
}
