package persist

import (
	"context"
	"fmt"
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
//	                          with before/after; both user_balances rows
//	EvP2PTransfer CANCELLED   status, cancelled_at
//	EvP2PTransfer DEBIT_FAILED status, failure_reason
//
// Handles are read from user_balances (a user row is always written before
// any transfer of that user: it comes earlier in the stream).

// p2pOp is one change to the p2p tables.
type p2pOp struct {
	ev     core.Event
	handle string // EvP2PUser: the command's Text
}

// p2pRows collects a batch's p2p changes in stream order.
type p2pRows struct{ ops []p2pOp }

func (p *p2pRows) reset() { p.ops = p.ops[:0] }

// add records the p2p events of one command.
func (p *p2pRows) add(c *core.Command, evs []core.Event) {
	if c.Kind < core.KindP2PCreateUser || c.Kind > core.KindP2PTick {
		return
	}
	for i := range evs {
		switch e := &evs[i]; e.Kind {
		case core.EvP2PUser:
			p.ops = append(p.ops, p2pOp{ev: *e, handle: c.Text})
		case core.EvP2PTransfer:
			if e.Flags == 0 {
				p.ops = append(p.ops, p2pOp{ev: *e})
			}
		}
	}
}

// rows is how many statements the batch writes.
func (p *p2pRows) rows() int { return len(p.ops) }

const (
	sqlP2PUser = `INSERT INTO user_balances (user_id, id, asset, balance, created_at, updated_at, updated_seq)
		VALUES ($1, $2, $3, $4, $5, $5, $6)`
	sqlP2PCharge = `INSERT INTO balance_changes (external_id, type, user_id, amount, related_id, status, created_at,
		completed_at, balance_before, balance_after, seq) VALUES ($1, 'charge', $2, $3, NULL, 'COMPLETED', $4, $4, $5, $6, $7)`
	sqlP2PCreate = `INSERT INTO p2p_transfers (id, from_user_id, to_user_id, amount, asset, status, created_at, execute_at,
		request_id, updated_at, created_seq, updated_seq)
		SELECT $1, f.user_id, t.user_id, $4, $5, 'PENDING', $6, $7, $8, $6, $9, $9
		FROM user_balances f, user_balances t WHERE f.id = $2 AND t.id = $3`
	sqlP2PStatus = `UPDATE p2p_transfers SET status = $2, completed_at = $3, cancelled_at = $4, failure_reason = $5,
		updated_at = $6, updated_seq = $7 WHERE id = $1`
	sqlP2PChange = `INSERT INTO balance_changes (external_id, type, user_id, amount, related_id, status, created_at,
		completed_at, balance_before, balance_after, seq)
		SELECT $1::bigint, $2, u.user_id, $4, ($1::bigint)::text, 'COMPLETED', $5, $5, $6, $7, $8 FROM user_balances u WHERE u.id = $3`
	sqlP2PBalance = `UPDATE user_balances SET balance = $2, updated_at = $3, updated_seq = $4, version = version + 1
		WHERE id = $1`
)

// writeP2P sends the batch's p2p statements in one round trip (a pgx
// batch, in order) and checks each one wrote its row.
func writeP2P(ctx context.Context, tx pgx.Tx, p *p2pRows) error {
	if len(p.ops) == 0 {
		return nil
	}
	var b pgx.Batch
	for i := range p.ops {
		op := &p.ops[i]
		e := &op.ev
		at := time.Unix(0, e.Time).UTC()
		seq := int64(e.Seq)
		if e.Kind == core.EvP2PUser {
			b.Queue(sqlP2PUser, textSafe(op.handle), int64(e.User), int32(e.Asset), int64(e.Fee), at, seq)
			if e.Amount > 0 {
				b.Queue(sqlP2PCharge, int64(e.User), textSafe(op.handle), int64(e.Amount), at, int64(e.Fee-e.Amount), int64(e.Fee), seq)
			}
			continue
		}
		id, amt := int64(e.OrderID), int64(e.Amount)
		switch st := core.P2PStatus(e.Detail); st {
		case core.P2PPending:
			req := pgtype.Text{String: textSafe(e.Key.String()), Valid: !e.Key.IsZero()}
			b.Queue(sqlP2PCreate, id, int64(e.User), int64(e.OtherUser), amt, int32(e.Asset), at,
				time.Unix(0, int64(e.Price)).UTC(), req, seq)
		case core.P2PCompleted:
			b.Queue(sqlP2PStatus, id, st.String(), at, nil, nil, at, seq)
			b.Queue(sqlP2PChange, id, "transfer_out", int64(e.User), -amt, at, int64(e.Fee)+amt, int64(e.Fee), seq)
			b.Queue(sqlP2PChange, id, "transfer_in", int64(e.OtherUser), amt, at, int64(e.Fee2)-amt, int64(e.Fee2), seq)
			b.Queue(sqlP2PBalance, int64(e.User), int64(e.Fee), at, seq)
			b.Queue(sqlP2PBalance, int64(e.OtherUser), int64(e.Fee2), at, seq)
		case core.P2PCancelled:
			b.Queue(sqlP2PStatus, id, st.String(), nil, at, nil, at, seq)
		case core.P2PDebitFailed:
			b.Queue(sqlP2PStatus, id, st.String(), nil, nil, e.Code.String(), at, seq)
		}
	}
	br := tx.SendBatch(ctx, &b)
	for i := 0; i < b.Len(); i++ {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return fmt.Errorf("persist: p2p tables: %w", err)
		}
		if tag.RowsAffected() != 1 {
			_ = br.Close()
			return fmt.Errorf("persist: p2p tables: statement %d of the batch wrote %d rows, want 1 (a transfer of a user without a row?)",
				i, tag.RowsAffected())
		}
	}
	return br.Close()
}
