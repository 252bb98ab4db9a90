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
	"github.com/ubscore/ubscore/instruments"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/logging"
	exmetrics "github.com/ubscore/ubscore/metrics"
	"github.com/ubscore/ubscore/persist"
	"github.com/ubscore/ubscore/persist/archive"
	"github.com/ubscore/ubscore/persist/chainside"
	"github.com/ubscore/ubscore/persist/spotops"
	transferservice "github.com/ubscore/ubscore/persist/transfer/service"
	"github.com/ubscore/ubscore/protection"
	"github.com/ubscore/ubscore/publish"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/stream"
	"github.com/ubscore/ubscore/warmup"
)

// Shutdown budgets.
const (
	httpDrainTimeout = 10 * time.Second // in-flight requests finish within this
	sinkDrainTimeout = 5 * time.Second  // the sink may catch up to the final durable seq within this
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
	reg, err := gateway.NewRegistry(cfg.Instruments.Assets, cfg.Instruments.Markets)
	if err != nil {
		return err
	}
	auth, err := gateway.NewAuthenticator(cfg.JWTSecret)
	if err != nil {
		return err
	}
	m := exmetrics.New()
	p2pm := gateway.NewP2PMetrics(m.Reg, m.Read, exmetrics.LatencyBuckets)
	p2pView := p2pm.OnView(log, cfg.P2P.Scale(cfg.Instruments.Assets))
	hist := &gateway.History{Window: cfg.HistoryWindow}
	ret := journal.NewRetention(core.Seq(cfg.FollowerMaxRetained), log)
	prot := protection.New(m.Reg, m.Violations, reg, ret, log)

	var (
		pool *pgxpool.Pool
		sink *persist.Sink
	)
	// A standby issues no command and writes nothing downstream: no sink,
	// publisher, transfers, chain side or timers (its primary runs them).
	replicated := cfg.Replication.Mode != replication.ModeOff
	standby := replicated && cfg.Replication.Role == replication.RoleStandby
	if standby {
		cfg.PGURL, cfg.Publish.NATSURL, cfg.Chain.RPC, cfg.P2P.Standby = "", "", "", true
	}
	if standby && cfg.Replication.Auto != nil {
		// A standby of automatic failover may become the primary, whose
		// sink and publisher continue from their checkpoints (Postgres,
		// the event stream), which trail the log: it keeps the WAL they
		// may need as the primary's own followers pin it (up to
		// --follower-max-retained behind the durable seq). Without the pin
		// it truncated to its newest snapshot and a new primary's sink
		// skipped the commands between its checkpoint and there (sink_gaps).
		ret.Hold("failover", m.DurableSeq)
	}
	jc := journal.Config{Dir: cfg.DataDir, Logger: log, ReadView: true,
		Core: core.Config{AllowFaults: cfg.FaultInjection},
		OnView: func(c *core.Command, evs []core.Event) {
			hist.Apply(c, evs)
			prot.Breakers.Apply(c, evs)
			m.OnView(c, evs)
			p2pView(c, evs)
		},
		OnJournalBatch: m.JournalBatch,
		TruncateLimit:  ret.TruncateLimit(m.DurableSeq),
		Standby:        replicated, // every replicated node starts by reading the log
		SnapshotEvery:  cfg.SnapshotEvery,

		RealtimeProcessor: cfg.RealtimeProcessor,
	}
	if fo := cfg.Replication.Auto; fo != nil && standby {
		// Automatic failover: rejoin (discard this node's unreplicated
		// tail) or bootstrap the data dir before the journal opens it.
		venue, _, err := persist.VenueIdentity(cfg.DataDir, false)
		if err == nil {
			err = fo.Prepare(ctx, cfg.DataDir, venue)
		}
		if err != nil {
			return err
		}
		cfg.Replication.CreateVenue = func() (string, error) { return persist.LoadOrCreateWALID(cfg.DataDir) }
	}
	if cfg.PGURL != "" {
		if pool, err = persist.OpenPool(ctx, cfg.PGURL, os.Getenv, log); err != nil {
			return err
		}
		defer pool.Close()
		sink = persist.NewSink(pool, persist.Options{Logger: log})
		m.SetPersisted(sink.PersistedSeqCached)
		ret.Register("sink", sink.PersistedSeqCached)
	} else if !standby {
		log.Warn("postgres: none; orders and balances run from the WAL alone, no SQL read model is written")
	}

	pub := publish.NewFollower(cfg.Publish, ret, m.Reg, m.DurableSeq, log)
	// The order history's replay of the WAL runs inside journal.Start, in
	// parallel with the restores of the replicas (issue 39: restart at scale).
	var warmErr error
	jc.WarmUp = func(pl *journal.Pipeline) error {
		if warmErr = warmup.History(ctx, pl, hist, prot.Breakers, standby, warmup.WholeMax, log); ctx.Err() != nil {
			return nil // SIGTERM during the warm-up: a graceful stop below
		}
		return warmErr
	}
	pl, err := journal.Start(jc)
	if err != nil {
		return err
	}
	m.SetPipeline(pl)
	prot.SetPipeline(pl)
	log.Info("exchange: core recovered", "durable_seq", pl.DurableSeq(), "data_dir", cfg.DataDir)
	if err := instruments.Check(pl, cfg.Instruments); err != nil {
		_ = pl.Close()
		return err
	}
	if err := warmedUp(ctx, warmErr); err != nil {
		cerr := pl.Close()
		if ctx.Err() != nil { // SIGTERM during start-up: a graceful stop
			log.Info("exchange: shutting down during start-up", "cause", context.Cause(ctx).Error())
			log.Info("exchange: stopped", "seq", pl.Processor().LastSeq(), "state_hash", pl.Processor().StateHash())
			return cerr
		}
		return err
	}
	// After the warm-up: a standby's commands reach the history through OnView.
	if replicated { // one venue, one WAL id on every node
		if cfg.Replication.Log.Venue, cfg.Replication.AdoptVenue, err = persist.VenueIdentity(cfg.DataDir, !standby); err != nil {
			_ = pl.Close()
			return err
		}
	}
	node, err := replication.StartFor(ctx, cfg.Replication, pl, m.Reg, log)
	if err != nil {
		_ = pl.Close()
		return err
	}
	n := 0
	if !standby { // a standby's configuration comes with the primary's log
		n, err = instruments.Install(pl, cfg.Instruments)
	}
	if err != nil {
		_ = pl.Close()
		return err
	} else if err := instruments.WriteNames(cfg.DataDir, reg); err != nil {
		_ = pl.Close()
		return fmt.Errorf("exchange: %w", err)
	} else if n > 0 {
		log.Info("exchange: default config installed", "assets", len(cfg.Instruments.Assets), "markets", n, "config_file", cfg.ConfigFile)
	}

	sinkCtx, stopSink := context.WithCancel(context.Background())
	var sinkWG sync.WaitGroup
	var migrated atomic.Bool
	if sink != nil {
		walID, err := persist.LoadOrCreateWALID(cfg.DataDir)
		if err != nil {
			stopSink()
			_ = pl.Close()
			return err
		}
		sinkWG.Add(1)
		go func() {
			defer sinkWG.Done()
			sink.Follow(sinkCtx, pl, walID, &migrated)
		}()
	}

	publish.Start(sinkCtx, pub, pl, &sinkWG)
	if fo := cfg.Replication.Auto; fo != nil && !standby { // snapshots for nodes that bootstrap
		sinkWG.Go(func() { fo.PublishSnapshots(sinkCtx, cfg.DataDir, node) })
	}

	// Ready (issue 20): recovery done, HTTP serving, and every enabled
	// feature initialised once: with Postgres, its migrations applied (the
	// sink, the transfer service, FUNDING balances and the order archive
	// all need them). A later Postgres outage degrades /health and never
	// drops readiness. With the chain side on, its manager has started
	// (issue 41: before, the first POST /admin/v1/tx after ready could
	// answer 503 "manager stopped"); holding the lease is not needed
	// (another node may).
	var serving atomic.Bool
	var chain *chainside.Side // set before serving
	ready := func() bool {
		return serving.Load() && (pool == nil || migrated.Load()) && (chain == nil || chain.Started())
	}
	scfg := gateway.ServerConfig{Backend: newPipelineBackend(pl, hist), Auth: auth, Registry: reg, Logger: log,
		Observer: m, Metrics: m.Handler(), Ready: ready, Breakers: prot.Breakers, CoreFaults: cfg.FaultInjection}
	ws := stream.New(cfg.Stream.Config(reg, auth, pl, log)) // GET /ws: a follower of the WAL
	if err := ws.Register(m.Reg); err != nil {
		stopSink()
		sinkWG.Wait()
		_ = pl.Close()
		return err
	}
	sinkWG.Go(func() { ws.Run(sinkCtx) })
	var xfers *transferservice.Service
	if node != nil {
		scfg.Replica = node
	}
	if pool != nil {
		pgh := persist.NewHealth(pool, log)
		sinkWG.Go(func() { pgh.Run(sinkCtx) })
		scfg.Degraded = pgh.Degraded
		scfg.Archive = &archive.Archive{Pool: pool, Timeout: archive.Timeout, Ready: &migrated, Persisted: sink.PersistedSeqCached}
		forget := spotops.NewForgetter(pool, pl, log)
		if xfers, err = transferservice.New(transferservice.Config{Pool: pool, Pipeline: pl, Migrated: &migrated,
			Assets: cfg.Instruments.Transfer(), PerSecond: cfg.TransferPerSecond, PerDay: cfg.TransferPerDay,
			StaleAfter: cfg.TransferStaleAfter, InvariantInterval: cfg.InvariantInterval, FaultInjection: cfg.FaultInjection,
			Jobs:     []func(context.Context){func(ctx context.Context) { forget.Run(ctx, spotops.Every) }},
			OnCommit: ws.FundingCommitted, Logger: log}); err != nil {
			stopSink()
			sinkWG.Wait()
			_ = pl.Close()
			return err
		}
		xfers.Register(m.Reg)
		xfers.Start()
		scfg.Transfers, scfg.Faults = xfers, xfers.Faults()
		ws.SetFunding(xfers)
	} else if cfg.FaultInjection {
		log.Warn("--enable-fault-injection ignored: internal transfers need Postgres")
	}
	stopP2P := func() {}
	abort := func(err error) error { // stops what runs so far
		stopP2P()
		if xfers != nil {
			xfers.Close()
		}
		stopSink()
		sinkWG.Wait()
		_ = pl.Close()
		return err
	}
	chain, err = chainside.Start(cfg.Chain, cfg.Instruments.Assets, pool, m.Reg, &migrated, log)
	if err != nil {
		return abort(err)
	}
	if chain != nil {
		defer chain.Close()
		scfg.Chain = chain.Gateway()
	}
	p2p, stop, err := gateway.StartP2P(cfg.P2P, scfg.Backend, reg, p2pm, log)
	if errors.Is(err, gateway.ErrP2PAsset) {
		err = usageError{err}
	}
	if err != nil {
		return abort(err)
	}
	stopP2P = stop
	scfg.P2P = p2p
	if p2p != nil && pool != nil { // the retention: only with the sink's p2p_transfers to answer for what the core forgets
		p2p.Archive = &persist.P2PArchive{Pool: pool, Timeout: archive.Timeout, Ready: migrated.Load, Persisted: sink.PersistedSeqCached}
		stopP2P = gateway.StartP2PRetention(scfg.Backend, cfg.P2PRetention, p2p.Archive.PersistedSeq, stop, p2pm, log)
	}
	srv := gateway.NewServer(scfg)
	hs := srv.HTTPServer()
	hs.Handler = ws.Wrap(hs.Handler)
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return abort(err)
	}
	stopProt := func() {}
	if !standby {
		stopProt = prot.Start(pl, pool, &migrated, cfg.Protection)
	}
	httpErr := make(chan error, 1)
	go func() { httpErr <- hs.Serve(gateway.NewDeadlineListener(ln, 0)) }()
	serving.Store(true)
	log.Info("exchange: serving", "http", ln.Addr().String(), "durable_seq", pl.DurableSeq(), "ready", ready())

	runErr := waitServing(ctx, pl, node, httpErr, log)
	serving.Store(false)
	ws.Close(httpDrainTimeout) // every socket gets 1001 (fasthttp's shutdown leaves hijacked ones open)
	sctx, cancel := context.WithTimeout(context.Background(), httpDrainTimeout)
	if err := hs.ShutdownWithContext(sctx); err != nil {
		log.Warn("exchange: http shutdown", "err", err)
	}
	cancel()
	// fasthttp's shutdown closes only the listeners Serve has registered: a
	// promotion right after the start can come before that, and the port
	// would stay bound for the next serve (bind: address already in use).
	_ = ln.Close()
	// The recovery worker, the conservation monitor and the core check use
	// the core: stop them before it (a transfer step in progress finishes;
	// the rest is resumed from Postgres by the next start's worker).
	stopProt()
	stopP2P()
	if xfers != nil {
		xfers.Close()
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
	if node != nil {
		node.Close() // a standby stops applying the log before the core closes
	}
	if err := pl.Close(); err != nil && runErr == nil && !errors.Is(err, replication.ErrFenced) && !errors.Is(err, replication.ErrLeaseLost) {
		runErr = err
	}
	stopSink()
	// The followers (publisher, streams, snapshot publishing) end with the
	// core: wait for them, so that a serve that starts again (a promotion,
	// a rejoin) never runs beside this one's.
	waited := make(chan struct{})
	go func() { sinkWG.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(httpDrainTimeout):
		log.Warn("exchange: followers still running after the core closed", "waited", httpDrainTimeout)
	}
	log.Info("exchange: stopped", "seq", pl.Processor().LastSeq(), "state_hash", pl.Processor().StateHash())
	return runErr
}

