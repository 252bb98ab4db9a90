package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/transfer"
)

// The transfer scenario measures internal transfers FUNDING <-> SPOT on
// Postgres two ways, on one throw-away database, in one run:
//
//	naive  one transaction per transfer on two plain account rows:
//	       SELECT ... FOR UPDATE both rows, debit, credit, insert a
//	       transfer row, COMMIT (the baseline: no FSM, no SPOT side)
//	fsm    transfer.Coordinator.Create, the one path the server runs:
//	       the steps of concurrent transfers share the transactions of one
//	       transfer.Batcher, each FUNDING operation and the transitions
//	       around it one transaction (fused steps); fakespot.Spot as SPOT
//
// Each mode runs Clients closed-loop clients for Warmup, then Duration
// (measured). Client c moves funds of its own users (c+1, c+1+Clients, ...),
// alternating FUNDING->SPOT and SPOT->FUNDING per user, so no two clients
// touch the same rows and balances stay bounded. After each mode the money
// is counted: a mode that loses or makes a unit fails the run.

// Defaults of the transfer scenario.
const (
	DefaultTransferUsers   = 1_000
	DefaultTransferClients = 64
	DefaultTransferPGURL   = "postgres://postgres@127.0.0.1:5432/postgres"
	DefaultTransferPool    = 32
	transferSeed           = 1_000_000_000 // units per user on each side at the start
	transferAmount         = "0.01"        // per transfer, USDT
	transferAmountUnits    = 10_000
	transferHistory        = 100_000 // finished transfers in the FSM's tables before the first mode
)

// Transfer benchmark modes, in the order they run.
const (
	ModeNaive = "naive"
	ModeFSM   = "fsm"
)

// transferModes is every mode, in the order they run.
var transferModes = []string{ModeNaive, ModeFSM}

// TransferConfig configures the transfer scenario.
type TransferConfig struct {
	PGURL    string // admin URL; the bench creates and drops database ubs_bench_<random> through it
	Users    int    // >= Clients
	Clients  int
	Duration time.Duration // measured, per mode
	Warmup   time.Duration // not measured, per mode, before Duration
	Modes    []string      // subset of the modes, run in the standard order; all if empty
	// Pool is the most Postgres connections the bench opens (clients beyond
	// it wait for one, as behind any pool); DefaultTransferPool if 0.
	Pool   int
	Batch  transfer.BatchOptions
	Logger *slog.Logger // progress and warnings; discards if nil
}

// TransferResult is one mode's measurement (warm-up excluded).
type TransferResult struct {
	Transfers int64   `json:"transfers"` // committed within the measured window
	Failed    int64   `json:"failed"`    // errors or transfers not COMMITTED by Create's return
	TPS       float64 `json:"tps"`
	P50us     float64 `json:"p50_us"` // one transfer, start of the call to its return
	P99us     float64 `json:"p99_us"`
	P999us    float64 `json:"p999_us"`
	MaxUs     float64 `json:"max_us"`
	// fsm: requests per committed batch transaction.
	AvgBatch float64 `json:"avg_batch,omitempty"`
	FirstErr string  `json:"first_error,omitempty"`
}

// TransferReport is the scenario's outcome; its JSON form is the one-line report.
type TransferReport struct {
	Database  string          `json:"database"` // the throw-away database, dropped by the time the report exists
	Users     int             `json:"users"`
	Clients   int             `json:"clients"`
	Pool      int             `json:"pool"`
	DurationS float64         `json:"duration_s"`
	Naive     *TransferResult `json:"naive,omitempty"`
	FSM       *TransferResult `json:"fsm,omitempty"`
	// Ratios of fsm to naive (0 when a side did not run).
	TPSFSMNaive float64 `json:"tps_ratio_fsm_naive"`
	P99FSMNaive float64 `json:"p99_ratio_fsm_naive"`
}

