package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/logging"
	"github.com/ubscore/ubscore/persist"
)

// Shutdown budgets.
const (
	httpDrainTimeout = 10 * time.Second // in-flight requests finish within this
	sinkDrainTimeout = 5 * time.Second  // the sink may catch up to the final durable seq within this
	archiveTimeout   = 2 * time.Second  // one Postgres lookup of an old order
)

// serve runs the exchange until ctx is cancelled (SIGINT or SIGTERM;
// context.Cause names the signal) or the core dies:
//
//  1. recover the core from cfg.DataDir (snapshot + WAL + full invariant
//     check) with its read view, and rebuild the HTTP History from the WAL
//     still on disk;
//  2. install cfg's instruments on a fresh data dir;
//  3. start the Postgres sink (if cfg.PGURL is set): it follows the WAL from
//     the persisted seq, independent of the core, retrying while Postgres is
//     away; the WAL is never truncated past what it has persisted;
//  4. serve HTTP; /health/ready turns 200 once that is done and, with
//     Postgres, its migrations have run (every feature initialised once).
//
// On the way out: stop accepting and finish in-flight requests, drain the
// ring, fsync, snapshot (Pipeline.Close), let the sink catch up briefly,
// close Postgres.
func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	reg, err := gateway.NewRegistry(cfg.Assets, cfg.Markets)
	if err != nil {
		return err
	}
	auth, err := gateway.NewAuthenticator(cfg.JWTSecret)
	if err != nil {
		return err
	}
	m := newMetrics()
	p2pm := newP2PMetrics(m, m.pl.Load)
	p2pView := p2pm.onView(log, p2pScale(cfg))
	hist := &gateway.History{Window: cfg.HistoryWindow}
	ret := journal.NewRetention(core.Seq(cfg.FollowerMaxRetained), log)
	prot := newProtection(m, reg, ret, log)

	var (
		pool *pgxpool.Pool
		sink *persist.Sink
	)
	jc := journal.Config{Dir: cfg.DataDir, Logger: log, ReadView: true,
		Core: core.Config{AllowFaults: cfg.FaultInjection},
		OnView: func(c *core.Command, evs []core.Event) {
			hist.Apply(c, evs)
			prot.breakers.Apply(c, evs)
			m.onView(c, evs)
			p2pView(c, evs)
		},
		OnJournalBatch: m.journalBatch,
		TruncateLimit: ret.TruncateLimit(func() core.Seq {
			if pl := m.pl.Load(); pl != nil {
				return pl.DurableSeq()
			}
			return 0
		}),
	}
	if cfg.PGURL != "" {
		pcfg, err := pgxpool.ParseConfig(cfg.PGURL)
		if err != nil {
			return fmt.Errorf("postgres: %s: %w", redactURL(cfg.PGURL), err)
		}
		// synchronous_commit stays on: the WAL retention pin is the sink's
		// persisted seq, which must be durable in Postgres (with it off, a
		// Postgres crash could lose commits whose WAL was already released;
		// measured: it did not raise the sink's throughput here anyway).
		if plainOnLoopback(cfg.PGURL, &pcfg.ConnConfig.Config, os.Getenv) {
			log.Info("postgres: server on this machine, TLS off (set sslmode to choose)")
		}
		persist.ConfigurePool(pcfg)
		pool, err = pgxpool.NewWithConfig(ctx, pcfg) // connects lazily: Postgres may be down now
		if err != nil {
			return fmt.Errorf("postgres: %s: %w", redactURL(cfg.PGURL), err)
		}
		defer pool.Close()
		sink = persist.NewSink(pool, persist.Options{Logger: log})
		persisted := sink.PersistedSeqCached
		m.persisted.Store(&persisted)
		ret.Register("sink", persisted)
	} else {
		log.Warn("postgres: none; orders and balances run from the WAL alone, no SQL read model is written")
	}

	pub := newPublisher(cfg.Publish, ret, m, log)
	pl, err := journal.Start(jc)
	if err != nil {
		return err
	}
	m.pl.Store(pl)
	prot.pl.Store(pl)
	log.Info("exchange: core recovered", "durable_seq", pl.DurableSeq(), "data_dir", cfg.DataDir)
	if err := checkInstruments(pl, cfg); err != nil {
		_ = pl.Close()
		return err
	}
	if err := warmHistory(ctx, pl, hist, prot.breakers, log); err != nil {
		cerr := pl.Close()
		if ctx.Err() != nil { // SIGTERM during start-up: a graceful stop
			log.Info("exchange: shutting down during start-up", "cause", context.Cause(ctx).Error())
			log.Info("exchange: stopped", "seq", pl.Processor().LastSeq(), "state_hash", pl.Processor().StateHash())
			return cerr
		}
		return err
	}
	if n, err := installConfig(pl, cfg); err != nil {
		_ = pl.Close()
		return err
	} else if err := writeNames(cfg.DataDir, reg); err != nil {
		_ = pl.Close()
		return fmt.Errorf("exchange: %w", err)
	} else if n > 0 {
		log.Info("exchange: default config installed", "assets", len(cfg.Assets), "markets", n, "config_file", cfg.ConfigFile)
	}

	sinkCtx, stopSink := context.WithCancel(context.Background())
	var sinkWG sync.WaitGroup
	var migrated atomic.Bool
	if sink != nil {
		walID, err := loadOrCreateWALID(cfg.DataDir)
		if err != nil {
			stopSink()
			_ = pl.Close()
			return err
		}
		sinkWG.Add(1)
		go func() {
			defer sinkWG.Done()
			runSink(sinkCtx, pl, pool, sink, walID, &migrated, log)
		}()
	}

	runPublisher(sinkCtx, pub, pl, &sinkWG)

	// Ready (issue 20): recovery done, HTTP serving, and every enabled
	// feature initialised once: with Postgres, its migrations applied (the
	// sink, the transfer service, FUNDING balances and the order archive
	// all need them). A later Postgres outage degrades /health and never
	// drops readiness. With the chain side on, its manager has started
	// (issue 41: before, the first POST /admin/v1/tx after ready could
	// answer 503 "manager stopped"); holding the lease is not needed
	// (another node may).
	var serving atomic.Bool
	var chain *chainSide // set before serving
	ready := func() bool {
		return serving.Load() && (pool == nil || migrated.Load()) && (chain == nil || chain.started.Load())
	}
	scfg := gateway.ServerConfig{Backend: newPipelineBackend(pl, hist), Auth: auth, Registry: reg, Logger: log,
		Observer: m, Metrics: m.handler(), Ready: ready, Breakers: prot.breakers, CoreFaults: cfg.FaultInjection}
	var xfers *transfers
	if pool != nil {
		pgh := newPGHealth(pool, log)
		sinkWG.Go(func() { pgh.run(sinkCtx) })
		scfg.Degraded = pgh.degraded
		scfg.Archive = &pgArchive{pool: pool, timeout: archiveTimeout, ready: &migrated, persisted: sink.PersistedSeqCached}
		if xfers, err = newTransfers(cfg, pl, pool, &migrated, log); err != nil {
			stopSink()
			sinkWG.Wait()
			_ = pl.Close()
			return err
		}
		xfers.register(m)
		xfers.start()
		scfg.Transfers = xfers
		if xfers.faults != nil {
			scfg.Faults = xfers.faults
		}
	} else if cfg.FaultInjection {
		log.Warn("--enable-fault-injection ignored: internal transfers need Postgres")
	}
	stopP2P := func() {}
	abort := func(err error) error { // stops what runs so far
		stopP2P()
		if xfers != nil {
			xfers.close()
		}
		stopSink()
		sinkWG.Wait()
		_ = pl.Close()
		return err
	}
	chain, err = startChain(cfg, pool, m, &migrated, log)
	if err != nil {
		return abort(err)
	}
	if chain != nil {
		defer chain.close()
		scfg.Chain = chain.gateway()
	}
	p2p, stop, err := startP2P(cfg.P2P, pl, scfg.Backend, reg, p2pm, log)
	if err != nil {
		return abort(err)
	}
	stopP2P = stop
	scfg.P2P = p2p
	if p2p != nil && pool != nil { // the retention: only with the sink's p2p_transfers to answer for what the core forgets
		p2p.Archive = &persist.P2PArchive{Pool: pool, Timeout: archiveTimeout, Ready: migrated.Load, Persisted: sink.PersistedSeqCached}
		stopP2P = gateway.StartP2PRetention(scfg.Backend, cfg.P2PRetention, p2p.Archive.PersistedSeq, stop, log)
	}
	srv := gateway.NewServer(scfg)
	hs := srv.HTTPServer()
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return abort(err)
	}
	stopProt := prot.start(pl, pool, &migrated, cfg)
	httpErr := make(chan error, 1)
	go func() { httpErr <- hs.Serve(gateway.NewDeadlineListener(ln, 0)) }()
	serving.Store(true)
	log.Info("exchange: serving", "http", ln.Addr().String(), "durable_seq", pl.DurableSeq(), "ready", ready())

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("exchange: shutting down", "cause", context.Cause(ctx).Error())
	case <-pl.Dead():
		runErr = pl.Err()
		log.Error("exchange: core stopped", "err", runErr)
	case err := <-httpErr:
		runErr = fmt.Errorf("http: %w", err)
		log.Error("exchange: http server failed", "err", err)
	}
	serving.Store(false)
	sctx, cancel := context.WithTimeout(context.Background(), httpDrainTimeout)
	if err := hs.ShutdownWithContext(sctx); err != nil {
		log.Warn("exchange: http shutdown", "err", err)
	}
	cancel()
	// The recovery worker, the conservation monitor and the core check use
	// the core: stop them before it (a transfer step in progress finishes;
	// the rest is resumed from Postgres by the next start's worker).
	stopProt()
	stopP2P()
	if xfers != nil {
		xfers.close()
	}
	// Every answered command is durable now; let the sink catch up while
	// the WAL is still open, then close the core.
	if sink != nil {
		deadline := time.Now().Add(sinkDrainTimeout)
		for sink.PersistedSeqCached() < pl.DurableSeq() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		stopSink()
		sinkWG.Wait()
		log.Info("exchange: sink stopped", "persisted_seq", sink.PersistedSeqCached(), "durable_seq", pl.DurableSeq())
	}
	if err := pl.Close(); err != nil && runErr == nil {
		runErr = err
	}
	stopSink()
	log.Info("exchange: stopped", "seq", pl.Processor().LastSeq(), "state_hash", pl.Processor().StateHash())
	return runErr
}