// waitServing waits for the end of serving: a signal (nil), the core's
// death, the HTTP server's failure, or a standby's promotion
// (replication.ErrPromoted: the caller serves again as the primary). A
// fenced primary keeps answering 503 NOT_PRIMARY until it is stopped;
// under automatic failover it serves again as a standby
// (replication.ErrRejoin), as when its lease is lost or a take-over fails.
func waitServing(ctx context.Context, pl *journal.Pipeline, node *replication.Node, httpErr <-chan error, log *slog.Logger) error {
	var promoted, rejoin, lost <-chan struct{}
	if node != nil {
		promoted, rejoin, lost = node.Promoted(), node.Rejoin(), node.Lost()
	}
	dead := pl.Dead()
	for {
		select {
		case <-ctx.Done():
			log.Info("exchange: shutting down", "cause", context.Cause(ctx).Error())
			return nil
		case <-promoted:
			log.Info("exchange: promoted to primary: restarting as the primary")
			return replication.ErrPromoted
		case <-lost:
			log.Log(ctx, logging.LevelCritical, "exchange: the primary's lease is lost: acknowledging nothing more; rejoining as a standby")
			return replication.ErrRejoin
		case <-rejoin:
			log.Warn("exchange: serving again as a standby")
			return replication.ErrRejoin
		case <-dead:
			err := pl.Err()
			if rejoin != nil && (errors.Is(err, replication.ErrFenced) || errors.Is(err, replication.ErrLeaseLost)) {
				log.Log(ctx, logging.LevelCritical, "exchange: FENCED: another node is the primary; rejoining as a standby", "err", err)
				return replication.ErrRejoin
			}
			if !errors.Is(err, replication.ErrFenced) {
				log.Error("exchange: core stopped", "err", err)
				return err
			}
			log.Log(ctx, logging.LevelCritical, "exchange: FENCED: another node is the primary; answering 503 NOT_PRIMARY until stopped")
			dead = nil // wait for the rest
		case err := <-httpErr:
			log.Error("exchange: http server failed", "err", err)
			return fmt.Errorf("http: %w", err)
		}
	}
}

// warmedUp ends the warm-up once journal.Start has returned: warmErr is
// warmup.History's outcome (a SIGTERM during it is ctx's error).
func warmedUp(ctx context.Context, warmErr error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return warmErr
}
