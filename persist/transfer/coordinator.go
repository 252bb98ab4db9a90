package transfer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/logging"
	"github.com/ubscore/ubscore/persist/transfer/model"
	"github.com/ubscore/ubscore/persist/transfer/ulid"
)

// LevelCritical is the slog level of alerts that need an operator: funds in
// flight with an unknown outcome, a refund that keeps failing. It is
// logging.LevelCritical (printed "CRITICAL"), named here for this package's
// readers.
const LevelCritical = logging.LevelCritical

// Defaults of Config.
const (
	DefaultMaxWait     = 2 * time.Second
	DefaultCallTimeout = 5 * time.Second
	DefaultRetryBase   = 10 * time.Millisecond
	DefaultRetryMax    = 500 * time.Millisecond
)

// Config wires a Coordinator.
type Config struct {
	// Store is the transfers' table; the FUNDING side is the ledger of the
	// same Batcher (NewFunding), so a fused step is one transaction of both
	// (FUNDING faults: Batcher.SetFaults).
	Store *Store
	Spot  model.Side // the SPOT adapter (over the core; fakespot.Spot in tests, possibly in transferfault.Faulty)
	// Assets resolves a request's asset symbol; false = unknown (INVALID_ASSET).
	Assets func(symbol string) (model.AssetConfig, bool)
	// Rate returns the user's usage for the rate limits; nil = no limits (P2).
	Rate   func(ctx context.Context, user UserID, asset AssetID) model.RateState
	Limits model.RateLimits
	// MaxWait bounds how long Create drives a transfer before answering with
	// its current state (the Worker finishes it).
	MaxWait time.Duration
	// CallTimeout bounds one step (CAS + adapter call). A step runs to its end
	// even when the caller's context is cancelled, so an abandoned request
	// leaves a state, not a half-made call.
	CallTimeout         time.Duration
	RetryBase, RetryMax time.Duration // backoff between retries of an unknown outcome
	// SettleWait bounds how long Create tries to settle an insert of
	// unknown outcome (settle.go) before answering Unconfirmed.
	SettleWait time.Duration
	Logger     *slog.Logger
	// OnCommit, if set, is called with the row after every state change
	// this process committed (a won CAS; the FUNDING operation it carries
	// is committed with it). It runs on the step's goroutine and must not
	// block (the WebSocket fan-out, package stream, queues it).
	OnCommit func(Transfer)
}

// Stats are the coordinator's counters (exported as metrics by the server).
type Stats struct {
	CASWon     atomic.Int64 // state changes this process made
	CASLost    atomic.Int64 // CAS refused: another driver moved the transfer first
	Unknown    atomic.Int64 // adapter answers that were not SUCCESS / EXPLICIT_FAIL (each logged CRITICAL)
	Committed  atomic.Int64
	Failed     atomic.Int64
	RolledBack atomic.Int64
	Stuck      atomic.Int64 // stale transfers in TARGET_PENDING / COMPENSATING found by the Worker
	// RefundFailures counts refund calls that did not succeed; from the 3rd
	// on one transfer each is a MON-002 alert.
	RefundFailures atomic.Int64
	MON002         atomic.Int64 // MON-002 alerts: a transfer's refund failed for the 3rd time or more
}

// Coordinator creates transfers and drives them through the FSM. Any number
// of coordinators and workers, in any processes, may drive the same
// transfer: every state change is a CAS and every adapter is idempotent.
type Coordinator struct {
	cfg     Config
	funding *Funding // on the Store's Batcher: a fused step is one transaction of both
	ids     *ulid.Gen
	log     *slog.Logger
	stats   Stats
}

// NewCoordinator checks cfg and fills its defaults.
func NewCoordinator(cfg Config) (*Coordinator, error) {
	if cfg.Store == nil || cfg.Spot == nil || cfg.Assets == nil {
		return nil, errors.New("transfer: coordinator needs Store, Spot and Assets")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.MaxWait, DefaultMaxWait)
	def(&cfg.CallTimeout, DefaultCallTimeout)
	def(&cfg.RetryBase, DefaultRetryBase)
	def(&cfg.RetryMax, DefaultRetryMax)
	def(&cfg.SettleWait, DefaultSettleWait)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Coordinator{cfg: cfg, funding: NewFunding(cfg.Store.b), ids: ulid.NewGen(), log: cfg.Logger}, nil
}

