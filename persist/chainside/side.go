// Package chainside is the chain side of the exchange (spec 002 and
// withdrawals): its configuration (defaults and validation; the server maps
// its --chain-* flags onto Config) and the wiring of the node client, the
// hot wallet's key, the managed-transaction manager (persist/chaintx) and
// the withdrawal service (persist/withdraw), where the behaviour lives.
// Off unless Config.RPC is set.
package chainside

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/chaintx/pgstore"
	"github.com/ubscore/ubscore/persist/withdraw"
)

// Config is the chain side's configuration; each field is the flag named.
type Config struct {
	RPC         string        // --chain-rpc: EVM JSON-RPC URL; "" = chain side off
	KeyFile     string        // --chain-key-file: hex private key of the hot wallet (never logged)
	Finality    uint64        // --chain-finality: blocks for CONFIRMED / FAILED_FINAL
	NodeID      string        // --chain-node-id: this process in submitter_lease
	Lease       time.Duration // --chain-lease
	StuckAfter  time.Duration // --chain-stuck-after
	Resubmit    time.Duration // --chain-resubmit-interval
	ResubmitMax time.Duration // --chain-resubmit-max-interval: the STUCK back-off's cap
	StuckAction string        // --chain-stuck-action: the hook policy
	Assets      string        // --chain-assets: SYMBOL:CHAIN_DECIMALS[:MIN[:MAX]],...
	Workers     int           // --chain-workers
	Create      time.Duration // --chain-create-timeout: POST /admin/v1/tx's wait before 202 UNKNOWN
	RPCTimeout  time.Duration // --chain-rpc-timeout: every chain RPC call's deadline

	// Guard: the hot wallet's balance and the withdrawal limits (guard.go).
	Guard GuardConfig
}

// Default is the default configuration (the chain side off).
func Default() Config {
	return Config{Finality: 12, Lease: 10 * time.Second, StuckAfter: 10 * time.Minute, Resubmit: 30 * time.Second,
		ResubmitMax: 10 * time.Minute, StuckAction: "NOOP", Assets: "ETH:18:0.0001:100", Workers: 16,
		RPCTimeout: 5 * time.Second, Create: 30 * time.Second,
		Guard: GuardConfig{BalanceInterval: 10 * time.Second, BalanceMargin: "0.01"}}
}

// Validate checks c (nothing when the chain side is off).
func (c *Config) Validate() error {
	if c.RPC == "" {
		return nil
	}
	if c.KeyFile == "" {
		return errors.New("--chain-rpc needs --chain-key-file")
	}
	if c.Finality == 0 || c.Lease <= 0 || c.StuckAfter <= 0 || c.Resubmit <= 0 || c.Workers <= 0 || c.Create <= 0 || c.RPCTimeout <= 0 ||
		c.ResubmitMax < c.Resubmit {
		return errors.New("--chain-finality, --chain-lease, --chain-stuck-after, --chain-resubmit-interval, --chain-workers, --chain-create-timeout and --chain-rpc-timeout must be > 0, and --chain-resubmit-max-interval >= --chain-resubmit-interval")
	}
	if _, err := chaintx.ParseAction(c.StuckAction); err != nil {
		return fmt.Errorf("--chain-stuck-action: %w", err)
	}
	return c.Guard.validate()
}

