package persist

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

var (
	tradeColumns = []string{"trade_id", "seq", "market_id", "price", "quantity", "quote_amount",
		"maker_order_id", "taker_order_id", "maker_user_id", "taker_user_id", "maker_fee", "taker_fee",
		"taker_side", "time", "fill_kind", "taker_outcome", "maker_outcome", "maker_side", "maker_price", "taker_price"}
	ledgerColumns = []string{"seq", "idx", "user_id", "asset_id", "d_available", "d_frozen", "cause", "ref",
		"trade_id", "time"}
	walEventColumns = []string{"seq", "idx", "event_type", "order_id", "payload", "time"}
	orderColumns    = []string{"order_id", "user_id", "market_id", "side", "type", "time_in_force", "price",
		"quantity", "quote_quantity", "filled_quantity", "status", "client_order_id", "created_seq", "updated_seq",
		"created_at", "updated_at", "outcome", "book_type", "book_direction", "book_price", "frozen_asset_type",
		"frozen_amount"}
)

// updateOrdersSQL applies the batch's changes to orders placed before it:
// fills are added, status/price/quantity replaced when the batch set them.
const updateOrdersSQL = `
UPDATE orders AS o SET
	filled_quantity = o.filled_quantity + u.d_filled,
	status = coalesce(u.status, o.status),
	price = coalesce(u.price, o.price),
	quantity = coalesce(u.quantity, o.quantity),
	frozen_amount = CASE WHEN o.outcome IS NULL THEN NULL ELSE coalesce(u.frozen, o.frozen_amount) END, -- binary rows only (0060)
	updated_seq = u.seq,
	updated_at = u.at
FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::timestamptz[],
	$8::bigint[])
	AS u(order_id, d_filled, status, price, quantity, seq, at, frozen)
WHERE o.order_id = u.order_id`

// copySQL is the COPY statement of table with cols (identifiers quoted:
// some columns are keywords).
func copySQL(table string, cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = `"` + c + `"`
	}
	return "COPY " + table + " (" + strings.Join(q, ", ") + ") FROM STDIN (FORMAT binary)"
}

var (
	copyTradesSQL    = copySQL("trades", tradeColumns)
	copyLedgerSQL    = copySQL("spot_ledger", ledgerColumns)
	copyWalEventsSQL = copySQL("wal_events", walEventColumns)
	copyOrdersSQL    = copySQL("orders", orderColumns)
)

// writeRows writes every row of b in tx, encoding the COPY streams in cb.
// It returns how many order updates found no row.
func writeRows(ctx context.Context, tx pgx.Tx, b *batchRows, cb *copyBuf) (missing int, err error) {
	cb.reset()
	for i := range b.trades {
		r := &b.trades[i]
		cb.row(len(tradeColumns))
		cb.int8(r.tradeID)
		cb.int8(r.seq)
		cb.int4(r.market)
		cb.int8(r.price)
		cb.int8(r.qty)
		cb.int8(r.quote)
		cb.int8(r.makerOrder)
		cb.int8(r.takerOrder)
		cb.int8(r.makerUser)
		cb.int8(r.takerUser)
		cb.int8(r.makerFee)
		cb.int8(r.takerFee)
		cb.text(r.takerSide)
		cb.timestamptz(r.at)
		if r.fillKind != "" {
			cb.text(r.fillKind)
			cb.text(r.takerOutcome)
			cb.text(r.makerOutcome)
			cb.text(r.makerSide)
			cb.int8(r.makerPrice)
			cb.int8(r.takerPrice)
		} else {
			for range 6 {
				cb.null()
			}
		}
	}
	if err := cb.send(ctx, tx, "trades", copyTradesSQL); err != nil {
		return 0, err
	}
	cb.reset()
	for i := range b.ledger {
		r := &b.ledger[i]
		cb.row(len(ledgerColumns))
		cb.int8(r.seq)
		cb.int4(r.idx)
		cb.int8(r.user)
		cb.int4(r.asset)
		cb.int8(r.dAvail)
		cb.int8(r.dFrozen)
		cb.text(r.cause)
		if r.hasRef {
			cb.text(r.ref)
		} else {
			cb.null()
		}
		if r.hasTrade {
			cb.int8(r.tradeID)
		} else {
			cb.null()
		}
		cb.timestamptz(r.at)
	}
	if err := cb.send(ctx, tx, "spot_ledger", copyLedgerSQL); err != nil {
		return 0, err
	}
	cb.reset()
	for i := range b.events {
		r := &b.events[i]
		cb.row(len(walEventColumns))
		cb.int8(r.seq)
		cb.int4(r.idx)
		cb.text(r.typ)
		cb.int8(r.order)
		cb.json(b.payloads[r.start:r.end])
		cb.timestamptz(r.at)
	}
	if err := cb.send(ctx, tx, "wal_events", copyWalEventsSQL); err != nil {
		return 0, err
	}
	if missing, err = writeOrders(ctx, tx, b.orders, cb); err != nil {
		return 0, err
	}
	if err := writeBinary(ctx, tx, &b.binaryRows); err != nil {
		return 0, err
	}
	if err := writeBreakers(ctx, tx, b.breakerRows); err != nil {
		return 0, err
	}
	return missing, writeP2P(ctx, tx, &b.p2p, cb)
}