// Stats returns the live counters.
func (c *Coordinator) Stats() *Stats { return &c.stats }

// Result is Create's answer.
type Result struct {
	Transfer  Transfer
	Duplicate bool // the cid was already used: this is the original transfer, nothing new happened
	// Unconfirmed: the database did not confirm the insert and could not be
	// asked since; the row may exist (then the Worker drives it) or never
	// will. Transfer holds the request with its req_id (State is INIT, no
	// transfer_id): poll it by req_id; not found there means nothing happened.
	Unconfirmed bool
}

// Create validates req (layer 2 of defense in depth, 1.5.8 order), stores
// it as INIT with a new req_id and drives it until it is terminal or
// MaxWait passes, returning the state reached.
//
// Errors keep "failed" apart from "unknown" (spec 2.3, 4): a refusal is an
// *Error with the spec's code; any other error means this call recorded no
// transfer and moved nothing (SYSTEM_ERROR: retrying is safe). Once a row
// exists Create never returns an error: it answers that transfer as last
// known (the database failing while driving it leaves it to the Worker).
// When the insert's own outcome is unknown, the req_id is settled first
// (settleInsert): the row is found, or fenced off as FAILED so that it can
// never appear later; if the database stays away even for that, the answer
// is Result.Unconfirmed.
func (c *Coordinator) Create(ctx context.Context, caller model.Caller, req model.Request) (Result, error) {
	var asset *model.AssetConfig
	if a, found := c.cfg.Assets(req.Asset); found {
		asset = &a
	}
	var rate model.RateState
	if c.cfg.Rate != nil && asset != nil && caller.Authenticated {
		rate = c.cfg.Rate(ctx, caller.UserID, asset.ID)
	}
	ch, e := model.CheckRequest(req, caller, asset, rate, c.cfg.Limits)
	if e != nil {
		return Result{}, e
	}
	if ch.CID != "" { // step 8: a repeated cid answers with the original
		t, err := c.cfg.Store.GetByCID(ctx, ch.UserID, ch.CID)
		if err == nil {
			return Result{Transfer: t, Duplicate: true}, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return Result{}, err
		}
	}
	src, err := c.reader(ch.From).AccountState(ctx, ch.UserID, ch.Asset.ID)
	if err != nil {
		return Result{}, err
	}
	dst, err := c.reader(ch.To).AccountState(ctx, ch.UserID, ch.Asset.ID)
	if err != nil {
		return Result{}, err
	}
	if e := model.CheckAccounts(ch, src, dst); e != nil {
		return Result{}, e
	}
	id, err := c.ids.New()
	if err != nil {
		return Result{}, err
	}
	t := Transfer{ReqID: id, CID: ch.CID, UserID: ch.UserID, From: ch.From, To: ch.To, Asset: ch.Asset.ID,
		Amount: ch.Amount, State: Init}
	if !batchInsertable(t) { // cannot happen after CheckRequest: nothing recorded
		return Result{}, fmt.Errorf("transfer: request %s is not storable", id)
	}
	sent := t                                        // on an error insertFused answers a zero Transfer: settle the request
	t, inserted, known, err := c.insertFused(ctx, t) // INSERT and the first move, one transaction
	if err != nil {
		// The row may or may not exist: settle it before answering.
		var r Result
		if r, known, err = c.settleInsert(ctx, sent, err); err != nil || r.Duplicate || r.Unconfirmed || r.Transfer.State.Terminal() {
			return r, err
		}
		t = r.Transfer
	} else if !inserted { // lost a race on the same cid
		return Result{Transfer: t, Duplicate: true}, nil
	}
	c.log.Info("transfer created", "req_id", t.ReqID, "user", t.UserID, "from", t.From, "to", t.To,
		"asset", t.Asset, "amount", t.Amount)
	wctx, cancel := context.WithTimeout(ctx, c.cfg.MaxWait)
	defer cancel()
	var from *Transfer
	if known {
		from = &t
	}
	if t, err = c.drive(wctx, t.ReqID, from, t); err != nil {
		// The row exists: the answer is the transfer as last known, never
		// a bare error (a client retrying an error without a cid would move
		// the funds twice). It is not terminal; the Worker finishes it.
		c.log.Warn("transfer: the database failed while driving; answering the last known state",
			"req_id", t.ReqID, "state", t.State.String(), "err", err)
	}
	return Result{Transfer: t}, nil
}

