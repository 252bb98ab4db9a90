package persist

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ubscore/ubscore/core"
)

// The transfer service's tables (migration 0050): derived from its events
// (core/p2p_cmd.go), in seq order, written in the sink's transaction like
// every other row, so they are exactly the stream up to persisted_seq.
//
//	EvP2PUser                 user_balances row; a 'charge' balance_changes row for an initial credit
//	EvP2PTransfer PENDING     p2p_transfers row (a repeated requestId writes nothing)
//	EvP2PTransfer COMPLETED   status, completed_at; transfer_out + transfer_in balance_changes
//	                          with before/after
//	EvP2PTransfer CANCELLED   status, cancelled_at
//	EvP2PTransfer DEBIT_FAILED status, failure_reason
//	EvBalance                 of a transfer-service user in its asset, from any command (a
//	                          transfer, a trade, an adjustment, a deposit): user_balances.balance
//	                          moves by it (available + held), version + 1 (issue 39: the row
//	                          never lags the core)
//
// Which users have a user_balances row, and in which asset, is cached
// (known): read once per user id from user_balances, an id without a row
// cached as "not a transfer-service user" (0) until an EvP2PUser for it.

// Within a batch the changes are collapsed as the orders' are: a transfer
// created and finished in the batch is one inserted row, an older one one
// updated row; a user's balance is written once, with version advanced by
// its changes. New rows go in by binary COPY, updates in one statement per
// table. Handles come from a cache of id -> handle (users never change;
// ids missing from it are read from user_balances once per batch).

type p2pUserRow struct {
	handle               string
	id                   core.UserID
	asset                int32
	balance              int64 // asset units, available + held
	createdAt, updatedAt int64 // unix ns
	updatedSeq, version  int64
}

type p2pXferRow struct {
	id                     int64
	isNew                  bool
	from, to               core.UserID // new rows
	amount                 int64
	asset                  int32
	status                 core.P2PStatus
	createdAt, executeAt   int64 // unix ns (new rows)
	completedAt, cancelled int64 // unix ns, 0 = NULL / unchanged
	reason                 string
	req                    core.Key
	updatedAt              int64
	createdSeq, updatedSeq int64
}

type p2pChangeRow struct {
	ext           int64 // transfer id, or the user id of a charge
	typ           string
	user          core.UserID
	amount        int64 // signed units
	related       bool  // related_id = ext
	at            int64
	before, after int64
	seq           int64
}

type p2pBalance struct {
	delta, at, seq, n int64 // the batch's change of available + held, the last change's time and seq, how many
}

type p2pBalKey struct {
	user  core.UserID
	asset core.AssetID
}

// p2pRows collects a batch's p2p changes. handles survives the batches.
type p2pRows struct {
	users   []p2pUserRow
	userIdx map[core.UserID]int
	xfers   []p2pXferRow
	xferIdx map[int64]int
	changes []p2pChangeRow
	bals    map[p2pBalKey]*p2pBalance // balance changes of users not created in the batch (maybe not users at all)
	balIDs  []p2pBalKey               // bals' keys in first-change order
	handles map[core.UserID]string
	known   map[core.UserID]core.AssetID // a user's asset; 0 = no user_balances row (see above)
	balRows int                          // user_balances rows the batch updates (writeP2P)
}

func (p *p2pRows) reset() {
	if p.userIdx == nil {
		p.userIdx, p.xferIdx, p.bals, p.handles = map[core.UserID]int{}, map[int64]int{}, map[p2pBalKey]*p2pBalance{}, map[core.UserID]string{}
		p.known = map[core.UserID]core.AssetID{}
	}
	p.users, p.xfers, p.changes, p.balIDs, p.balRows = p.users[:0], p.xfers[:0], p.changes[:0], p.balIDs[:0], 0
	clear(p.userIdx)
	clear(p.xferIdx)
	clear(p.bals)
}

// rows is how many rows the batch writes (the user_balances updates once
// writeP2P has told the service's users from the others).
func (p *p2pRows) rows() int { return len(p.users) + len(p.xfers) + len(p.changes) + p.balRows }