// warmHistory rebuilds the gateway's History (finished orders, fills, recent
// trades) from the WAL still on disk, so orders answered before a restart are
// still found after it; then it adds the orders resting in the core that the
// replayed part did not see placed. It runs before any request: nothing else
// touches hist yet.
func warmHistory(ctx context.Context, pl *journal.Pipeline, hist *gateway.History, brk *gateway.BreakerLog, log *slog.Logger) error {
	// Up to the recovered seq: everything after it (recovery's own breaker
	// trips) went through the read view's OnView already.
	target := pl.Recovery().Seq
	if target > 0 {
		f, err := pl.NewFollower(1)
		var gone *journal.HistoryGoneError
		if errors.As(err, &gone) {
			f, err = pl.NewFollower(gone.Earliest)
		}
		if err != nil {
			return fmt.Errorf("history warm-up: %w", err)
		}
		from := f.NextSeq()
		for f.NextSeq() <= target {
			if err := ctx.Err(); err != nil { // SIGTERM during a long warm-up
				return err
			}
			recs, err := f.Next(ctx, int(min(4096, target-f.NextSeq()+1)))
			if err != nil {
				return fmt.Errorf("history warm-up: %w", err)
			}
			for _, r := range recs {
				hist.Apply(r.Cmd, r.Events)
				brk.Replay(r.Cmd, r.Events)
			}
		}
		log.Info("exchange: history rebuilt from the WAL", "from_seq", from, "to_seq", target)
	}
	return pl.Read(func(p *core.Processor) error { hist.Seed(p); return nil })
}