// Get returns the transfer with reqID.
func (c *Coordinator) Get(ctx context.Context, reqID string) (Transfer, error) {
	return c.cfg.Store.Get(ctx, reqID)
}

// Drive runs the FSM of reqID until it is terminal or ctx is done (spec 9.2
// execute_fsm), backing off between retries of unknown outcomes, and returns
// the last state read. A cancelled ctx stops it between steps, never inside
// one.
func (c *Coordinator) Drive(ctx context.Context, reqID string) (Transfer, error) {
	return c.drive(ctx, reqID, nil, Transfer{})
}

// drive is Drive; known, when set, is the row exactly as this driver has
// just left it (from its own write): stepped from without a read, and
// returned as is once terminal (a terminal state never changes). last is
// the row as last known (zero if none); on an error drive returns the last
// state it knew. It advances the transfer and, whenever a step makes no
// progress, waits a backoff that doubles up to RetryMax and restarts from
// RetryBase after any progress.
func (c *Coordinator) drive(ctx context.Context, reqID string, known *Transfer, last Transfer) (Transfer, error) {
	backoff := c.cfg.RetryBase
	for {
		t, progressed, err := c.advanceFrom(ctx, reqID, known)
		known = nil
		if t.ReqID != "" {
			last = t
		}
		if err != nil {
			return last, err
		}
		if t.State.Terminal() || ctx.Err() != nil {
			return t, nil
		}
		if progressed {
			backoff = c.cfg.RetryBase
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, c.cfg.RetryMax)
	}
}

// advance steps reqID while it makes progress, without waiting: the
// Worker's unit of work. It returns the state reached.
func (c *Coordinator) advance(ctx context.Context, reqID string) (Transfer, error) {
	t, _, err := c.advanceFrom(ctx, reqID, nil)
	return t, err
}

// advanceFrom is advance starting from known (as drive's known), and
// reports whether any step moved the transfer. It returns when the
// transfer is terminal, ctx is done, or a step makes no progress.
func (c *Coordinator) advanceFrom(ctx context.Context, reqID string, known *Transfer) (t Transfer, progressed bool, err error) {
	for {
		if known != nil && (known.State.Terminal() || ctx.Err() == nil) {
			t = *known
		} else {
			rt, rerr := c.read(ctx, reqID)
			if rerr != nil {
				return t, progressed, rerr // t: the state this loop last knew (zero if none)
			}
			t = rt
		}
		known = nil
		if t.State.Terminal() || ctx.Err() != nil {
			return t, progressed, nil
		}
		switch c.step(ctx, &t) {
		case movedKnown:
			known = &t
		case moved:
		default:
			return t, progressed, nil
		}
		progressed = true
	}
}

// read loads reqID even when ctx is already cancelled (the caller still
// gets the state reached), bounded by CallTimeout.
func (c *Coordinator) read(ctx context.Context, reqID string) (Transfer, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CallTimeout)
	defer cancel()
	return c.cfg.Store.Get(rctx, reqID)
}

// reader is the account reader of side t.
func (c *Coordinator) reader(t model.AccountType) model.AccountReader {
	if t == model.AccountFunding {
		return c.funding
	}
	return c.cfg.Spot
}

// errorf formats a step error for logs and error_message.
func errorf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
