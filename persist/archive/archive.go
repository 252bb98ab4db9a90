// Package archive reads finished orders and trades back from the Postgres
// read model the sink writes (its orders and trades tables): the server's
// fallback for what its memory no longer holds (gateway.OrderArchive).
package archive

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
)

// Archive answers GET /api/v1/order/{id} for finished orders that the
// core and History no longer hold, from the sink's `orders` and `trades`
// tables (gateway.OrderArchive). Postgres lags the WAL by the sink's lag, so
// it is only a fallback for old orders.
type Archive struct {
	Pool      *pgxpool.Pool
	Timeout   time.Duration   // one lookup's budget (Timeout: the server's)
	Ready     *atomic.Bool    // the sink has applied the migrations: the tables exist
	Persisted func() core.Seq // the sink's persisted seq (nil: 0)
}

// Timeout is the server's budget for one Postgres lookup of an old order.
const Timeout = 2 * time.Second

var (
	sideByName   = map[string]core.Side{"BUY": core.Buy, "SELL": core.Sell}
	typeByName   = map[string]core.OrderType{"LIMIT": core.Limit, "MARKET": core.Market}
	tifByName    = map[string]core.TimeInForce{"GTC": core.GTC, "IOC": core.IOC, "FOK": core.FOK, "POST_ONLY": core.PostOnly}
	statusByName = map[string]core.OrderStatus{"NEW": core.StatusNew, "PARTIALLY_FILLED": core.StatusPartiallyFilled,
		"FILLED": core.StatusFilled, "CANCELLED": core.StatusCancelled, "EXPIRED": core.StatusExpired, "REJECTED": core.StatusRejected}
)

// Order implements gateway.OrderArchive.
func (a *Archive) Order(id core.OrderID) (gateway.OrderRecord, bool, error) {
	if !a.Ready.Load() {
		return gateway.OrderRecord{}, false, errors.New("the read model is not migrated yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Timeout)
	defer cancel()
	var (
		rec                          gateway.OrderRecord
		user, market                 int64
		price, qty, quoteQty, filled int64
		side, typ, tif, status       string
		clientID                     *string
		created                      time.Time
	)
	err := a.Pool.QueryRow(ctx, `SELECT user_id, market_id, side, type, time_in_force, price, quantity,
		quote_quantity, filled_quantity, status, client_order_id, created_at FROM orders WHERE order_id = $1`, int64(id)).
		Scan(&user, &market, &side, &typ, &tif, &price, &qty, &quoteQty, &filled, &status, &clientID, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, err
	}
	rec = gateway.OrderRecord{ID: id, User: core.UserID(user), Time: created.UnixNano(), Market: core.MarketID(market),
		Side: sideByName[side], Type: typeByName[typ], TIF: tifByName[tif], Status: statusByName[status],
		Price: core.Price(price), Qty: core.Units(qty), QuoteQty: core.Units(quoteQty), Filled: core.Units(filled)}
	if clientID != nil {
		rec.ClientID, _ = core.KeyFrom(*clientID)
	}
	rows, err := a.Pool.Query(ctx, `SELECT trade_id, extract(epoch from time)*1e9, price, quantity,
		CASE WHEN maker_order_id = $1 THEN maker_fee ELSE taker_fee END, maker_order_id, taker_order_id
		FROM trades WHERE maker_order_id = $1 OR taker_order_id = $1 ORDER BY trade_id LIMIT $2`,
		int64(id), gateway.MaxFillsPerOrder+1)
	if err != nil {
		return rec, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			f                      gateway.Fill
			tid, p, q, fee, mk, tk int64
			t                      float64
		)
		if err := rows.Scan(&tid, &t, &p, &q, &fee, &mk, &tk); err != nil {
			return rec, false, err
		}
		if len(rec.Fills) == gateway.MaxFillsPerOrder {
			rec.FillsTruncated = true
			break
		}
		f = gateway.Fill{TradeID: uint64(tid), Time: int64(t), Price: core.Price(p), Qty: core.Units(q),
			Fee: core.Units(fee), Maker: core.OrderID(mk), Taker: core.OrderID(tk)}
		rec.Fills = append(rec.Fills, f)
	}
	return rec, true, rows.Err()
}