// add records the p2p events of one command, and the balance changes that
// may be a transfer-service user's.
func (p *p2pRows) add(c *core.Command, evs []core.Event) {
	for i := range evs {
		e := &evs[i]
		switch {
		case e.Kind == core.EvBalance:
			p.balance(e)
		case e.Kind == core.EvP2PUser:
			p.known[e.User] = e.Asset
			p.handles[e.User] = textSafe(c.Text)
			p.userIdx[e.User] = len(p.users)
			p.users = append(p.users, p2pUserRow{handle: textSafe(c.Text), id: e.User, asset: int32(e.Asset),
				balance: int64(e.Fee), createdAt: e.Time, updatedAt: e.Time, updatedSeq: int64(e.Seq)})
			if e.Amount > 0 {
				p.changes = append(p.changes, p2pChangeRow{ext: int64(e.User), typ: "charge", user: e.User, amount: int64(e.Amount),
					at: e.Time, before: int64(e.Fee - e.Amount), after: int64(e.Fee), seq: int64(e.Seq)})
			}
		case e.Kind == core.EvP2PTransfer && e.Flags == 0:
			p.transfer(e)
		}
	}
}

func (p *p2pRows) transfer(e *core.Event) {
	id, st := int64(e.OrderID), core.P2PStatus(e.Detail)
	if st == core.P2PPending {
		p.xferIdx[id] = len(p.xfers)
		p.xfers = append(p.xfers, p2pXferRow{id: id, isNew: true, from: e.User, to: e.OtherUser, amount: int64(e.Amount),
			asset: int32(e.Asset), status: st, createdAt: e.Time, executeAt: int64(e.Price), req: e.Key,
			updatedAt: e.Time, createdSeq: int64(e.Seq), updatedSeq: int64(e.Seq)})
		return
	}
	i, ok := p.xferIdx[id]
	if !ok {
		i = len(p.xfers)
		p.xferIdx[id] = i
		p.xfers = append(p.xfers, p2pXferRow{id: id})
	}
	x := &p.xfers[i]
	x.status, x.updatedAt, x.updatedSeq = st, e.Time, int64(e.Seq)
	switch st {
	case core.P2PCompleted:
		x.completedAt = e.Time
		amt := int64(e.Amount)
		p.changes = append(p.changes,
			p2pChangeRow{ext: id, typ: "transfer_out", user: e.User, amount: -amt, related: true, at: e.Time,
				before: int64(e.Fee) + amt, after: int64(e.Fee), seq: int64(e.Seq)},
			p2pChangeRow{ext: id, typ: "transfer_in", user: e.OtherUser, amount: amt, related: true, at: e.Time,
				before: int64(e.Fee2) - amt, after: int64(e.Fee2), seq: int64(e.Seq)})
	case core.P2PCancelled:
		x.cancelled = e.Time
	case core.P2PDebitFailed:
		x.reason = e.Code.String()
	}
}

// balance records balance event e if its user may be a transfer-service
// user in e's asset: on the user's row when it was created in the batch
// (changes before its creation are in the row's initial balance), else in
// bals, resolved against user_balances when the batch is written.
func (p *p2pRows) balance(e *core.Event) {
	d := int64(e.DAvail + e.DFrozen)
	if d == 0 {
		return // a hold or its release: available + held unchanged
	}
	if a, ok := p.known[e.User]; ok && a != e.Asset {
		return // not a user of the service, or another asset
	}
	if i, ok := p.userIdx[e.User]; ok {
		r := &p.users[i]
		r.balance += d
		r.updatedAt, r.updatedSeq = e.Time, int64(e.Seq)
		r.version++
		return
	}
	k := p2pBalKey{e.User, e.Asset}
	b := p.bals[k]
	if b == nil {
		b = &p2pBalance{}
		p.bals[k] = b
		p.balIDs = append(p.balIDs, k)
	}
	b.delta += d
	b.at, b.seq = e.Time, int64(e.Seq)
	b.n++
}

