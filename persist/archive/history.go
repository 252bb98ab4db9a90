package archive

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
)

// The order history and my-trades pages older than the server's memory
// (gateway.OrderArchive.Orders and Trades), from the sink's orders and
// trades tables through the per-user indexes of migration 0010.

// PersistedSeq implements gateway.OrderArchive: the sink's checkpoint.
func (a *Archive) PersistedSeq() core.Seq {
	if a.Persisted == nil {
		return 0
	}
	return a.Persisted()
}

// historyWhere is the WHERE clause of q over a table whose id, market and
// time columns are named: user first ($1), then the bounds, as args.
func historyWhere(q gateway.HistoryQuery, userCol, idCol, timeCol string, args []any) (string, []any) {
	args = append(args, int64(q.User), int64(min(q.Before, 1<<63-1)))
	w := fmt.Sprintf("%s = $%d AND %s < $%d", userCol, len(args)-1, idCol, len(args))
	if q.Market != 0 {
		args = append(args, int32(q.Market))
		w += fmt.Sprintf(" AND market_id = $%d", len(args))
	}
	if q.From != 0 {
		args = append(args, time.Unix(0, q.From).UTC())
		w += fmt.Sprintf(" AND %s >= $%d", timeCol, len(args))
	}
	if q.To != 0 {
		args = append(args, time.Unix(0, q.To).UTC())
		w += fmt.Sprintf(" AND %s <= $%d", timeCol, len(args))
	}
	return w, args
}

// Orders implements gateway.OrderArchive.
func (a *Archive) Orders(q gateway.HistoryQuery, dst []gateway.OrderRecord) ([]gateway.OrderRecord, error) {
	if !a.Ready.Load() {
		return dst, errors.New("the read model is not migrated yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Timeout)
	defer cancel()
	where, args := historyWhere(q, "user_id", "order_id", "created_at", nil)
	if len(q.Statuses) > 0 {
		names := make([]string, len(q.Statuses))
		for i, s := range q.Statuses {
			names[i] = s.String()
		}
		args = append(args, names)
		where += fmt.Sprintf(" AND status = ANY($%d)", len(args))
	}
	args = append(args, q.Limit)
	rows, err := a.Pool.Query(ctx, `SELECT order_id, user_id, market_id, side, type, time_in_force, price, quantity,
		quote_quantity, filled_quantity, status, client_order_id, created_at, outcome FROM orders WHERE `+where+
		fmt.Sprintf(" ORDER BY order_id DESC LIMIT $%d", len(args)), args...)
	if err != nil {
		return dst, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, user, market             int64
			price, qty, quoteQty, filled int64
			side, typ, tif, status       string
			clientID, outcome            *string
			created                      time.Time
		)
		if err := rows.Scan(&id, &user, &market, &side, &typ, &tif, &price, &qty, &quoteQty, &filled, &status,
			&clientID, &created, &outcome); err != nil {
			return dst, err
		}
		r := gateway.OrderRecord{ID: core.OrderID(id), User: core.UserID(user), Time: created.UnixNano(),
			Market: core.MarketID(market), Side: sideByName[side], Type: typeByName[typ], TIF: tifByName[tif],
			Status: statusByName[status], Price: core.Price(price), Qty: core.Units(qty), QuoteQty: core.Units(quoteQty),
			Filled: core.Units(filled)}
		if clientID != nil {
			r.ClientID, _ = core.KeyFrom(*clientID)
		}
		if outcome != nil { // a binary order: side and price are its own (migration 0060)
			r.Outcome = outcomeByName[*outcome]
		}
		dst = append(dst, r)
	}
	return dst, rows.Err()
}

// Trades implements gateway.OrderArchive: the newest of the user's trades
// as maker and as taker (one index scan each), merged.
func (a *Archive) Trades(q gateway.HistoryQuery, dst []gateway.UserTrade) ([]gateway.UserTrade, error) {
	if !a.Ready.Load() {
		return dst, errors.New("the read model is not migrated yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Timeout)
	defer cancel()
	const cols = `trade_id, seq, time, market_id, price, quantity, quote_amount, maker_order_id, taker_order_id,
		maker_user_id, taker_user_id, maker_fee, taker_fee, taker_side, taker_outcome, maker_outcome, taker_price,
		maker_price`
	maker, args := historyWhere(q, "maker_user_id", "trade_id", "time", nil)
	taker, args := historyWhere(q, "taker_user_id", "trade_id", "time", args)
	args = append(args, q.Limit)
	lim := fmt.Sprintf(" ORDER BY trade_id DESC LIMIT $%d", len(args))
	// UNION (not ALL): a trade with the user on both sides comes once.
	sql := `(SELECT ` + cols + ` FROM trades WHERE ` + maker + lim + `) UNION (SELECT ` + cols +
		` FROM trades WHERE ` + taker + lim + `)` + lim
	rows, err := a.Pool.Query(ctx, sql, args...)
	if err != nil {
		return dst, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, seq, market, price, qty, quote, mo, to, mu, tu, mf, tf int64
			at                                                         time.Time
			side                                                       string
			tOut, mOut                                                 *string
			tPrice, mPrice                                             *int64
		)
		if err := rows.Scan(&id, &seq, &at, &market, &price, &qty, &quote, &mo, &to, &mu, &tu, &mf, &tf, &side,
			&tOut, &mOut, &tPrice, &mPrice); err != nil {
			return dst, err
		}
		dst = append(dst, gateway.UserTrade{ID: uint64(id), Seq: core.Seq(seq), Time: at.UnixNano(),
			Market: core.MarketID(market), Price: core.Price(price), Qty: core.Units(qty), Quote: core.Units(quote),
			MakerOrder: core.OrderID(mo), TakerOrder: core.OrderID(to), MakerUser: core.UserID(mu), TakerUser: core.UserID(tu),
			MakerFee: core.Units(mf), TakerFee: core.Units(tf), TakerSide: sideByName[strings.ToUpper(side)]})
		if tOut != nil && mOut != nil && tPrice != nil && mPrice != nil { // a binary fill (migration 0060)
			t := &dst[len(dst)-1]
			t.TakerOutcome, t.MakerOutcome = outcomeByName[*tOut], outcomeByName[*mOut]
			t.TakerPrice, t.MakerPrice = core.Price(*tPrice), core.Price(*mPrice)
		}
	}
	return dst, rows.Err()
}

var outcomeByName = map[string]core.Outcome{"YES": core.OutcomeYes, "NO": core.OutcomeNo}
