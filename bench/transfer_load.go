package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist/transfer"
	"github.com/ubscore/ubscore/persist/transfer/fakespot"
	"github.com/ubscore/ubscore/persist/transfer/model"
)

// benchAsset is the one asset of the transfer scenario (id 1, 6 decimals).
var benchAsset = model.AssetConfig{ID: 1, Symbol: "USDT", Precision: 6, MinTransfer: 1,
	MaxTransfer: 1_000_000_000_000, Status: model.AssetActive, InternalTransferEnabled: true}

// newBenchSpot returns the SPOT side with transferSeed units per user.
func newBenchSpot(users int) *fakespot.Spot {
	s := fakespot.New()
	for u := 1; u <= users; u++ {
		s.Credit(transfer.UserID(u), benchAsset.ID, transferSeed)
	}
	return s
}

// transferFunc makes one transfer of user's funds, FUNDING->SPOT if
// toSpot, else SPOT->FUNDING; nil means it committed.
type transferFunc func(ctx context.Context, user transfer.UserID, toSpot bool) error

func runTransferMode(ctx context.Context, pool *pgxpool.Pool, spot *fakespot.Spot, mode string, cfg TransferConfig) (TransferResult, error) {
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil { // same starting WAL state for every mode
		cfg.Logger.Warn("bench transfer: CHECKPOINT refused; modes may start unequal", "err", err)
	}
	if mode == ModeNaive {
		res := closedLoop(ctx, cfg, func(ctx context.Context, user transfer.UserID, toSpot bool) error {
			return naiveTransfer(ctx, pool, user, toSpot)
		})
		return res, checkNaive(ctx, pool, cfg.Users)
	}
	batcher := transfer.NewBatcher(pool, cfg.Batch)
	batcher.Start()
	defer batcher.Close()
	store, funding := transfer.NewStore(batcher), transfer.NewFunding(batcher)
	coord, err := transfer.NewCoordinator(transfer.Config{Store: store, Spot: spot,
		Assets:  func(s string) (model.AssetConfig, bool) { return benchAsset, s == benchAsset.Symbol },
		MaxWait: 30 * time.Second, Logger: cfg.Logger.With("mode", mode)})
	if err != nil {
		return TransferResult{}, err
	}
	res := closedLoop(ctx, cfg, func(ctx context.Context, user transfer.UserID, toSpot bool) error {
		req := model.Request{From: "SPOT", To: "FUNDING", Asset: benchAsset.Symbol, Amount: transferAmount}
		if toSpot {
			req.From, req.To = req.To, req.From
		}
		r, err := coord.Create(ctx, model.Caller{Authenticated: true, UserID: user}, req)
		if err == nil && r.Transfer.State != transfer.Committed {
			err = fmt.Errorf("transfer %s ended %s", r.Transfer.ReqID, r.Transfer.State)
		}
		return err
	})
	if s := batcher.Stats(); s.Batches.Load() > 0 {
		res.AvgBatch = round1(float64(s.Requests.Load()) / float64(s.Batches.Load()))
	}
	return res, checkFSM(ctx, pool, coord, funding, spot, cfg.Logger)
}