// writeBreakers applies the batch's breaker trips and resolutions in seq
// order (a trip and its resolution may share a batch). They are rare: one
// statement each.
func writeBreakers(ctx context.Context, tx pgx.Tx, rows []breakerRow) error {
	for i := range rows {
		r := &rows[i]
		at := time.Unix(0, r.Time).UTC()
		var err error
		if !r.Resolve {
			_, err = tx.Exec(ctx, `INSERT INTO circuit_breaker_events (market_id, trigger_reason, context, triggered_at, trigger_seq)
				VALUES ($1, $2, $3::jsonb, $4, $5)`, r.market, r.Reason.String(), jsonbSafe(r.ContextJSON()), at, int64(r.Seq))
		} else {
			by := pgtype.Text{String: strconv.FormatUint(uint64(r.User), 10), Valid: r.User != 0}
			note := pgtype.Text{String: textSafe(r.Text), Valid: r.Text != ""}
			status := pgtype.Text{String: r.Status.String(), Valid: r.Market != 0}
			_, err = tx.Exec(ctx, `UPDATE circuit_breaker_events SET resolved_at = $2, resolved_by = $3,
				resolution_note = $4, resolved_seq = $5, resolved_status = $6
				WHERE market_id = $1 AND resolved_at IS NULL`, r.market, at, by, note, int64(r.Seq), status)
		}
		if err != nil {
			return fmt.Errorf("persist: circuit_breaker_events at seq %d: %w", r.Seq, err)
		}
	}
	return nil
}

// writeOrders inserts the batch's new orders (COPY: like the rows of the
// other tables they cannot exist yet, persisted_seq being below their
// PLACE_ORDER) and updates the others in one statement. It returns how many
// updates found no row.
func writeOrders(ctx context.Context, tx pgx.Tx, rows []orderRow, cb *copyBuf) (missing int, err error) {
	var upd orderUpdates
	cb.reset()
	for i := range rows {
		o := &rows[i]
		if !o.isNew {
			upd.add(o)
			continue
		}
		cb.row(len(orderColumns))
		cb.int8(int64(o.id))
		cb.int8(int64(o.user))
		cb.int4(int32(o.market))
		cb.text(o.side.String())
		cb.text(o.typ.String())
		cb.text(o.tif.String())
		cb.int8(int64(o.price))
		cb.int8(int64(o.qty))
		cb.int8(int64(o.quoteQty))
		cb.int8(int64(o.filled))
		cb.text(o.status.String())
		if o.clientID.IsZero() {
			cb.null()
		} else {
			cb.text(keyText(o.clientID))
		}
		cb.int8(int64(o.createdSeq))
		cb.int8(int64(o.updatedSeq))
		cb.timestamptz(o.createdAt)
		cb.timestamptz(o.updatedAt)
		if o.outcome == 0 { // spot
			for range 6 {
				cb.null()
			}
			continue
		}
		cb.text(o.outcome.String())
		cb.text(bookType(o.outcome, o.bookSide))
		cb.text(o.bookSide.String())
		cb.int8(int64(o.bookPrice))
		cb.text(frozenAssetType(o.side))
		cb.int8(int64(o.hold))
	}
	if err := cb.send(ctx, tx, "orders", copyOrdersSQL); err != nil {
		return 0, err
	}
	if n := len(upd.id); n > 0 {
		tag, err := tx.Exec(ctx, updateOrdersSQL, upd.id, upd.dFilled, upd.status, upd.price, upd.qty,
			upd.seq, upd.at, upd.hold)
		if err != nil {
			return 0, fmt.Errorf("persist: update %d orders: %w", n, err)
		}
		missing = n - int(tag.RowsAffected())
	}
	return missing, nil
}

// orderUpdates are the changes to existing orders, as arrays for unnest
// (NULL = unchanged).
type orderUpdates struct {
	id, dFilled []int64
	status      []pgtype.Text
	price, qty  []pgtype.Int8
	hold        []pgtype.Int8 // frozen_amount of a binary order
	seq         []int64
	at          []time.Time
}

func (c *orderUpdates) add(o *orderRow) {
	c.id = append(c.id, int64(o.id))
	c.dFilled = append(c.dFilled, int64(o.filled))
	c.status = append(c.status, pgtype.Text{String: o.status.String(), Valid: o.status != 0})
	c.price = append(c.price, pgtype.Int8{Int64: int64(o.price), Valid: o.hasPrice})
	c.qty = append(c.qty, pgtype.Int8{Int64: int64(o.qty), Valid: o.hasQty})
	c.hold = append(c.hold, pgtype.Int8{Int64: int64(o.hold), Valid: o.hasHold})
	c.seq = append(c.seq, int64(o.updatedSeq))
	c.at = append(c.at, time.Unix(0, o.updatedAt).UTC())
}

// textSafe is s as Postgres text accepts it: valid UTF-8, no NUL.
func textSafe(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// jsonbSafe is JSON text as jsonb accepts it: jsonb refuses the escape
// \u0000 that encoding/json writes for a NUL.
func jsonbSafe(b []byte) string { return strings.ReplaceAll(string(b), `\u0000`, `\ufffd`) }
