package stream

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/persist/transfer"
)

// The funding channel: FUNDING balances and internal FUNDING <-> SPOT
// transfers live in Postgres, not in the journal, so they have no seq and
// no replay. Each (re)subscribe starts with a snapshot of the user's
// FUNDING balances read from Postgres; then every state change of one of
// the user's internal transfers that this process commits (the transfer
// service's OnCommit hook, after its transaction commits) arrives with the
// user's FUNDING balances read right after it (they may already include
// later commits). A change committed while nobody listened is not
// replayed: resubscribe for a fresh snapshot.

// FundingSource reads FUNDING balances (the transfer service; gateway.TransferService has it).
type FundingSource interface {
	FundingBalances(ctx context.Context, user core.UserID) (map[core.AssetID]transfer.AccountState, error)
}

const (
	fundingQueue   = 4096            // commits waiting for delivery; beyond, the funding channels must resync
	fundingTimeout = 2 * time.Second // one Postgres read of a user's FUNDING balances
)

// SetFunding enables the funding channel with src (before serving).
func (h *Hub) SetFunding(src FundingSource) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.funding == nil {
		h.funding = src
		h.fundingCh = make(chan transfer.Transfer, fundingQueue)
		h.wg.Add(1)
		go h.fundingLoop()
	}
}

// FundingCommitted is the transfer service's OnCommit hook: it queues t
// for the funding channel and never blocks. When the queue is full the
// user's funding channels are closed with RESYNC_REQUIRED (a change would
// be lost otherwise).
func (h *Hub) FundingCommitted(t transfer.Transfer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fundingCh == nil || h.closed {
		return
	}
	if !slices.ContainsFunc(h.users[core.UserID(t.UserID)], func(ps *privSub) bool { return ps.ch == ChFunding }) {
		return
	}
	select {
	case h.fundingCh <- t:
	default:
		for _, ps := range slices.Clone(h.users[core.UserID(t.UserID)]) {
			if ps.ch == ChFunding {
				h.unsubscribePriv(ps)
				ps.c.sendError(ps.id, CodeResync, "funding updates fell behind: subscribe again for a fresh snapshot")
			}
		}
	}
}

// subscribeFunding (under h.mu) adds c's funding subscription; the
// snapshot is read and sent by the funding goroutine.
func (h *Hub) subscribeFunding(c *conn, r *Request) *Error {
	if h.funding == nil {
		return badReq(CodeUnavailable, "the funding channel needs the transfer service (Postgres)")
	}
	if h.closed { // Close has closed fundingCh (under h.mu, as here)
		return badReq(CodeUnavailable, "the server is shutting down")
	}
	ps := &privSub{c: c, user: core.UserID(c.claims.UserID), ch: ChFunding, id: r.ID, active: true, replaying: true}
	c.subs[subKey{ch: ChFunding}] = ps
	h.users[ps.user] = append(h.users[ps.user], ps)
	select {
	case h.fundingCh <- transfer.Transfer{UserID: transfer.UserID(ps.user)}: // TransferID 0: a snapshot request
	default:
		h.unsubscribePriv(ps)
		return badReq(CodeUnavailable, "funding updates are busy; retry")
	}
	return nil
}

// fundingLoop delivers the queued commits and snapshots.
func (h *Hub) fundingLoop() {
	defer h.wg.Done()
	for t := range h.fundingCh {
		user := core.UserID(t.UserID)
		h.mu.Lock()
		var subs []*privSub
		for _, ps := range h.users[user] {
			if ps.ch == ChFunding && (t.TransferID != 0 || ps.replaying) {
				subs = append(subs, ps)
			}
		}
		h.mu.Unlock()
		if len(subs) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), fundingTimeout)
		bals, err := h.funding.FundingBalances(ctx, user)
		cancel()
		h.mu.Lock()
		for _, ps := range subs {
			if ps.gone.Load() {
				continue
			}
			if err != nil {
				h.unsubscribePriv(ps)
				ps.c.sendError(ps.id, CodeUnavailable, "FUNDING balances unavailable (Postgres); subscribe again")
				continue
			}
			if ps.replaying { // the first message: the ack and the snapshot
				ps.replaying = false
				ps.c.sendAck("subscribed", ps.id, ChFunding, "", 0)
				ps.c.send(h.fundingMsg("snapshot", nil, bals))
				continue
			}
			ps.c.send(h.fundingMsg("transfer", &t, bals))
		}
		h.mu.Unlock()
	}
}

// fundingMsg is a funding channel message: the transfer (if any) and the
// user's FUNDING balances.
func (h *Hub) fundingMsg(typ string, t *transfer.Transfer, bals map[core.AssetID]transfer.AccountState) []byte {
	n := namer{reg: h.cfg.Registry}
	b := appendHead(nil, ChFunding, "", 0)
	b = appendStrKV(b, "type", typ)
	if t != nil {
		sym, scale := n.asset(core.AssetID(t.Asset))
		b = append(b, `,"transfer":{"transfer_id":`...)
		b = strconv.AppendInt(b, t.TransferID, 10)
		b = appendStrKV(b, "req_id", t.ReqID)
		b = appendStrKV(b, "from", string(t.From))
		b = appendStrKV(b, "to", string(t.To))
		b = appendStrKV(b, "asset", sym)
		b = appendUnitsKV(b, "amount", int64(t.Amount), scale)
		b = appendStrKV(b, "state", t.State.String())
		b = appendUintKV(b, "time", uint64(t.UpdatedAt.UnixMilli()))
		b = append(b, '}')
	}
	b = append(b, `,"balances":[`...)
	ids := make([]core.AssetID, 0, len(bals))
	for id := range bals {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		sym, scale := n.asset(id)
		b = append(b, `{"asset":"`...)
		b = append(b, sym...)
		b = append(b, '"')
		b = appendUnitsKV(b, "available", int64(bals[id].Available), scale)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}