// closedLoop runs cfg.Clients clients calling do back to back for
// cfg.Warmup + cfg.Duration and measures the calls that end in the
// measured window. It returns when every client has stopped.
func closedLoop(ctx context.Context, cfg TransferConfig, do transferFunc) TransferResult {
	var (
		counting, stop atomic.Bool
		done, failed   atomic.Int64
		firstErr       atomic.Pointer[string]
		mu             sync.Mutex
		hist           = hdrhistogram.New(1, int64(60*time.Second/time.Microsecond), 3)
		wg             sync.WaitGroup
		owned          = cfg.Users / cfg.Clients // users per client
	)
	for c := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := hdrhistogram.New(1, int64(60*time.Second/time.Microsecond), 3)
			// Call i: the client's (i mod owned)-th user, toward SPOT on even
			// rounds over its users and back on odd ones.
			for i := 0; !stop.Load() && ctx.Err() == nil; i++ {
				user := transfer.UserID(c + 1 + (i%owned)*cfg.Clients)
				toSpot := (i/owned)%2 == 0
				t0 := time.Now()
				err := do(ctx, user, toSpot)
				d := time.Since(t0)
				if !counting.Load() {
					continue
				}
				if err != nil {
					failed.Add(1)
					s := err.Error()
					firstErr.CompareAndSwap(nil, &s)
					continue
				}
				done.Add(1)
				_ = local.RecordValue(max(d.Microseconds(), 1))
			}
			mu.Lock()
			hist.Merge(local)
			mu.Unlock()
		}()
	}
	sleep(ctx, cfg.Warmup)
	counting.Store(true)
	start := time.Now()
	sleep(ctx, cfg.Duration)
	counting.Store(false)
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	res := TransferResult{Transfers: done.Load(), Failed: failed.Load(),
		TPS:   round1(float64(done.Load()) / elapsed.Seconds()),
		P50us: float64(hist.ValueAtQuantile(50)), P99us: float64(hist.ValueAtQuantile(99)),
		P999us: float64(hist.ValueAtQuantile(99.9)), MaxUs: float64(hist.Max())}
	if p := firstErr.Load(); p != nil {
		res.FirstErr = *p
	}
	return res
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// naiveTransfer is the baseline: one transaction, both rows locked in id
// order, debit, credit, a transfer row.
func naiveTransfer(ctx context.Context, pool *pgxpool.Pool, user transfer.UserID, toSpot bool) error {
	from, to := 2*int64(user), 2*int64(user)+1
	if !toSpot {
		from, to = to, from
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, balance FROM bench_naive_accounts WHERE id = ANY($1) ORDER BY id FOR UPDATE`,
			[]int64{from, to})
		if err != nil {
			return err
		}
		balances, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ ID, Balance int64 }])
		if err != nil {
			return err
		}
		if len(balances) != 2 {
			return fmt.Errorf("naive: accounts %d/%d missing", from, to)
		}
		if b := balances[0]; (b.ID == from && b.Balance < transferAmountUnits) ||
			(balances[1].ID == from && balances[1].Balance < transferAmountUnits) {
			return errors.New("naive: insufficient balance")
		}
		if _, err := tx.Exec(ctx, `UPDATE bench_naive_accounts SET balance = balance - $2 WHERE id = $1`, from, transferAmountUnits); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE bench_naive_accounts SET balance = balance + $2 WHERE id = $1`, to, transferAmountUnits); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO bench_naive_transfers (from_id, to_id, amount) VALUES ($1, $2, $3)`,
			from, to, transferAmountUnits)
		return err
	})
}

// checkNaive: the naive ledger still holds exactly what it was seeded with.
func checkNaive(ctx context.Context, pool *pgxpool.Pool, users int) error {
	var sum int64
	if err := pool.QueryRow(ctx, `SELECT sum(balance)::bigint FROM bench_naive_accounts`).Scan(&sum); err != nil {
		return err
	}
	if want := int64(2*users) * transferSeed; sum != want {
		return fmt.Errorf("naive ledger holds %d units, want %d", sum, want)
	}
	return nil
}

// checkFSM finishes any transfer left unfinished (a client stopped while
// Create was driving it), then checks conservation (spec 7.2) to the unit
// and vacuums, so the next mode starts without this one's dead rows.
func checkFSM(ctx context.Context, pool *pgxpool.Pool, coord *transfer.Coordinator, funding *transfer.Funding,
	spot *fakespot.Spot, log *slog.Logger) error {
	rows, err := pool.Query(ctx, `SELECT req_id FROM transfers_tb WHERE state NOT IN (40, -10, -30)`)
	if err != nil {
		return err
	}
	open, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, id := range open {
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		t, err := coord.Drive(dctx, id)
		cancel()
		if err != nil || !t.State.Terminal() {
			return fmt.Errorf("transfer %s left %s: %v", id, t.State, err)
		}
	}
	if len(open) > 0 {
		log.Warn("bench transfer: finished transfers left open by stopped clients", "count", len(open))
	}
	ft, err := funding.Totals(ctx, benchAsset.ID)
	if err != nil {
		return err
	}
	spotTotal, spotExt := spot.Totals(benchAsset.ID)
	if ft.Uncertain != 0 || ft.InFlight != 0 || ft.Balance+spotTotal != ft.Deposits+spotExt {
		return fmt.Errorf("conservation broken: funding %d + spot %d (in flight %d, uncertain %d) != deposits %d + spot credits %d",
			ft.Balance, spotTotal, ft.InFlight, ft.Uncertain, ft.Deposits, spotExt)
	}
	_, err = pool.Exec(ctx, `VACUUM ANALYZE transfers_tb, transfer_operations, balances_tb`)
	return err
}