func (cfg *TransferConfig) defaults() error {
	if cfg.PGURL == "" {
		cfg.PGURL = DefaultTransferPGURL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Pool == 0 {
		cfg.Pool = DefaultTransferPool
	}
	if len(cfg.Modes) == 0 {
		cfg.Modes = transferModes
	}
	for _, m := range cfg.Modes {
		if !contains(transferModes, m) {
			return fmt.Errorf("bench: unknown transfer mode %q", m)
		}
	}
	switch {
	case cfg.Clients < 1 || cfg.Clients > MaxProducers:
		return fmt.Errorf("bench: clients %d outside 1..%d", cfg.Clients, MaxProducers)
	case cfg.Users < cfg.Clients:
		return fmt.Errorf("bench: users %d < clients %d (each client needs users of its own)", cfg.Users, cfg.Clients)
	case cfg.Pool < 2:
		return fmt.Errorf("bench: pool %d < 2", cfg.Pool)
	case cfg.Batch.Writers >= cfg.Pool:
		return fmt.Errorf("bench: %d batch writers need a pool larger than %d", cfg.Batch.Writers, cfg.Pool)
	case cfg.Duration <= 0 || cfg.Warmup < 0:
		return errors.New("bench: transfer needs a duration > 0 and a warm-up >= 0")
	}
	return nil
}

// RunTransfer runs the transfer scenario. The database it creates is
// dropped before it returns, whatever happens, and ctx's end stops it.
func RunTransfer(ctx context.Context, cfg TransferConfig) (rep TransferReport, err error) {
	if err := cfg.defaults(); err != nil {
		return rep, err
	}
	pool, name, drop, err := benchDatabase(ctx, cfg)
	rep.Database = name
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, drop()) }()
	if err := persist.Migrate(ctx, pool); err != nil {
		return rep, err
	}
	if err := seedTransfer(ctx, pool, cfg.Users); err != nil {
		return rep, err
	}
	rep = TransferReport{Database: name, Users: cfg.Users, Clients: cfg.Clients, Pool: cfg.Pool, DurationS: cfg.Duration.Seconds()}
	spot := newBenchSpot(cfg.Users)
	for _, mode := range transferModes {
		if !contains(cfg.Modes, mode) {
			continue
		}
		cfg.Logger.Info("bench transfer: running", "mode", mode, "clients", cfg.Clients, "duration", cfg.Duration)
		res, err := runTransferMode(ctx, pool, spot, mode, cfg)
		if err != nil {
			return rep, fmt.Errorf("bench: %s: %w", mode, err)
		}
		switch mode {
		case ModeNaive:
			rep.Naive = &res
		case ModeFSM:
			rep.FSM = &res
		}
	}
	if f, n := rep.FSM, rep.Naive; f != nil && n != nil && n.TPS > 0 && n.P99us > 0 {
		rep.TPSFSMNaive, rep.P99FSMNaive = round2(f.TPS/n.TPS), round2(f.P99us/n.P99us)
	}
	return rep, nil
}

// benchDatabase creates database ubs_bench_<random> and returns a pool on
// it, its name and the function that closes the pool and drops it.
func benchDatabase(ctx context.Context, cfg TransferConfig) (*pgxpool.Pool, string, func() error, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, "", nil, err
	}
	name := "ubs_bench_" + hex.EncodeToString(rnd[:])
	admin := func(ctx context.Context, sql string) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, cfg.PGURL)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	drop := func() error {
		// Not ctx: the database goes even when the run was interrupted.
		if err := admin(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("bench: drop database %s: %w", name, err)
		}
		return nil
	}
	if err := admin(ctx, "CREATE DATABASE "+name); err != nil {
		// An interrupt can land after the server created it: drop it anyway.
		return nil, name, nil, errors.Join(fmt.Errorf("bench: create database %s: %w", name, err), drop())
	}
	pc, err := pgxpool.ParseConfig(cfg.PGURL)
	if err != nil {
		return nil, name, nil, errors.Join(err, drop())
	}
	pc.ConnConfig.Database = name
	pc.MaxConns = int32(cfg.Pool)
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, name, nil, errors.Join(err, drop())
	}
	cfg.Logger.Info("bench transfer: database", "name", name)
	return pool, name, func() error { pool.Close(); return drop() }, nil
}

// seedTransfer gives every user transferSeed units on each side: the naive
// ledger's two account rows (2u = FUNDING, 2u+1 = SPOT) and the FSM's
// FUNDING row, recorded as an external deposit (the SPOT side is seeded in
// newBenchSpot). The FSM's tables also get transferHistory finished
// transfers and their records, then statistics, as a production database
// has: on tables just created the planner's choices are not the ones
// production runs (and the naive ledger's table is a heap with one index).
func seedTransfer(ctx context.Context, pool *pgxpool.Pool, users int) error {
	_, err := pool.Exec(ctx, fmt.Sprintf(`
		CREATE TABLE bench_naive_accounts (
			id      bigint PRIMARY KEY,
			balance bigint NOT NULL CHECK (balance >= 0)
		);
		CREATE TABLE bench_naive_transfers (
			id         bigserial PRIMARY KEY,
			from_id    bigint NOT NULL,
			to_id      bigint NOT NULL,
			amount     bigint NOT NULL CHECK (amount > 0),
			created_at timestamptz NOT NULL DEFAULT now()
		);
		INSERT INTO bench_naive_accounts (id, balance) SELECT id, %[1]d FROM generate_series(2, 2 * %[2]d + 1) AS id;
		INSERT INTO funding_deposits (tx_ref, user_id, asset_id, amount)
			SELECT 'seed-' || u, u, 1, %[1]d FROM generate_series(1, %[2]d) AS u;
		INSERT INTO balances_tb (user_id, asset_id, available) SELECT u, 1, %[1]d FROM generate_series(1, %[2]d) AS u;
		-- History: 'H' + digits is never a ULID, so never a new transfer's req_id.
		INSERT INTO transfers_tb (req_id, user_id, asset_id, amount, transfer_type, source_type, from_account, to_account, state)
			SELECT 'H' || lpad(i::text, 25, '0'), 1 + i %% %[2]d, 1, 1, 1, 1, 'FUNDING', 'SPOT', 40
			FROM generate_series(1, %[3]d) AS i;
		INSERT INTO transfer_operations (req_id, adapter, op, result, user_id, asset_id, amount)
			SELECT 'H' || lpad(i::text, 25, '0'), 'funding', 'withdraw', 'SUCCESS', 1 + i %% %[2]d, 1, 1
			FROM generate_series(1, %[3]d) AS i;
		ANALYZE`, transferSeed, users, transferHistory))
	return err
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }
