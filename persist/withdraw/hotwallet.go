package withdraw

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubscore/ubscore/logging"
	"github.com/ubscore/ubscore/persist/chaintx"
)

// The hot wallet's balance (issue 33 item 3). A background loop reads the
// balance at a block H (and a fee estimate) every Interval: no RPC per
// request. Create then refuses HOT_WALLET_INSUFFICIENT, in its transaction
// and so with nothing debited, unless
//
//	balance(H) >= Σ value of the wallet's txs not paid in H
//	            + (their gas limits + this one's) x max fee per gas
//	            + this withdrawal's value + Margin
//
// "Not paid in H": managed txs of the wallet with no receipt at or below H
// (CREATED .. TRACKING, STUCK; admin txs too, they spend the same wallet),
// final ones included: a tx mined after H and final since (CONFIRMED, or
// FAILED_FINAL with its gas spent) is still in balance(H). Anchoring the
// pending set to the balance's block makes an old balance conservative for
// our own payments: a tx mined after H is still counted, whatever its state
// now. Gas is included (limit x the last max fee, the most a tx can cost)
// because a wallet that holds the values but not their gas goes STUCK all
// the same. Creates of the wallet take one advisory lock to check, so
// concurrent requests cannot pass the check together.
//
// Unknown balance (never read, or the last read older than StaleAfter):
// fail closed, HOT_WALLET_UNKNOWN (503, nothing debited, retry later). A
// node that does not answer cannot send the withdrawal either, so refusing
// costs the user one retry, where accepting could repeat what this check is
// for: a debit that goes STUCK.

// BalanceChain is what the hot wallet check reads from the node
// (*evm.Client).
type BalanceChain interface {
	Head(ctx context.Context) (uint64, error)
	Fees(ctx context.Context) (chaintx.Fees, error)
	RPC(ctx context.Context, result any, method string, args ...any) error
	// MinedNonceAt is eth_getTransactionCount(a, block): every tx of a
	// mined after block has a nonce at or above it.
	MinedNonceAt(ctx context.Context, a chaintx.Address, block uint64) (uint64, error)
}

// HotWalletConfig configures a HotWallet.
type HotWalletConfig struct {
	Pool     *pgxpool.Pool
	Chain    BalanceChain
	Address  chaintx.Address // the hot wallet (the withdrawals' submitter)
	Interval time.Duration   // refresh period (--chain-balance-interval); default 10 s
	// RPCTimeout bounds each reading's calls (--chain-rpc-timeout, as every
	// other chain call); default 5 s, and never above Interval.
	RPCTimeout time.Duration
	Margin     *big.Int // wei kept above what is pending (--chain-balance-margin); nil = 0
	GasLimit   uint64   // of a withdrawal tx; default 21000
	// StaleAfter: a balance older than this is unknown; default 3 x Interval.
	StaleAfter time.Duration
	Registerer prometheus.Registerer // nil: metrics not registered
	Log        *slog.Logger
}

// hotSnapshot is one refresh's reading.
type hotSnapshot struct {
	balance *big.Int // wei at block
	block   uint64
	nonce   uint64   // the wallet's txs mined up to block (its nonce there)
	maxFee  *big.Int // wei per gas
	at      time.Time
}

// HotWallet holds the last balance reading of the hot wallet.
type HotWallet struct {
	cfg      HotWalletConfig
	balance  prometheus.Gauge
	required prometheus.Gauge
	refresh  *prometheus.CounterVec

	mu    sync.Mutex
	snap  *hotSnapshot // nil: never read
	short bool         // the last refresh found it short (the CRITICAL alert is raised on the change)
	now   func() time.Time
}

