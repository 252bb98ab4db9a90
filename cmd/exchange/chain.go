package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/persist/chaintx"
	"github.com/ubscore/ubscore/persist/chaintx/evm"
	"github.com/ubscore/ubscore/persist/chaintx/pgstore"
	"github.com/ubscore/ubscore/persist/withdraw"
)

// The chain side (spec 002 and withdrawals): off unless --chain-rpc is
// given. Wiring only; the behaviour lives in persist/chaintx and
// persist/withdraw.

// chainFlags are the --chain-* flags.
type chainFlags struct {
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

	// Guard: the hot wallet's balance and the withdrawal limits (chain_guard.go).
	Guard chainGuardFlags
}

func (c *chainFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.RPC, "chain-rpc", "", "EVM JSON-RPC URL for withdrawals and managed transactions; empty = chain side off; env UBS_CHAIN_RPC")
	fs.StringVar(&c.KeyFile, "chain-key-file", "", "file holding the hot wallet's hex private key (needed with --chain-rpc); env UBS_CHAIN_KEY_FILE")
	fs.Uint64Var(&c.Finality, "chain-finality", 12, "blocks (the receipt's included) before a tx is CONFIRMED / FAILED_FINAL")
	fs.StringVar(&c.NodeID, "chain-node-id", "", "this node's name in the submitter lease, unique per process; empty = host name + random, new at every start (logged)")
	fs.DurationVar(&c.Lease, "chain-lease", 10*time.Second, "submitter lease duration (renewed every third of it)")
	fs.DurationVar(&c.StuckAfter, "chain-stuck-after", 10*time.Minute, "no receipt this long after allocation: STUCK (CRITICAL log, hook)")
	fs.DurationVar(&c.Resubmit, "chain-resubmit-interval", 30*time.Second, "a pending tx without receipt is broadcast again this often (same nonce and bytes)")
	fs.DurationVar(&c.ResubmitMax, "chain-resubmit-max-interval", 10*time.Minute, "a STUCK tx is resent with a delay doubling from --chain-resubmit-interval up to this (one WARN per doubling)")
	fs.StringVar(&c.StuckAction, "chain-stuck-action", "NOOP", "what the hook does with a STUCK tx: NOOP, CANCEL, REPLACE or PLACEHOLDER")
	fs.StringVar(&c.Assets, "chain-assets", "ETH:18:0.0001:100", "withdrawable assets: SYMBOL:CHAIN_DECIMALS[:MIN[:MAX]],... (MIN/MAX in the asset's decimals)")
	fs.IntVar(&c.Workers, "chain-workers", 16, "writer workers (hash(submitter) % N)")
	fs.DurationVar(&c.RPCTimeout, "chain-rpc-timeout", 5*time.Second, "deadline of every chain RPC call; a call without an answer by then fails (ubs_chain_rpc_failures_total) and is retried later")
	fs.DurationVar(&c.Create, "chain-create-timeout", 30*time.Second, "POST /admin/v1/tx waits this long for the writer, then answers 202 UNKNOWN with the request_id")
	c.Guard.register(fs)
}

var chainEnv = []envFlag{{"chain-rpc", []string{"UBS_CHAIN_RPC"}}, {"chain-key-file", []string{"UBS_CHAIN_KEY_FILE"}}}

func (c *chainFlags) validate() error {
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
func (c *chainFlags) withdrawAssets(assets []gateway.Asset) ([]withdraw.Asset, error) {
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

// chainSide is the running chain side.
type chainSide struct {
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
	// waits for it.
	started atomic.Bool
}

// newChain dials the node, loads the key and wires the manager and the
// withdrawal service; start runs them once the tables exist.
func newChain(cfg Config, pool *pgxpool.Pool, m *metrics, log *slog.Logger) (*chainSide, error) {
	c := cfg.Chain
	assets, err := c.withdrawAssets(cfg.Instruments.Assets)
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
		Metrics: chaintx.NewMetrics(m.reg), Logger: log})
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
		Interval: c.Guard.BalanceInterval, Margin: margin, Registerer: m.reg, Log: log})
	svc := withdraw.New(withdraw.Config{Pool: pool, Submitter: signer.Address(), Assets: assets,
		ParseAddress: evm.ParseAddress, Nudge: mgr.Nudge, Limits: limits, HotWallet: hot})
	log.Info("chain side on", "rpc", c.RPC, "chain_id", chainID.String(), "hot_wallet", evm.Checksummed(signer.Address()),
		"node_id", mgr.NodeID(), "finality", c.Finality, "stuck_action", c.StuckAction)
	return &chainSide{log: log, client: client, mgr: mgr, svc: svc, hot: hot, createTimeout: c.Create}, nil
}

func (c *chainSide) gateway() *gateway.ChainConfig {
	return &gateway.ChainConfig{Withdrawals: c.svc, Tx: c.mgr, Limits: c.svc, ParseAddress: evm.ParseAddress, Checksum: evm.Checksummed,
		CreateTimeout: c.createTimeout}
}

// start runs the manager and the withdrawal settler once migrated.
func (c *chainSide) start(migrated *atomic.Bool) {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for !migrated.Load() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		c.mgr.Start()
		c.hot.RefreshLogged(ctx) // a reading before readiness: withdrawals are refused (HOT_WALLET_UNKNOWN) without one
		c.started.Store(true)
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.hot.Run(ctx) }()
		c.svc.RunSettler(ctx, c.mgr, 200*time.Millisecond, c.log)
	}()
}

func (c *chainSide) close() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	c.mgr.Close()
	c.client.Close()
}

// startChain starts the chain side when --chain-rpc is set (nil otherwise).
func startChain(cfg Config, pool *pgxpool.Pool, m *metrics, migrated *atomic.Bool, log *slog.Logger) (*chainSide, error) {
	if cfg.Chain.RPC == "" {
		return nil, nil
	}
	if pool == nil {
		return nil, errors.New("--chain-rpc needs Postgres (managed transactions and FUNDING live there)")
	}
	c, err := newChain(cfg, pool, m, log)
	if err != nil {
		return nil, err
	}
	c.start(migrated)
	return c, nil
}
