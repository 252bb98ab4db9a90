package core

import "encoding/json"

// BreakerChange is one breaker trip or resolution as the event stream
// reports it: what the sink's circuit_breaker_events row and the gateway's
// breaker log are made of, derived the same way for both.
type BreakerChange struct {
	Seq     Seq
	Time    int64 // unix ns
	Command Kind  // the command that tripped or resolved it
	Resolve bool  // false: a trip
	Market  MarketID
	Reason  BreakerReason // trip
	User    UserID        // the operator (a manual halt, a resolution); 0 = the system
	Status  MarketStatus  // a market's resolution: the status it left HALTED for
	// Text is the command's text: a trip's context JSON (KindBreakerTrip),
	// a resolution's note.
	Text string
	// Violations are what the command's own checks found (a discarded
	// command's EvInvariantViolation of this market).
	Violations []Violation
}

// BreakerChanges appends the breaker changes of one command's events to dst.
func BreakerChanges(c *Command, evs []Event, dst []BreakerChange) []BreakerChange {
	for i := range evs {
		e := &evs[i]
		switch e.Kind {
		case EvMarketHalted, EvCoreHalted:
			b := BreakerChange{Seq: e.Seq, Time: e.Time, Command: c.Kind, Market: e.Market,
				Reason: BreakerReason(e.Detail), User: e.User}
			if c.Kind == KindBreakerTrip {
				b.Text = c.Text
			}
			for j := range evs[:i] {
				if v := &evs[j]; v.Kind == EvInvariantViolation && v.Market == e.Market {
					b.Violations = append(b.Violations, Violation{Market: v.Market, Asset: v.Asset, Detail: v.Detail,
						Reason: b.Reason})
				}
			}
			dst = append(dst, b)
		case EvMarketResumed, EvCoreResumed:
			b := BreakerChange{Seq: e.Seq, Time: e.Time, Command: c.Kind, Resolve: true, Market: e.Market,
				User: e.User, Text: c.Text}
			if e.Kind == EvMarketResumed {
				b.Status = MarketStatus(e.Detail)
			}
			dst = append(dst, b)
		}
	}
	return dst
}

// ContextJSON is a trip's context as a JSON object: the seq and command
// that tripped it, the operator of a manual halt, the violations of a
// per-command check, and a checker's context ("check": the trip's Text,
// kept as a string if it is not JSON).
func (b *BreakerChange) ContextJSON() []byte {
	type viol struct {
		Market MarketID `json:"market"`
		Asset  AssetID  `json:"asset"`
		Detail string   `json:"detail"`
	}
	ctx := struct {
		Seq        Seq             `json:"seq"`
		Command    string          `json:"command"`
		ByUser     UserID          `json:"by_user,omitempty"`
		Violations []viol          `json:"violations,omitempty"`
		Check      json.RawMessage `json:"check,omitempty"`
	}{Seq: b.Seq, Command: b.Command.String(), ByUser: b.User}
	for _, v := range b.Violations {
		ctx.Violations = append(ctx.Violations, viol{Market: v.Market, Asset: v.Asset, Detail: ViolName(v.Detail)})
	}
	if b.Text != "" {
		if json.Valid([]byte(b.Text)) {
			ctx.Check = json.RawMessage(b.Text)
		} else {
			ctx.Check, _ = json.Marshal(b.Text) // a string always marshals (invalid UTF-8 is replaced)
		}
	}
	out, _ := json.Marshal(ctx) // plain values always marshal
	return out
}