// NewHotWallet returns the check; Run (or Refresh) reads the balance.
func NewHotWallet(cfg HotWalletConfig) *HotWallet {
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.RPCTimeout <= 0 {
		cfg.RPCTimeout = 5 * time.Second
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 3 * cfg.Interval
	}
	if cfg.Margin == nil {
		cfg.Margin = new(big.Int)
	}
	if cfg.GasLimit == 0 {
		cfg.GasLimit = 21000
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	h := &HotWallet{cfg: cfg, now: time.Now,
		balance: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ubs_chain_hot_wallet_balance",
			Help: "The hot wallet's balance in wei (the chain's smallest unit) at the last refresh."}),
		required: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ubs_chain_hot_wallet_required",
			Help: "Wei the hot wallet needs at the last refresh: value and gas of its unpaid txs plus the margin."}),
		refresh: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ubs_chain_hot_wallet_refresh_total",
			Help: "Hot wallet balance refreshes by result (ok | error)."}, []string{"result"})}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(h.balance, h.required, h.refresh)
	}
	return h
}

// Run refreshes every Interval until ctx ends (call RefreshLogged first
// for a reading at start).
func (h *HotWallet) Run(ctx context.Context) {
	chaintx.Every(ctx, h.cfg.Interval, func() { h.RefreshLogged(ctx) })
}

// RefreshLogged is Refresh with its failure logged (WARN: the last reading
// stays, until it is stale).
func (h *HotWallet) RefreshLogged(ctx context.Context) {
	if err := h.Refresh(ctx); err != nil && ctx.Err() == nil {
		h.cfg.Log.Warn("withdraw: hot wallet balance refresh failed (kept the last reading)", "err", err)
	}
}

// Refresh reads the balance at the head block and a fee estimate, and
// raises the CRITICAL alert when the wallet cannot pay what is pending
// plus the margin (once per change; a WARN when it can again).
func (h *HotWallet) Refresh(ctx context.Context) error {
	err := h.read(ctx)
	if err != nil {
		h.refresh.WithLabelValues("error").Inc()
		return err
	}
	h.refresh.WithLabelValues("ok").Inc()
	s := h.snapshot()
	pend, gas, n, err := unpaid(ctx, h.cfg.Pool, h.cfg.Address, s)
	if err != nil {
		return fmt.Errorf("withdraw: hot wallet pending: %w", err)
	}
	need := new(big.Int).Mul(new(big.Int).SetUint64(gas), s.maxFee)
	need.Add(need, pend).Add(need, h.cfg.Margin)
	f, _ := new(big.Float).SetInt(need).Float64()
	h.required.Set(f)
	short := s.balance.Cmp(need) < 0
	h.mu.Lock()
	was := h.short
	h.short = short
	h.mu.Unlock()
	switch {
	case short && !was:
		logging.Critical(ctx, h.cfg.Log, "withdraw: hot wallet cannot pay the pending withdrawals plus the margin: new withdrawals are refused (HOT_WALLET_INSUFFICIENT) until it is refilled",
			"hot_wallet", h.cfg.Address, "balance_wei", s.balance.String(), "required_wei", need.String(),
			"pending_txs", n, "margin_wei", h.cfg.Margin.String(), "block", s.block)
	case !short && was:
		h.cfg.Log.Warn("withdraw: hot wallet can pay the pending withdrawals again", "hot_wallet", h.cfg.Address,
			"balance_wei", s.balance.String(), "required_wei", need.String())
	}
	return nil
}

// read takes one reading from the node.
func (h *HotWallet) read(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, min(h.cfg.Interval, h.cfg.RPCTimeout))
	defer cancel()
	head, err := h.cfg.Chain.Head(ctx)
	if err != nil {
		return fmt.Errorf("withdraw: hot wallet: head: %w", err)
	}
	var hex string
	if err := h.cfg.Chain.RPC(ctx, &hex, "eth_getBalance", string(h.cfg.Address), fmt.Sprintf("0x%x", head)); err != nil {
		return fmt.Errorf("withdraw: hot wallet: balance: %w", err)
	}
	bal, ok := new(big.Int).SetString(strings.TrimPrefix(hex, "0x"), 16)
	if !ok {
		return fmt.Errorf("withdraw: hot wallet: balance %q is not hex", hex)
	}
	nonce, err := h.cfg.Chain.MinedNonceAt(ctx, h.cfg.Address, head)
	if err != nil {
		return fmt.Errorf("withdraw: hot wallet: nonce: %w", err)
	}
	fees, err := h.cfg.Chain.Fees(ctx)
	if err != nil {
		return fmt.Errorf("withdraw: hot wallet: fees: %w", err)
	}
	fee := fees.MaxFee
	if fee == nil {
		fee = new(big.Int)
	}
	h.mu.Lock()
	h.snap = &hotSnapshot{balance: bal, block: head, nonce: nonce, maxFee: fee, at: h.now()}
	h.mu.Unlock()
	f, _ := new(big.Float).SetInt(bal).Float64()
	h.balance.Set(f) // after the snapshot: whoever sees the gauge sees Create use this reading
	return nil
}

