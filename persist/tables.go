package persist

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

var (
	tradeColumns = []string{"trade_id", "seq", "market_id", "price", "quantity", "quote_amount",
		"maker_order_id", "taker_order_id", "maker_user_id", "taker_user_id", "maker_fee", "taker_fee",
		"taker_side", "time"}
	ledgerColumns = []string{"seq", "idx", "user_id", "asset_id", "d_available", "d_frozen", "cause", "ref",
		"trade_id", "time"}
	walEventColumns = []string{"seq", "idx", "event_type", "order_id", "payload", "time"}
	orderColumns    = []string{"order_id", "user_id", "market_id", "side", "type", "time_in_force", "price",
		"quantity", "quote_quantity", "filled_quantity", "status", "client_order_id", "created_seq", "updated_seq",
		"created_at", "updated_at"}
)

// updateOrdersSQL applies the batch's changes to orders placed before it:
// fills are added, status/price/quantity replaced when the batch set them.
const updateOrdersSQL = `
UPDATE orders AS o SET
	filled_quantity = o.filled_quantity + u.d_filled,
	status = coalesce(u.status, o.status),
	price = coalesce(u.price, o.price),
	quantity = coalesce(u.quantity, o.quantity),
	updated_seq = u.seq,
	updated_at = u.at
FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::timestamptz[])
	AS u(order_id, d_filled, status, price, quantity, seq, at)
WHERE o.order_id = u.order_id`

// writeRows writes every row of b in tx. It returns how many order updates
// found no row.
func writeRows(ctx context.Context, tx pgx.Tx, b *batchRows) (missing int, err error) {
	if err := copyTrades(ctx, tx, b.trades); err != nil {
		return 0, err
	}
	if err := copyLedger(ctx, tx, b.ledger); err != nil {
		return 0, err
	}
	if err := copyWalEvents(ctx, tx, b.events, b.payloads); err != nil {
		return 0, err
	}
	return writeOrders(ctx, tx, b.orders)
}

// copyIn runs COPY for n rows, fill writing row i's values into vals.
func copyIn(ctx context.Context, tx pgx.Tx, table string, cols []string, n int, fill func(i int, vals []any)) error {
	if n == 0 {
		return nil
	}
	vals := make([]any, len(cols))
	got, err := tx.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromSlice(n, func(i int) ([]any, error) {
		fill(i, vals)
		return vals, nil
	}))
	if err != nil {
		return fmt.Errorf("persist: copy %d %s rows: %w", n, table, err)
	}
	if got != int64(n) {
		return fmt.Errorf("persist: copy %s: %d of %d rows", table, got, n)
	}
	return nil
}

func copyTrades(ctx context.Context, tx pgx.Tx, rows []tradeRow) error {
	return copyIn(ctx, tx, "trades", tradeColumns, len(rows), func(i int, v []any) {
		r := &rows[i]
		v[0], v[1], v[2], v[3], v[4], v[5] = r.tradeID, r.seq, r.market, r.price, r.qty, r.quote
		v[6], v[7], v[8], v[9] = r.makerOrder, r.takerOrder, r.makerUser, r.takerUser
		v[10], v[11], v[12], v[13] = r.makerFee, r.takerFee, r.takerSide, r.time
	})
}

func copyLedger(ctx context.Context, tx pgx.Tx, rows []ledgerRow) error {
	return copyIn(ctx, tx, "spot_ledger", ledgerColumns, len(rows), func(i int, v []any) {
		r := &rows[i]
		v[0], v[1], v[2], v[3], v[4], v[5], v[6] = r.seq, r.idx, r.user, r.asset, r.dAvail, r.dFrozen, r.cause
		v[7], v[8], v[9] = nil, nil, r.time
		if r.hasRef {
			v[7] = r.ref
		}
		if r.hasTrade {
			v[8] = r.tradeID
		}
	})
}

func copyWalEvents(ctx context.Context, tx pgx.Tx, rows []walEventRow, payloads []byte) error {
	return copyIn(ctx, tx, "wal_events", walEventColumns, len(rows), func(i int, v []any) {
		r := &rows[i]
		v[0], v[1], v[2], v[3], v[4], v[5] = r.seq, r.idx, r.typ, r.order, payloads[r.start:r.end], r.time
	})
}

// writeOrders inserts the batch's new orders (COPY: like the rows of the
// other tables they cannot exist yet, persisted_seq being below their
// PLACE_ORDER) and updates the others in one statement. It returns how many
// updates found no row.
func writeOrders(ctx context.Context, tx pgx.Tx, rows []orderRow) (missing int, err error) {
	var fresh []*orderRow
	var upd orderUpdates
	for i := range rows {
		if rows[i].isNew {
			fresh = append(fresh, &rows[i])
		} else {
			upd.add(&rows[i])
		}
	}
	if err := copyOrders(ctx, tx, fresh); err != nil {
		return 0, err
	}
	if n := len(upd.id); n > 0 {
		tag, err := tx.Exec(ctx, updateOrdersSQL, upd.id, upd.dFilled, upd.status, upd.price, upd.qty,
			upd.seq, upd.at)
		if err != nil {
			return 0, fmt.Errorf("persist: update %d orders: %w", n, err)
		}
		missing = n - int(tag.RowsAffected())
	}
	return missing, nil
}

func copyOrders(ctx context.Context, tx pgx.Tx, rows []*orderRow) error {
	return copyIn(ctx, tx, "orders", orderColumns, len(rows), func(i int, v []any) {
		o := rows[i]
		v[0], v[1], v[2] = int64(o.id), int64(o.user), int32(o.market)
		v[3], v[4], v[5] = o.side.String(), o.typ.String(), o.tif.String()
		v[6], v[7], v[8], v[9] = int64(o.price), int64(o.qty), int64(o.quoteQty), int64(o.filled)
		v[10], v[11] = o.status.String(), nil
		if !o.clientID.IsZero() {
			v[11] = keyText(o.clientID)
		}
		v[12], v[13] = int64(o.createdSeq), int64(o.updatedSeq)
		v[14], v[15] = time.Unix(0, o.createdAt).UTC(), time.Unix(0, o.updatedAt).UTC()
	})
}

// orderUpdates are the changes to existing orders, as arrays for unnest
// (NULL = unchanged).
type orderUpdates struct {
	id, dFilled []int64
	status      []pgtype.Text
	price, qty  []pgtype.Int8
	seq         []int64
	at          []time.Time
}

func (c *orderUpdates) add(o *orderRow) {
	c.id = append(c.id, int64(o.id))
	c.dFilled = append(c.dFilled, int64(o.filled))
	c.status = append(c.status, pgtype.Text{String: o.status.String(), Valid: o.status != 0})
	c.price = append(c.price, pgtype.Int8{Int64: int64(o.price), Valid: o.hasPrice})
	c.qty = append(c.qty, pgtype.Int8{Int64: int64(o.qty), Valid: o.hasQty})
	c.seq = append(c.seq, int64(o.updatedSeq))
	c.at = append(c.at, time.Unix(0, o.updatedAt).UTC())
}
