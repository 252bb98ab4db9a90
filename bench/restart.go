package bench

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// The restart scenario (issue 39 item 4): a data dir holding a large state
// — accounts, resting orders spread over spot markets, PENDING spec 003
// transfers, active binary markets — as a snapshot at the WAL's last seq,
// and the time journal.Start takes on it with the read view and the state
// follower, as the exchange starts (recovery: snapshot load, full check;
// then the two replicas). With RestartConfig.Exchange it then starts the
// real exchange binary on that data dir and times the whole restart, from
// process start to /health/ready 200 (restart_exchange.go): the pipeline's
// part, the order history's warm-up and HTTP (Postgres only if given).

// RestartConfig configures RunRestart.
type RestartConfig struct {
	Dir      string
	Logger   *slog.Logger // the pipeline's (start-up progress); discards if nil
	Accounts int          // spec 003 users (each an account with USD), <= core.MaxP2PUsers
	Orders   int          // resting bids, one per account at most, spread over Markets
	Markets  int          // spot markets, <= 200
	Pending  int          // PENDING transfers (a day's hold)
	Binary   int          // active binary markets
	// Exchange, if set, is the path of an exchange binary: after the
	// pipeline's start, RunRestart starts it on the data dir (with a config
	// file of the state's instruments and ExchangeArgs) and times process
	// start to GET /health/ready 200 (the whole restart: recovery, the
	// replicas, the history warm-up, HTTP), then stops it with SIGTERM.
	Exchange     string
	ExchangeArgs []string  // e.g. --pg-url URL (default --pg-url none)
	Progress     io.Writer // the exchange's log lines, each with its time since the process start (nil: none)
}

// RestartResult is what RunRestart measured.
type RestartResult struct {
	Build         time.Duration // making the state (not part of the restart)
	SnapshotBytes int
	Start         time.Duration // journal.Start: process start to "ready" for the pipeline
	Recovery      time.Duration // of which the recovery (snapshot load, replay, full check)
	Close         time.Duration
	Seq           core.Seq
	// With Config.Exchange: process start to /health/ready 200, and the
	// time since the process start of the exchange's start-up log lines
	// (Parts: message -> time, first occurrence).
	Ready    time.Duration
	ReadyCPU time.Duration // the exchange's CPU time (user + system) at ready
	Parts    []ReadyPart
}

// ReadyPart is one start-up log line of the exchange and when it came.
type ReadyPart struct {
	Msg  string
	At   time.Duration
	Took string // the line's "took" field, if any
}

func (r RestartResult) String() string {
	s := fmt.Sprintf("build %v  snapshot %.1f MB  start %v (recovery %v, replicas %v)  close %v  seq %d",
		r.Build.Round(time.Millisecond), float64(r.SnapshotBytes)/(1<<20), r.Start.Round(time.Millisecond),
		r.Recovery.Round(time.Millisecond), (r.Start - r.Recovery).Round(time.Millisecond), r.Close.Round(time.Millisecond), r.Seq)
	if r.Ready > 0 {
		s += fmt.Sprintf("\nexchange: process start to /health/ready 200: %v (CPU time by then %v)", r.Ready.Round(time.Millisecond),
			r.ReadyCPU.Round(10*time.Millisecond))
		for _, p := range r.Parts {
			s += fmt.Sprintf("\n  %8v  %s", p.At.Round(time.Millisecond), p.Msg)
			if p.Took != "" {
				s += " (took " + p.Took + ")"
			}
		}
	}
	return s
}

// LargeState is the state `bench restart` builds (issue 39): Accounts
// spec 003 users (ids from LargeFirstUser, each an account with USD), Orders
// resting bids (one per account at most) spread over Markets spot markets
// (ids 1..Markets), Pending PENDING transfers (a day's hold) and Binary
// active binary markets (ids Markets+1..), on assets 1 (USD) and 2.
type LargeState struct {
	Accounts int // <= core.MaxP2PUsers
	Orders   int // <= Accounts
	Markets  int // 1..200
	Pending  int // <= Accounts
	Binary   int // Markets+Binary <= core.MaxMarkets
	// EndTime: the commands' times end 10 s before it (command seq s has
	// time EndTime-10s+s), so the PENDING transfers are not due at
	// EndTime. RunRestart uses the wall clock (the exchange starts on the
	// dir), the pipeline its fixed command time.
	EndTime int64
	// Hash: also compute the built state's hash (LargeStateBuilt.StateHash).
	Hash bool
}