// withdrawAssets parses --chain-assets against the configured assets.
func (c *Config) withdrawAssets(assets []gateway.Asset) ([]withdraw.Asset, error) {
	var out []withdraw.Asset
	for _, spec := range strings.Split(c.Assets, ",") {
		f := strings.Split(strings.TrimSpace(spec), ":")
		if len(f) < 2 || len(f) > 4 {
			return nil, fmt.Errorf("--chain-assets %q: want SYMBOL:CHAIN_DECIMALS[:MIN[:MAX]]", spec)
		}
		var ga *gateway.Asset
		for i := range assets {
			if assets[i].Symbol == f[0] {
				ga = &assets[i]
			}
		}
		dec, err := strconv.Atoi(f[1])
		if ga == nil || err != nil || dec < 0 || dec > 36 {
			return nil, fmt.Errorf("--chain-assets %q: unknown asset or bad decimals", spec)
		}
		a := withdraw.Asset{Symbol: ga.Symbol, ID: ga.ID, Scale: int(ga.Scale), ChainDecimals: dec}
		for i, dst := range []*core.Units{&a.Min, &a.Max} {
			if len(f) > 2+i {
				v, err := gateway.ParseUnits(f[2+i], ga.Scale)
				if err != nil {
					return nil, fmt.Errorf("--chain-assets %q: %w", spec, err)
				}
				*dst = core.Units(v)
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// Side is the running chain side.
type Side struct {
	log    *slog.Logger
	client *evm.Client
	mgr    *chaintx.Manager
	svc    *withdraw.Service
	hot    *withdraw.HotWallet
	cancel context.CancelFunc
	// createTimeout is --chain-create-timeout.
	createTimeout time.Duration
	wg            sync.WaitGroup
	// started: the manager runs (its workers take requests); readiness
	// waits for it (Started).
	started atomic.Bool
}

// newSide dials the node, loads the key and wires the manager and the
// withdrawal service; start runs them once the tables exist.
func newSide(c Config, instruments []gateway.Asset, pool *pgxpool.Pool, reg prometheus.Registerer, log *slog.Logger) (*Side, error) {
	assets, err := c.withdrawAssets(instruments)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, err := evm.Dial(ctx, c.RPC)
	if err != nil {
		return nil, err
	}
	chainID, err := client.ChainID(ctx)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("chain: %s: chain id: %w", c.RPC, err)
	}
	signer, err := evm.LoadSigner(c.KeyFile, chainID)
	if err != nil {
		client.Close()
		return nil, err
	}
	mgr, err := chaintx.New(chaintx.Config{Store: pgstore.New(pool), Chain: client, Signers: []chaintx.Signer{signer},
		NodeID: c.NodeID, Lease: chaintx.LeaseConfig{Duration: c.Lease}, Workers: c.Workers, Finality: c.Finality,
		ResubmitInterval: c.Resubmit, ResubmitMaxInterval: c.ResubmitMax, StuckAfter: c.StuckAfter, RPCTimeout: c.RPCTimeout, Hook: chaintx.StaticHook(strings.ToUpper(c.StuckAction)),
		Metrics: chaintx.NewMetrics(reg), Logger: log})
	if err != nil {
		client.Close()
		return nil, err
	}
	limits, err := c.Guard.withdrawLimits(assets)
	if err != nil {
		client.Close()
		return nil, err
	}
	margin, _ := parseWei(c.Guard.BalanceMargin) // validated
	hot := withdraw.NewHotWallet(withdraw.HotWalletConfig{Pool: pool, Chain: client, Address: signer.Address(), RPCTimeout: c.RPCTimeout,
		Interval: c.Guard.BalanceInterval, Margin: margin, Registerer: reg, Log: log})
	svc := withdraw.New(withdraw.Config{Pool: pool, Submitter: signer.Address(), Assets: assets,
		ParseAddress: evm.ParseAddress, Nudge: mgr.Nudge, Limits: limits, HotWallet: hot})
	log.Info("chain side on", "rpc", c.RPC, "chain_id", chainID.String(), "hot_wallet", evm.Checksummed(signer.Address()),
		"node_id", mgr.NodeID(), "finality", c.Finality, "stuck_action", c.StuckAction)
	return &Side{log: log, client: client, mgr: mgr, svc: svc, hot: hot, createTimeout: c.Create}, nil
}

// Gateway is the gateway's view of the chain side.
func (c *Side) Gateway() *gateway.ChainConfig {
	return &gateway.ChainConfig{Withdrawals: c.svc, Tx: c.mgr, Limits: c.svc, ParseAddress: evm.ParseAddress, Checksum: evm.Checksummed,
		CreateTimeout: c.createTimeout}
}

// start runs the manager and the withdrawal settler once migrated.
func (c *Side) start(migrated *atomic.Bool) {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if !persist.WaitMigrated(ctx, migrated, 50*time.Millisecond) {
			return
		}
		c.mgr.Start()
		c.hot.RefreshLogged(ctx) // a reading before readiness: withdrawals are refused (HOT_WALLET_UNKNOWN) without one
		c.started.Store(true)
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.hot.Run(ctx) }()
		c.svc.RunSettler(ctx, c.mgr, 200*time.Millisecond, c.log)
	}()
}

// Started reports whether the manager runs (readiness waits for it).
func (c *Side) Started() bool { return c.started.Load() }

// Close stops the chain side and waits for it.
func (c *Side) Close() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	c.mgr.Close()
	c.client.Close()
}

// Start starts the chain side when c.RPC is set (nil otherwise) over the
// configured instruments, registering its metrics on reg; its manager and
// settler run once migrated is set.
func Start(c Config, instruments []gateway.Asset, pool *pgxpool.Pool, reg prometheus.Registerer, migrated *atomic.Bool, log *slog.Logger) (*Side, error) {
	if c.RPC == "" {
		return nil, nil
	}
	if pool == nil {
		return nil, errors.New("--chain-rpc needs Postgres (managed transactions and FUNDING live there)")
	}
	side, err := newSide(c, instruments, pool, reg, log)
	if err != nil {
		return nil, err
	}
	side.start(migrated)
	return side, nil
}