var (
	p2pUserColumns     = []string{"user_id", "id", "asset", "balance", "created_at", "updated_at", "updated_seq", "version"}
	p2pTransferColumns = []string{"id", "from_user_id", "to_user_id", "amount", "asset", "status", "created_at", "execute_at",
		"completed_at", "cancelled_at", "failure_reason", "request_id", "updated_at", "created_seq", "updated_seq"}
	p2pChangeColumns = []string{"external_id", "type", "user_id", "amount", "related_id", "status", "created_at",
		"completed_at", "balance_before", "balance_after", "seq"}
	copyP2PUsersSQL     = copySQL("user_balances", p2pUserColumns)
	copyP2PTransfersSQL = copySQL("p2p_transfers", p2pTransferColumns)
	copyP2PChangesSQL   = copySQL("balance_changes", p2pChangeColumns)
)

const (
	updateP2PTransfersSQL = `UPDATE p2p_transfers AS t SET status = u.status,
	completed_at = coalesce(u.completed_at, t.completed_at), cancelled_at = coalesce(u.cancelled_at, t.cancelled_at),
	failure_reason = coalesce(u.failure_reason, t.failure_reason), updated_at = u.at, updated_seq = u.seq
FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::text[], $6::timestamptz[], $7::bigint[])
	AS u(id, status, completed_at, cancelled_at, failure_reason, at, seq)
WHERE t.id = u.id`
	updateP2PBalancesSQL = `UPDATE user_balances AS b SET balance = b.balance + u.delta, updated_at = u.at, updated_seq = u.seq,
	version = b.version + u.n
FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::bigint[], $5::bigint[]) AS u(id, delta, at, seq, n)
WHERE b.id = u.id`
	p2pHandlesSQL = `SELECT id, user_id, asset FROM user_balances WHERE id = ANY($1)`
)

// writeP2P writes the batch's p2p rows in tx.
func writeP2P(ctx context.Context, tx pgx.Tx, p *p2pRows, cb *copyBuf) error {
	if p.rows() == 0 && len(p.balIDs) == 0 {
		return nil
	}
	if err := p.loadUsers(ctx, tx); err != nil {
		return err
	}
	cb.reset()
	for i := range p.users {
		u := &p.users[i]
		cb.row(len(p2pUserColumns))
		cb.text(u.handle)
		cb.int8(int64(u.id))
		cb.int4(u.asset)
		cb.int8(u.balance)
		cb.timestamptz(u.createdAt)
		cb.timestamptz(u.updatedAt)
		cb.int8(u.updatedSeq)
		cb.int8(u.version)
	}
	if err := cb.send(ctx, tx, "user_balances", copyP2PUsersSQL); err != nil {
		return err
	}
	var upd struct {
		id, seq              []int64
		status               []string
		completed, cancelled []pgtype.Timestamptz
		reason               []pgtype.Text
		at                   []time.Time
	}
	cb.reset()
	for i := range p.xfers {
		x := &p.xfers[i]
		if !x.isNew {
			upd.id, upd.seq = append(upd.id, x.id), append(upd.seq, x.updatedSeq)
			upd.status = append(upd.status, x.status.String())
			upd.completed = append(upd.completed, tsOrNull(x.completedAt))
			upd.cancelled = append(upd.cancelled, tsOrNull(x.cancelled))
			upd.reason = append(upd.reason, pgtype.Text{String: x.reason, Valid: x.reason != ""})
			upd.at = append(upd.at, time.Unix(0, x.updatedAt).UTC())
			continue
		}
		cb.row(len(p2pTransferColumns))
		cb.int8(x.id)
		cb.text(p.handles[x.from])
		cb.text(p.handles[x.to])
		cb.int8(x.amount)
		cb.int4(x.asset)
		cb.text(x.status.String())
		cb.timestamptz(x.createdAt)
		cb.timestamptz(x.executeAt)
		for _, t := range [2]int64{x.completedAt, x.cancelled} {
			if t == 0 {
				cb.null()
			} else {
				cb.timestamptz(t)
			}
		}
		if x.reason == "" {
			cb.null()
		} else {
			cb.text(x.reason)
		}
		if x.req.IsZero() {
			cb.null()
		} else {
			cb.text(textSafe(x.req.String()))
		}
		cb.timestamptz(x.updatedAt)
		cb.int8(x.createdSeq)
		cb.int8(x.updatedSeq)
	}
	if err := cb.send(ctx, tx, "p2p_transfers", copyP2PTransfersSQL); err != nil {
		return err
	}
	if n := len(upd.id); n > 0 {
		tag, err := tx.Exec(ctx, updateP2PTransfersSQL, upd.id, upd.status, upd.completed, upd.cancelled, upd.reason, upd.at, upd.seq)
		if err != nil {
			return fmt.Errorf("persist: update %d p2p_transfers: %w", n, err)
		}
		if int(tag.RowsAffected()) != n {
			return fmt.Errorf("persist: update p2p_transfers: %d of %d rows found", tag.RowsAffected(), n)
		}
	}
	cb.reset()
	for i := range p.changes {
		c := &p.changes[i]
		cb.row(len(p2pChangeColumns))
		cb.int8(c.ext)
		cb.text(c.typ)
		cb.text(p.handles[c.user])
		cb.int8(c.amount)
		if c.related {
			cb.text(strconv.FormatInt(c.ext, 10))
		} else {
			cb.null()
		}
		cb.text("COMPLETED")
		cb.timestamptz(c.at)
		cb.timestamptz(c.at)
		cb.int8(c.before)
		cb.int8(c.after)
		cb.int8(c.seq)
	}
	if err := cb.send(ctx, tx, "balance_changes", copyP2PChangesSQL); err != nil {
		return err
	}
	var upd2 struct {
		id, delta, seq, n []int64
		at                []time.Time
	}
	for _, k := range p.balIDs {
		if _, inBatch := p.userIdx[k.user]; inBatch || p.known[k.user] != k.asset {
			continue // before its creation (in its initial balance), or not a user of the service in that asset
		}
		b := p.bals[k]
		upd2.id, upd2.delta, upd2.seq, upd2.n = append(upd2.id, int64(k.user)), append(upd2.delta, b.delta),
			append(upd2.seq, b.seq), append(upd2.n, b.n)
		upd2.at = append(upd2.at, time.Unix(0, b.at).UTC())
	}
	p.balRows = len(upd2.id)
	if n := len(upd2.id); n > 0 {
		tag, err := tx.Exec(ctx, updateP2PBalancesSQL, upd2.id, upd2.delta, upd2.at, upd2.seq, upd2.n)
		if err != nil {
			return fmt.Errorf("persist: update %d user_balances: %w", n, err)
		}
		if int(tag.RowsAffected()) != n {
			return fmt.Errorf("persist: update user_balances: %d of %d users found", tag.RowsAffected(), n)
		}
	}
	return nil
}