func (h *HotWallet) snapshot() *hotSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.snap
}

// check is Create's test, in its transaction: refuses HOT_WALLET_UNKNOWN or
// HOT_WALLET_INSUFFICIENT. The advisory lock (held to the commit) makes
// the wallet's creates check one at a time, each seeing the ones before.
func (h *HotWallet) check(ctx context.Context, tx pgx.Tx, value *big.Int, gasLimit uint64) error {
	s := h.snapshot()
	if s == nil || h.now().Sub(s.at) > h.cfg.StaleAfter {
		return refuse(CodeHotWalletUnknown, "the hot wallet's balance is not known (chain node not answering): nothing debited; retry later")
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('ubs-withdraw-hot-wallet:' || $1))`, string(h.cfg.Address)); err != nil {
		return err
	}
	pend, gas, _, err := unpaid(ctx, tx, h.cfg.Address, s)
	if err != nil {
		return err
	}
	need := new(big.Int).Mul(new(big.Int).SetUint64(gas+gasLimit), s.maxFee)
	need.Add(need, pend).Add(need, value).Add(need, h.cfg.Margin)
	if s.balance.Cmp(need) < 0 {
		return refuse(CodeHotWalletShort, "the hot wallet cannot pay this withdrawal now: nothing debited; retry later")
	}
	return nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// unpaid sums the value and gas limits of the wallet's txs not paid in
// s.block: no receipt at or below it. Three index-shaped parts: CREATED
// rows (no nonce) and allocated, not final (0032's partial indexes); and
// final, mined after the block (managed_tx_nonce from s.nonce: a tx mined
// after the block has a nonce at or above the wallet's nonce there, so the
// scan covers the txs since, not the wallet's history). Without the third,
// a withdrawal mined after the reading and final before the next one left
// the sum while balance(block) still held its value: a Create could pass
// that the wallet cannot pay (TestHotWalletBalance, ten users at once).
func unpaid(ctx context.Context, q querier, wallet chaintx.Address, s *hotSnapshot) (value *big.Int, gas uint64, n int64, err error) {
	var v string
	err = q.QueryRow(ctx, `SELECT COALESCE(sum(value_wei), 0)::text, COALESCE(sum(gas_limit), 0), count(*) FROM (
			SELECT value_wei, gas_limit FROM managed_tx WHERE submitter = $1 AND nonce IS NULL
			UNION ALL
			SELECT value_wei, gas_limit FROM managed_tx WHERE submitter = $1 AND nonce IS NOT NULL AND confirmed_at IS NULL
				AND (receipt_block IS NULL OR receipt_block > $2)
			UNION ALL
			SELECT value_wei, gas_limit FROM managed_tx WHERE submitter = $1 AND nonce >= $3 AND confirmed_at IS NOT NULL
				AND receipt_block > $2) p`, string(wallet), int64(s.block), int64(s.nonce)).Scan(&v, &gas, &n)
	if err != nil {
		return nil, 0, 0, err
	}
	value, ok := new(big.Int).SetString(v, 10)
	if !ok {
		return nil, 0, 0, fmt.Errorf("withdraw: pending value %q", v)
	}
	return value, gas, n, nil
}