// LargeFirstUser is the first account id of a LargeState (ids below it are
// reserved: the fee account).
const LargeFirstUser core.UserID = 1_000

// LargeStateBuilt is what BuildLargeState wrote, and the first ids the
// state leaves free, for a workload on top of it.
type LargeStateBuilt struct {
	Seq           core.Seq // the WAL's last seq, and the snapshot's
	SnapshotBytes int
	Took          time.Duration
	StateHash     string // with LargeState.Hash
	NextOrderID   core.OrderID
	NextUser      core.UserID
	NextMarket    core.MarketID
	NextAsset     core.AssetID
}

func (s LargeState) valid() bool {
	return s.Accounts >= 2 && s.Orders <= s.Accounts && s.Markets >= 1 && s.Markets <= 200 &&
		s.Binary >= 0 && s.Markets+s.Binary <= core.MaxMarkets && s.Pending <= s.Accounts && s.Orders >= 0 && s.Pending >= 0
}

// BuildLargeState writes s into the data dir dir (which must hold no WAL):
// its commands, applied straight through a core, as a WAL (no fsync) and a
// snapshot at its last seq.
func BuildLargeState(dir string, s LargeState) (LargeStateBuilt, error) {
	if dir == "" || !s.valid() {
		return LargeStateBuilt{}, errors.New("bench: large state: bad config")
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	t0 := time.Now()
	wal, err := journal.Open(filepath.Join(dir, journal.WALDir), journal.Options{NoSync: true, Logger: quiet})
	if err != nil {
		return LargeStateBuilt{}, err
	}
	if last := wal.LastSeq(); last != 0 {
		_ = wal.Close()
		return LargeStateBuilt{}, fmt.Errorf("bench: large state: %s already holds a WAL up to seq %d", dir, last)
	}
	p := core.New(core.Config{})
	var (
		entries []journal.Entry
		arena   []byte
		seq     core.Seq
		bad     error
	)
	t0ns := s.EndTime - int64(10*time.Second)
	apply := func(c core.Command) {
		seq++
		c.Seq, c.Time = seq, t0ns+int64(seq)
		evs := p.Apply(&c)
		if r := evs[len(evs)-1]; r.Code != core.OK && bad == nil {
			bad = fmt.Errorf("bench: large state: seq %d %v: %v", seq, c.Kind, r.Code)
		}
		off := len(arena)
		arena = core.EncodeCommand(arena, &c)
		entries = append(entries, journal.Entry{Seq: uint64(seq), Payload: arena[off:len(arena):len(arena)]})
		if len(entries) == replayAppendBatch && bad == nil {
			bad = wal.AppendBatch(entries)
			entries, arena = entries[:0], arena[:0]
		}
	}
	const usd, base core.AssetID = 1, 2
	apply(core.Command{Kind: core.KindConfigAsset, Asset: usd, BaseScale: 2})
	apply(core.Command{Kind: core.KindConfigAsset, Asset: base, BaseScale: 0})
	for m := 1; m <= s.Markets; m++ {
		apply(core.Command{Kind: core.KindConfigMarket, Market: core.MarketID(m), Cfg: core.MarketCfg{Base: base, Quote: usd,
			Tick: 1, Lot: 1, MinQty: 1, MaxQty: 1_000_000, MakerFee: 1_000, TakerFee: 2_000}})
	}
	for b := 1; b <= s.Binary; b++ {
		m := core.MarketID(s.Markets + b)
		apply(core.Command{Kind: core.KindConfigBinary, Market: m, Cfg: core.MarketCfg{Quote: usd, Lot: 1, MinQty: 1,
			MaxQty: 1_000_000, MakerFee: 1_000, TakerFee: 2_000}})
		apply(core.Command{Kind: core.KindActivate, Market: m})
	}
	const firstUser = LargeFirstUser
	for u := 0; u < s.Accounts && bad == nil; u++ {
		apply(core.Command{Kind: core.KindP2PCreateUser, User: firstUser + core.UserID(u), Text: "user" + strconv.Itoa(u), Asset: usd, Amount: 1_000_000})
	}
	for i := 0; i < s.Orders && bad == nil; i++ {
		apply(core.Command{Kind: core.KindPlaceOrder, User: firstUser + core.UserID(i), Market: core.MarketID(1 + i%s.Markets),
			Side: core.Buy, Type: core.Limit, TIF: core.GTC, Price: core.Price(100 + i%5_000), Qty: 1})
	}
	for i := 0; i < s.Pending && bad == nil; i++ {
		apply(core.Command{Kind: core.KindP2PTransfer, User: firstUser + core.UserID(i), OrderID: core.OrderID(int(firstUser) + (i+1)%s.Accounts),
			Asset: usd, Amount: 1, Qty: core.MaxP2PHold})
	}
	if bad == nil && len(entries) > 0 {
		bad = wal.AppendBatch(entries)
	}
	if err := errors.Join(bad, wal.Close()); err != nil {
		return LargeStateBuilt{}, err
	}
	snaps, err := journal.OpenSnapshotStore(filepath.Join(dir, journal.SnapshotDir), quiet)
	if err != nil {
		return LargeStateBuilt{}, err
	}
	snap := p.AppendSnapshot(nil)
	if err := snaps.Write(uint64(seq), snap); err != nil {
		return LargeStateBuilt{}, err
	}
	res := LargeStateBuilt{Took: time.Since(t0), SnapshotBytes: len(snap), Seq: seq,
		// Every order rests (bids only, no asks): each took an id.
		NextOrderID: core.OrderID(1 + s.Orders), NextUser: firstUser + core.UserID(s.Accounts),
		NextMarket: core.MarketID(s.Markets + s.Binary + 1), NextAsset: base + 1}
	if s.Hash {
		res.StateHash = core.StateHashOf(snap)
	}
	return res, nil
}

// RunRestart builds cfg.Dir and measures a start on it.
func RunRestart(cfg RestartConfig) (RestartResult, error) {
	ls := LargeState{Accounts: cfg.Accounts, Orders: cfg.Orders, Markets: cfg.Markets, Pending: cfg.Pending, Binary: cfg.Binary,
		// Command times end now (not at DefaultTime): the PENDING
		// transfers (a day's hold) are then not due when the exchange
		// starts on the data dir, which would execute all of them right
		// after ready.
		EndTime: time.Now().UnixNano()}
	if cfg.Dir == "" || !ls.valid() {
		return RestartResult{}, errors.New("bench: restart: bad config")
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := BuildLargeState(cfg.Dir, ls)
	if err != nil {
		return RestartResult{}, err
	}
	seq := b.Seq
	res := RestartResult{Build: b.Took, SnapshotBytes: b.SnapshotBytes, Seq: seq}
	t1 := time.Now()
	log := cfg.Logger
	if log == nil {
		log = quiet
	}
	pl, err := journal.Start(journal.Config{Dir: cfg.Dir, ReadView: true, Logger: log})
	if err != nil {
		return res, err
	}
	res.Start, res.Recovery = time.Since(t1), pl.Recovery().Duration
	t2 := time.Now()
	if pl.AckedSeq() != seq {
		_ = pl.Close()
		return res, fmt.Errorf("bench: restart: recovered seq %d, want %d", pl.AckedSeq(), seq)
	}
	err = pl.Close()
	res.Close = time.Since(t2)
	if err != nil || cfg.Exchange == "" {
		return res, err
	}
	res.Ready, res.ReadyCPU, res.Parts, err = startExchange(cfg, cfg.Markets)
	return res, err
}