// loadUsers reads from user_balances the handles of the batch's users
// missing from the cache, and whether the users whose balances changed
// are the service's (and in which asset), once per user id.
func (p *p2pRows) loadUsers(ctx context.Context, tx pgx.Tx) error {
	var missing, handles []int64
	seen := map[core.UserID]bool{}
	need := func(u core.UserID) {
		if !seen[u] {
			seen[u] = true
			missing = append(missing, int64(u))
		}
	}
	needHandle := func(u core.UserID) {
		if _, ok := p.handles[u]; !ok {
			need(u)
			handles = append(handles, int64(u))
		}
	}
	for i := range p.xfers {
		if x := &p.xfers[i]; x.isNew {
			needHandle(x.from)
			needHandle(x.to)
		}
	}
	for i := range p.changes {
		needHandle(p.changes[i].user)
	}
	for _, k := range p.balIDs {
		if _, ok := p.known[k.user]; !ok {
			need(k.user)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, p2pHandlesSQL, missing)
	if err != nil {
		return fmt.Errorf("persist: read p2p users: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var h string
		var a int32
		if err := rows.Scan(&id, &h, &a); err != nil {
			return err
		}
		p.handles[core.UserID(id)], p.known[core.UserID(id)] = h, core.AssetID(a)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, u := range missing {
		if _, ok := p.known[core.UserID(u)]; !ok {
			p.known[core.UserID(u)] = 0 // no row: not a user of the service (until an EvP2PUser)
		}
	}
	for _, u := range handles {
		if _, ok := p.handles[core.UserID(u)]; !ok {
			return fmt.Errorf("persist: user %d has a transfer but no user_balances row", u)
		}
	}
	return nil
}

func tsOrNull(ns int64) pgtype.Timestamptz {
	if ns == 0 {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: time.Unix(0, ns).UTC(), Valid: true}
}
