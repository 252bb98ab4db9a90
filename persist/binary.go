package persist

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ubscore/ubscore/core"
)

// Binary markets (issue 22; migrations 0040, 0041): binary_markets rows from
// the config command (its question included) and the lifecycle events, positions from the core's
// POSITION events (latest per user and market in a batch), zeroed by
// POSITION_SETTLED and removed when the market is archived.

// binOp is one binary_markets change, applied in seq order.
type binOp struct {
	kind   uint8 // binConfig, binStatus, binSettled, binArchived
	seq    core.Seq
	market core.MarketID
	cmd    core.Command // binConfig: the config command
	status core.MarketStatus
	out    core.Outcome
	pnl    core.Units // binSettled: the pnl pool paid out; binConfig: the payout
}

const (
	binConfig uint8 = iota + 1
	binStatus
	binSettled
	binArchived
)

// positionRow is the latest state of one position in the batch.
type positionRow struct {
	market                core.MarketID
	user                  core.UserID
	yes, no               core.Units
	yesCost, noCost       core.Units
	yesPending, noPending core.Units
	seq                   core.Seq
}

// binaryRows holds a batch's binary rows (part of batchRows).
type binaryRows struct {
	binOps []binOp
	pos    []positionRow
	posAt  map[[2]uint64]int // (market, user) -> index in pos
}

func (b *binaryRows) resetBinary() {
	b.binOps, b.pos = b.binOps[:0], b.pos[:0]
	if b.posAt == nil {
		b.posAt = make(map[[2]uint64]int)
	}
	clear(b.posAt)
}

func (b *binaryRows) binaryRowCount() int { return len(b.binOps) + len(b.pos) }

// binaryConfig records an applied KindConfigBinary (its payout from the
// MARKET_CONFIGURED event: the command may leave it to the core's default).
func (b *binaryRows) binaryConfig(r *Record, res *core.Event) {
	c := &r.Cmd
	if c.Kind != core.KindConfigBinary || res == nil || res.Code != core.OK {
		return
	}
	op := binOp{kind: binConfig, seq: c.Seq, market: c.Market, cmd: *c}
	for i := range r.Events {
		if e := &r.Events[i]; e.Kind == core.EvMarketConfigured {
			op.pnl = e.Amount // the payout
		}
	}
	b.binOps = append(b.binOps, op)
}

// binaryEvent records the binary rows of one event.
func (b *binaryRows) binaryEvent(seq core.Seq, e *core.Event) {
	switch e.Kind {
	case core.EvMarketStatus:
		b.binOps = append(b.binOps, binOp{kind: binStatus, seq: seq, market: e.Market,
			status: core.MarketStatus(e.Detail), out: core.Outcome(e.Flags)})
	case core.EvMarketHalted:
		b.binOps = append(b.binOps, binOp{kind: binStatus, seq: seq, market: e.Market, status: core.MarketHalted})
	case core.EvMarketResumed:
		b.binOps = append(b.binOps, binOp{kind: binStatus, seq: seq, market: e.Market, status: core.MarketStatus(e.Detail)})
	case core.EvMarketSettled:
		b.binOps = append(b.binOps, binOp{kind: binSettled, seq: seq, market: e.Market, pnl: e.Amount})
	case core.EvMarketArchived:
		b.binOps = append(b.binOps, binOp{kind: binArchived, seq: seq, market: e.Market})
		// its positions go with it (the statement deletes the stored ones)
		kept := b.pos[:0]
		for _, r := range b.pos {
			if r.market != e.Market {
				kept = append(kept, r)
			}
		}
		b.pos = kept
		clear(b.posAt)
		for i, r := range b.pos {
			b.posAt[[2]uint64{uint64(r.market), uint64(r.user)}] = i
		}
	case core.EvPosition:
		b.position(positionRow{market: e.Market, user: e.User, yes: e.Qty, no: e.Amount, yesCost: e.DAvail,
			noCost: e.DFrozen, yesPending: e.Fee, noPending: e.Fee2, seq: seq})
	case core.EvPositionSettled:
		b.position(positionRow{market: e.Market, user: e.User, seq: seq})
	}
}

func (b *binaryRows) position(r positionRow) {
	k := [2]uint64{uint64(r.market), uint64(r.user)}
	if i, ok := b.posAt[k]; ok {
		b.pos[i] = r
		return
	}
	b.posAt[k] = len(b.pos)
	b.pos = append(b.pos, r)
}

