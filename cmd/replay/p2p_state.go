package main

import (
	"fmt"
	"io"
	"time"

	"github.com/ubscore/ubscore/core"
)

// The transfer-service part of `replay state --user` (spec 003): the
// user's handle, every PENDING transfer it sends or receives (what holds
// its funds as of the seq) and its newest transfers.

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
	Transfers int               `json:"transfers"` // as sender or recipient, in all
	Pending   []p2pTransferView `json:"pending"`   // PENDING ones, newest first
	Recent    []p2pTransferView `json:"recent"`    // the newest p2pRecent, newest first
}

// p2pView is u's transfer-service state, nil when u has neither a handle
// nor a transfer.
func p2pView(p *core.Processor, u core.UserID, nm *names, raw bool) *p2pUserView {
	usr, isUser := p.P2PUserByID(u)
	page, n := p.P2PHistory(u, 0, p2pPage, nil)
	if !isUser && n == 0 {
		return nil
	}
	v := &p2pUserView{Transfers: n, Pending: []p2pTransferView{}, Recent: []p2pTransferView{}}
	if isUser {
		v.Handle, v.CreatedAt = usr.Handle, p2pTime(usr.CreatedAt)
	}
	// A page at a time: a user's history may hold millions of transfers.
	for seen := 0; len(page) > 0; {
		for i := range page {
			pending, recent := page[i].Status == core.P2PPending, seen+i < p2pRecent
			if !pending && !recent {
				continue
			}
			tv := transferView(&page[i], nm, raw)
			if pending {
				v.Pending = append(v.Pending, tv)
			}
			if recent {
				v.Recent = append(v.Recent, tv)
			}
		}
		seen += len(page)
		page, _ = p.P2PHistory(u, seen, p2pPage, page[:0])
	}
	return v
}

// p2pPage is how many transfers p2pView copies out of the core at a time
// (a variable: the test pages through a few).
var p2pPage = 4096

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
	fmt.Fprintf(w, "transfers: handle %s, %d in all, %d pending\n", handle, v.Transfers, len(v.Pending))
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
