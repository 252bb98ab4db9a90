package chaintx

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// Every chain RPC call has a deadline (issue 33 item 2, --chain-rpc-timeout):
// the Manager wraps its Chain in a timeoutChain, so the writers, the tracker
// and the remediations all get it. A hung node otherwise froze the writers
// and the tracker, and with them STUCK detection and the pile-up gauges.
//
// A call that times out is a failure of that call (ErrRPCTimeout, counted in
// ubs_chain_rpc_failures_total{method, reason="timeout"}), never an outcome:
// a Receipt that timed out is not "not found", a Send that timed out is an
// error to resend later (the node may have it: the resend answers "known").
// After a timeout the node is taken as hung for one more timeout: calls in
// that window fail at once (reason="unavailable") instead of each waiting
// out its own deadline, so one pass of a loop over many txs takes about one
// timeout, not one per tx. The first call after the window asks the node again.

// ErrRPCTimeout: a chain call got no answer within the RPC timeout, or was
// not made because the node had just timed out (see rpc.go).
var ErrRPCTimeout = errors.New("chaintx: chain node did not answer in time")

type timeoutChain struct {
	c   Chain
	d   time.Duration
	met *Metrics

	mu   sync.Mutex
	down time.Time // local clock: calls fail at once until then
}

var _ Chain = (*timeoutChain)(nil)

func newTimeoutChain(c Chain, d time.Duration, met *Metrics) *timeoutChain {
	return &timeoutChain{c: c, d: d, met: met}
}

// do runs f with the deadline, classifying a timeout as ErrRPCTimeout.
func (t *timeoutChain) do(ctx context.Context, method string, f func(context.Context) error) error {
	t.mu.Lock()
	down := time.Now().Before(t.down)
	t.mu.Unlock()
	if down {
		t.met.RPCFailures.WithLabelValues(method, "unavailable").Inc()
		return fmt.Errorf("%w: %s not sent: the node timed out within the last %s", ErrRPCTimeout, method, t.d)
	}
	cctx, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	err := f(cctx)
	if err == nil || ctx.Err() != nil || !errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return err // an answer, or the caller's own end (stopping)
	}
	t.mu.Lock()
	t.down = time.Now().Add(t.d)
	t.mu.Unlock()
	t.met.RPCFailures.WithLabelValues(method, "timeout").Inc()
	return fmt.Errorf("%w: %s after %s: %v", ErrRPCTimeout, method, t.d, err)
}

func (t *timeoutChain) ChainID(ctx context.Context) (v *big.Int, err error) {
	err = t.do(ctx, "chain_id", func(c context.Context) (e error) { v, e = t.c.ChainID(c); return })
	return
}

func (t *timeoutChain) PendingNonce(ctx context.Context, a Address) (v uint64, err error) {
	err = t.do(ctx, "pending_nonce", func(c context.Context) (e error) { v, e = t.c.PendingNonce(c, a); return })
	return
}

func (t *timeoutChain) MinedNonce(ctx context.Context, a Address) (v uint64, err error) {
	err = t.do(ctx, "mined_nonce", func(c context.Context) (e error) { v, e = t.c.MinedNonce(c, a); return })
	return
}

func (t *timeoutChain) MinedNonceAt(ctx context.Context, a Address, block uint64) (v uint64, err error) {
	err = t.do(ctx, "mined_nonce_at", func(c context.Context) (e error) { v, e = t.c.MinedNonceAt(c, a, block); return })
	return
}

func (t *timeoutChain) Send(ctx context.Context, raw []byte) error {
	return t.do(ctx, "send", func(c context.Context) error { return t.c.Send(c, raw) })
}

func (t *timeoutChain) Receipt(ctx context.Context, h Hash) (v ChainReceipt, err error) {
	err = t.do(ctx, "receipt", func(c context.Context) (e error) { v, e = t.c.Receipt(c, h); return })
	return
}

func (t *timeoutChain) Head(ctx context.Context) (v uint64, err error) {
	err = t.do(ctx, "head", func(c context.Context) (e error) { v, e = t.c.Head(c); return })
	return
}

func (t *timeoutChain) BlockHash(ctx context.Context, n uint64) (v Hash, err error) {
	err = t.do(ctx, "block_hash", func(c context.Context) (e error) { v, e = t.c.BlockHash(c, n); return })
	return
}

func (t *timeoutChain) Fees(ctx context.Context) (v Fees, err error) {
	err = t.do(ctx, "fees", func(c context.Context) (e error) { v, e = t.c.Fees(c); return })
	return
}