// followerSource adapts a journal.Follower to persist.Source.
type followerSource struct {
	f    *journal.Follower
	recs []persist.Record
}

func (s *followerSource) Next(ctx context.Context, max int) ([]persist.Record, error) {
	frs, err := s.f.Next(ctx, max)
	if err != nil {
		return nil, err
	}
	s.recs = s.recs[:0]
	for _, r := range frs {
		s.recs = append(s.recs, persist.Record{Cmd: *r.Cmd, Events: r.Events})
	}
	return s.recs, nil
}

// runSink keeps the Postgres read model following the WAL until ctx ends:
// migrate, read the persisted seq, follow the WAL from the next one, and
// start over (with backoff) after anything that stops it. Postgres being
// away never blocks the core: the follower reads the WAL on its own.
func runSink(ctx context.Context, pl *journal.Pipeline, pool *pgxpool.Pool, sink *persist.Sink, walID string, migrated *atomic.Bool, log *slog.Logger) {
	backoff := 100 * time.Millisecond
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff):
			backoff = min(2*backoff, 5*time.Second)
			return true
		}
	}
	for ctx.Err() == nil {
		if err := persist.Migrate(ctx, pool); err != nil {
			log.Warn("sink: migrations not applied yet; retrying", "err", err)
			if !pause() {
				return
			}
			continue
		}
		if !migrated.Swap(true) {
			log.Info("sink: migrations applied; the Postgres features are initialised (ready)")
		}
		persisted, err := sink.PersistedSeq(ctx)
		if err != nil {
			log.Warn("sink: cannot read the persisted seq; retrying", "err", err)
			if !pause() {
				return
			}
			continue
		}
		if d := pl.DurableSeq(); persisted > d {
			// The sink only ever writes durable seqs of its own WAL, so a
			// checkpoint past this WAL's end means the database was written
			// from another data dir (or acknowledged WAL entries were lost).
			// Its rows are another history: following from persisted+1
			// would upsert this WAL's orders over them. Write nothing.
			logging.Critical(ctx, log, "sink: the database is ahead of this WAL (written from another data dir?); the sink writes nothing to it",
				"persisted_seq", persisted, "durable_seq", d)
			return
		}
		// The database records the data dir it follows: adopted by the
		// first sink (a new database, or one from before wal_id existed,
		// not past this WAL's end as checked above), refused by every other.
		var dbWAL *string
		if err := pool.QueryRow(ctx, `UPDATE core_checkpoint SET wal_id = COALESCE(wal_id, $1) WHERE id = 1 RETURNING wal_id`,
			walID).Scan(&dbWAL); err != nil {
			log.Warn("sink: cannot read the database's WAL id; retrying", "err", err)
			if !pause() {
				return
			}
			continue
		}
		if dbWAL == nil || *dbWAL != walID {
			other := "NULL"
			if dbWAL != nil {
				other = *dbWAL
			}
			logging.Critical(ctx, log, "sink: the database belongs to another data dir's WAL; the sink writes nothing to it",
				"database_wal_id", other, "wal_id", walID)
			return
		}
		// Rows past the checkpoint (which the sink would write again: the
		// ledger has no unique key) cannot exist: core_checkpoint refuses to
		// move back over them (migration 0008).
		f, err := pl.NewFollower(persisted + 1)
		var gone *journal.HistoryGoneError
		if errors.As(err, &gone) {
			// The database is behind what the WAL still holds (e.g. wiped
			// after the WAL front was truncated): rows before Earliest can
			// no longer be derived. Say so loudly and continue from there.
			logging.Critical(context.Background(), log, "sink: events before the earliest retained seq cannot be re-derived; the gap is recorded in sink_gaps",
				"persisted_seq", persisted, "earliest", gone.Earliest)
			if err := persist.RecordGap(ctx, pool, persisted+1, gone.Earliest-1,
				"the WAL was released past the sink's checkpoint (--follower-max-retained) or truncated"); err != nil {
				log.Warn("sink: cannot move the checkpoint; retrying", "err", err)
				if !pause() {
					return
				}
				continue
			}
			f, err = pl.NewFollower(gone.Earliest)
		}
		if err != nil {
			log.Error("sink: cannot follow the WAL; retrying", "from", persisted+1, "err", err)
			if !pause() {
				return
			}
			continue
		}
		log.Info("sink: following the WAL", "from_seq", f.NextSeq())
		backoff = 100 * time.Millisecond
		err = sink.Run(ctx, &followerSource{f: f})
		if ctx.Err() != nil || errors.Is(err, journal.ErrStopped) {
			return
		}
		log.Error("sink: stopped; restarting", "err", err)
		if !pause() {
			return
		}
	}
}