// upsertPositionsSQL writes the batch's latest positions.
const upsertPositionsSQL = `
INSERT INTO positions (market_id, user_id, yes_volume, no_volume, yes_cost_sum, no_cost_sum, yes_pending_sell,
	no_pending_sell, updated_seq)
SELECT * FROM unnest($1::integer[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
	$7::bigint[], $8::bigint[], $9::bigint[])
ON CONFLICT (market_id, user_id) DO UPDATE SET yes_volume = excluded.yes_volume, no_volume = excluded.no_volume,
	yes_cost_sum = excluded.yes_cost_sum, no_cost_sum = excluded.no_cost_sum,
	yes_pending_sell = excluded.yes_pending_sell, no_pending_sell = excluded.no_pending_sell,
	updated_seq = excluded.updated_seq`

// writeBinary applies the batch's binary_markets changes in seq order, then
// its positions (archives already dropped the positions they remove).
func writeBinary(ctx context.Context, tx pgx.Tx, b *binaryRows) error {
	for i := range b.binOps {
		if err := writeBinOp(ctx, tx, &b.binOps[i]); err != nil {
			return fmt.Errorf("persist: binary_markets at seq %d: %w", b.binOps[i].seq, err)
		}
	}
	if len(b.pos) == 0 {
		return nil
	}
	n := len(b.pos)
	mk, seqs := make([]int32, n), make([]int64, n)
	user := make([]int64, n)
	cols := make([][]int64, 6)
	for j := range cols {
		cols[j] = make([]int64, n)
	}
	for i, r := range b.pos {
		mk[i], user[i], seqs[i] = int32(r.market), int64(r.user), int64(r.seq)
		for j, v := range [6]core.Units{r.yes, r.no, r.yesCost, r.noCost, r.yesPending, r.noPending} {
			cols[j][i] = int64(v)
		}
	}
	if _, err := tx.Exec(ctx, upsertPositionsSQL, mk, user, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5],
		seqs); err != nil {
		return fmt.Errorf("persist: positions: %w", err)
	}
	return nil
}

func writeBinOp(ctx context.Context, tx pgx.Tx, o *binOp) error {
	var err error
	switch o.kind {
	case binConfig:
		c := &o.cmd
		payout := int64(o.pnl)
		close := pgtype.Timestamptz{Time: time.Unix(0, int64(c.Price)).UTC(), Valid: c.Price != 0}
		// the core accepted the question (core.ValidQuestion: UTF-8, no NUL); "" is a market from before questions
		question := pgtype.Text{String: c.Text, Valid: c.Text != ""}
		_, err = tx.Exec(ctx, `INSERT INTO binary_markets (market_id, quote_asset_id, payout, tick, lot, min_qty, max_qty,
			maker_fee, taker_fee, close_time, status, created_seq, updated_seq, question)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'DRAFT', $11, $11, $12)
			ON CONFLICT (market_id) WHERE archived_seq IS NULL DO UPDATE SET quote_asset_id = excluded.quote_asset_id,
			payout = excluded.payout, tick = excluded.tick, lot = excluded.lot, min_qty = excluded.min_qty,
			max_qty = excluded.max_qty, maker_fee = excluded.maker_fee, taker_fee = excluded.taker_fee,
			close_time = excluded.close_time, updated_seq = excluded.updated_seq, question = excluded.question`,
			int32(c.Market), int32(c.Cfg.Quote), payout, payout/100, int64(c.Cfg.Lot), int64(c.Cfg.MinQty),
			int64(c.Cfg.MaxQty), int64(c.Cfg.MakerFee), int64(c.Cfg.TakerFee), close, int64(o.seq), question)
	case binStatus:
		out := pgtype.Text{String: o.out.String(), Valid: o.out != 0}
		_, err = tx.Exec(ctx, `UPDATE binary_markets SET status = $2, outcome = coalesce($3, outcome), updated_seq = $4
			WHERE market_id = $1 AND archived_seq IS NULL`, int32(o.market), o.status.String(), out, int64(o.seq))
	case binSettled:
		_, err = tx.Exec(ctx, `UPDATE binary_markets SET settled = true, pnl_paid = $2, updated_seq = $3
			WHERE market_id = $1 AND archived_seq IS NULL`, int32(o.market), int64(o.pnl), int64(o.seq))
	case binArchived:
		if _, err = tx.Exec(ctx, `UPDATE binary_markets SET status = 'ARCHIVED', archived_seq = $2, updated_seq = $2
			WHERE market_id = $1 AND archived_seq IS NULL`, int32(o.market), int64(o.seq)); err == nil {
			_, err = tx.Exec(ctx, `DELETE FROM positions WHERE market_id = $1`, int32(o.market))
		}
	}
	return err
}
