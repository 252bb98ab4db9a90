package main

import (
	"fmt"
	"io"
	"time"

	"github.com/ubscore/ubscore/core"
)

// The transfer-service part of `replay state --user` (spec 003): the
// user's handle, every PENDING transfer it sends or receives (what holds
// its funds as of the seq) and its newest transfers — of those the core
// retains at that seq: finished transfers past the retention were forgotten
// by a sequenced KindP2PForget (their rows are in the sink's p2p_transfers),
// and the view says how many.

// p2pRecent is how many of a user's newest transfers the view lists.
const p2pRecent = 10

type p2pTransferView struct {
	ID        uint64      `json:"id"`
	From      core.UserID `json:"from"`
	To        core.UserID `json:"to"`
	Asset     string      `json:"asset"`
	Amount    string      `json:"amount"`
	Status    string      `json:"status"`
	Reason    string      `json:"reason,omitempty"` // DEBIT_FAILED: why
	CreatedAt string      `json:"created_at"`       // RFC 3339, UTC (the creating command's time)
	ExecuteAt string      `json:"execute_at"`
	DoneAt    string      `json:"done_at,omitempty"` // when it left PENDING
}

type p2pUserView struct {
	Handle    string            `json:"handle,omitempty"` // "" for a user with transfers but no handle
	CreatedAt string            `json:"created_at,omitempty"`
	Transfers int               `json:"transfers"` // as sender or recipient, retained by the core at the seq
	Forgotten uint64            `json:"forgotten"` // finished ones the core forgot by then (KindP2PForget)
	Pending   []p2pTransferView `json:"pending"`   // PENDING ones, newest first
	Recent    []p2pTransferView `json:"recent"`    // the newest p2pRecent, newest first
}

// p2pView is u's transfer-service state, nil when u has neither a handle
// nor a transfer.
func p2pView(p *core.Processor, u core.UserID, nm *names, raw bool) *p2pUserView {
	usr, isUser := p.P2PUserByID(u)
	v := &p2pUserView{Pending: []p2pTransferView{}, Recent: []p2pTransferView{}}
	v.Forgotten = p.P2PEachRetained(u, func(t *core.P2PTransfer) bool {
		pending, recent := t.Status == core.P2PPending, v.Transfers < p2pRecent
		if pending || recent {
			tv := transferView(t, nm, raw)
			if pending {
				v.Pending = append(v.Pending, tv)
			}
			if recent {
				v.Recent = append(v.Recent, tv)
			}
		}
		v.Transfers++
		return true
	})
	if !isUser && v.Transfers == 0 && v.Forgotten == 0 {
		return nil
	}
	if isUser {
		v.Handle, v.CreatedAt = usr.Handle, p2pTime(usr.CreatedAt)
	}
	return v
}

func transferView(t *core.P2PTransfer, nm *names, raw bool) p2pTransferView {
	v := p2pTransferView{ID: t.ID, From: t.From, To: t.To, Asset: nm.asset(t.Asset), Amount: nm.units(t.Amount, t.Asset, raw),
		Status: t.Status.String(), CreatedAt: p2pTime(t.CreatedAt), ExecuteAt: p2pTime(t.ExecuteAt)}
	if t.Reason != core.OK {
		v.Reason = t.Reason.String()
	}
	if t.DoneAt != 0 {
		v.DoneAt = p2pTime(t.DoneAt)
	}
	return v
}

func p2pTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

func printP2P(w io.Writer, v *p2pUserView) {
	if v == nil {
		return
	}
	handle := v.Handle
	if handle == "" {
		handle = "none"
	}
	fmt.Fprintf(w, "transfers: handle %s, %d retained by the core at this seq, %d pending", handle, v.Transfers, len(v.Pending))
	if v.Forgotten > 0 {
		fmt.Fprintf(w, "; %d finished ones forgotten by then (past the retention: see p2p_transfers)", v.Forgotten)
	}
	fmt.Fprintln(w)
	line := func(t p2pTransferView) {
		fmt.Fprintf(w, "  #%d from %d to %d, %s %s, %s (created %s, executes %s", t.ID, t.From, t.To, t.Amount, t.Asset, t.Status,
			t.CreatedAt, t.ExecuteAt)
		if t.DoneAt != "" {
			fmt.Fprintf(w, ", done %s", t.DoneAt)
		}
		if t.Reason != "" {
			fmt.Fprintf(w, ", %s", t.Reason)
		}
		fmt.Fprintln(w, ")")
	}
	if len(v.Pending) > 0 {
		fmt.Fprintln(w, "pending:")
		for _, t := range v.Pending {
			line(t)
		}
	}
	if len(v.Recent) > 0 {
		fmt.Fprintf(w, "newest %d:\n", len(v.Recent))
		for _, t := range v.Recent {
			line(t)
		}
	}
}