// installConfig installs the configured markets the core does not have
// yet (all of them on a fresh data dir; the rest after a crash in the middle
// of a first start), with their assets (configuring an asset again with the
// same scale is a no-op). It returns how many markets it installed. Markets
// the core already has are never reconfigured: checkInstruments has refused
// to start with a config that changes or removes any.
func installConfig(pl *journal.Pipeline, cfg Config) (int, error) {
	have := map[core.MarketID]bool{}
	if err := pl.Read(func(p *core.Processor) error {
		for _, m := range p.Markets() {
			have[m.ID] = true
		}
		return nil
	}); err != nil {
		return 0, err
	}
	var cmds []core.Command
	n := 0
	for _, c := range cfg.ConfigCommands() {
		if c.Kind == core.KindConfigMarket {
			if have[c.Market] {
				continue
			}
			n++
		}
		cmds = append(cmds, c)
	}
	if n == 0 {
		return 0, nil
	}
	r := journal.NewReply()
	for _, c := range cmds {
		if _, err := pl.Submit(&c, r); err != nil {
			return 0, err
		}
		if err := pl.Wait(r); err != nil {
			return 0, err
		}
		if res := r.Result(); res.Code != core.OK {
			return 0, fmt.Errorf("config: %v: %v", c.Kind, res.Code)
		}
	}
	return n, nil
}
