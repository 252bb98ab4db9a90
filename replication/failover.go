package replication

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/logging"
)

// Automatic failover (issue 38). With --failover auto every node of a
// venue starts as a standby; a lease (lease.go: a JetStream KV bucket with
// a bucket-level TTL and compare-and-set) decides which one tries to
// become the primary. The lease never decides safety: the winner claims
// the log with an epoch marker expecting the stream's last sequence, and
// an old primary's next append is refused (ErrFenced) whatever it
// believes about the lease.
//
// The life of a node, driven by the exchange's serve loop:
//
//	start   -> Prepare (rejoin or bootstrap the data dir) -> standby
//	standby -> lease acquired -> promote (ErrPromoted) -> primary
//	primary -> lease lost, or fenced by another node's append
//	        -> ErrRejoin -> Prepare -> standby
//
// Prepare runs before the journal opens the data dir: it discards the
// node's own unreplicated tail (its WAL past the log, never acknowledged in
// sync mode: DiscardUnreplicated), bootstraps an empty data dir from the
// newest snapshot in the object store bucket, and sets aside (renames,
// never deletes) a journal that shares no entry with the log. The primary
// publishes its snapshots to that bucket (PublishSnapshots).
//
// Only sync mode: in async mode a primary's WAL past the log holds
// acknowledged commands, which a rejoin would discard.

// Failover modes (NodeConfig.Failover).
const (
	FailoverManual = "manual" // POST /admin/v1/replication/promote only (the default)
	FailoverAuto   = "auto"   // the lease winner takes over
)

// ErrRejoin is serve's answer when the node stops being the primary (the
// lease lost, or fenced by another node's append) under automatic
// failover: the caller serves again as a standby, after Prepare.
var ErrRejoin = errors.New("replication: no longer the primary: rejoining as a standby")

// Failover is a node's automatic failover: its lease, its snapshot bucket
// and a handle on the log for the decisions taken before the journal
// opens. It lives as long as the process (the serve loop's restarts keep
// the lease held across a promotion). Nil when failover is manual.
type Failover struct {
	lg    *slog.Logger
	lease *Lease
	snaps *SnapshotBucket
	log   *Log // read-only use: LastEpoch, ForkPoint

	takeovers  atomic.Uint64 // standbys of this process promoted by the lease
	rejoins    atomic.Uint64 // Prepare calls that discarded a tail
	bootstraps atomic.Uint64 // data dirs bootstrapped from the bucket
	asides     atomic.Uint64 // journals set aside (no overlap with the log)
}

// LeaseTimings derives the lease's renewal interval and margin from its
// TTL: renew every TTL/8, stop claiming TTL/4 before the deadline, so a
// holder gives up after 6 consecutive renewals failed or stalled.
func LeaseTimings(ttl time.Duration) (renew, margin time.Duration) { return ttl / 8, ttl / 4 }

// OpenFailover opens cfg's failover: nil, nil unless cfg.Failover is auto.
func OpenFailover(ctx context.Context, cfg NodeConfig) (*Failover, error) {
	if cfg.Failover != FailoverAuto {
		return nil, nil
	}
	if err := cfg.Validate(); err != nil { // auto needs sync: in async mode a rejoin would discard acknowledged commands
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ttl := cfg.LeaseTTL
	if ttl == 0 {
		ttl = DefaultFailoverLeaseTTL
	}
	renew, margin := LeaseTimings(ttl)
	stream := cfg.Log.Stream
	if stream == "" {
		stream = DefaultStream
	}
	f := &Failover{lg: cfg.Logger}
	var err error
	if f.lease, err = OpenLease(ctx, LeaseConfig{URL: cfg.Log.URL, Key: stream, Node: cfg.Log.Node,
		Replicas: cfg.Log.Replicas, TTL: ttl, Renew: renew, Margin: margin, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if f.snaps, err = OpenSnapshotBucket(ctx, SnapshotBucketConfig{URL: cfg.Log.URL, Stream: stream,
		Replicas: cfg.Log.Replicas, Node: cfg.Log.Node, Logger: cfg.Logger}); err != nil {
		f.lease.Close()
		return nil, err
	}
	lc := cfg.Log
	lc.Logger = cfg.Logger
	if f.log, err = Open(ctx, lc); err != nil {
		f.snaps.Close()
		f.lease.Close()
		return nil, err
	}
	cfg.Logger.Info("replication: automatic failover", "node", cfg.Log.Node, "lease_ttl", ttl, "renew", renew, "margin", margin)
	return f, nil
}

// DefaultFailoverLeaseTTL is --lease-ttl's default.
const DefaultFailoverLeaseTTL = 1500 * time.Millisecond

// release gives the lease up if this node holds it.
func (f *Failover) release() {
	if !f.lease.Held() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := f.lease.Release(ctx); err != nil {
		f.lg.Warn("replication: lease release failed; it expires after its TTL", "err", err)
	}
}

// Close releases the lease if held (a graceful stop hands over at once
// instead of after a TTL) and closes the connections.
func (f *Failover) Close() {
	f.release()
	f.lease.Close()
	f.snaps.Close()
	f.log.Close()
}

// Lease is the node's lease.
func (f *Failover) Lease() *Lease { return f.lease }

// Prepare readies dataDir for a start as a standby, before the journal
// opens it: an empty data dir is bootstrapped from the bucket's newest
// snapshot (if it holds one; otherwise the node follows the log from seq
// 1); a journal past the log's end loses that tail (its snapshots above
// too); a journal with no entry in common with the log is set aside
// (renamed <dir>.aside-<unix time>, never deleted) and the node
// bootstrapped. venue is the data dir's own ("" if it has none yet); a
// log of another venue is refused (ErrForeignLog): an operator's matter.
//
// The log may be out of reach for a while (no quorum: the cluster lost two
// nodes, or elects a leader): Prepare then tries again every half second
// until ctx ends, logging a WARN every ten tries. A definitive refusal
// (another venue's log, a local file or journal error) returns at once.
func (f *Failover) Prepare(ctx context.Context, dataDir, venue string) error {
	for try := 0; ; try++ {
		err := f.prepare(ctx, dataDir, venue)
		if err == nil || definitive(err) || ctx.Err() != nil {
			return err
		}
		if try%10 == 0 {
			f.lg.Warn("replication: cannot reach the log to rejoin or bootstrap; retrying", "err", err, "tries", try+1)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// logAttempt bounds one try of Prepare's reads of the log (a request sent
// as the connection dropped gets no answer, and would otherwise wait out
// the caller's whole deadline).
const logAttempt = 10 * time.Second

// definitive tells an error Prepare must not retry: the log is another
// venue's, or the node's own files are at fault.
func definitive(err error) bool {
	var pe *fs.PathError
	return errors.Is(err, ErrForeignLog) || errors.Is(err, ErrOtherVenue) || errors.Is(err, ErrDataDirNotEmpty) ||
		errors.Is(err, journal.ErrCorrupt) || errors.Is(err, journal.ErrTornTail) || errors.Is(err, journal.ErrNoSnapshot) ||
		errors.As(err, &pe)
}

func (f *Failover) prepare(ctx context.Context, dataDir, venue string) error {
	if checkEmpty(dataDir, filepath.Join(dataDir, journal.WALDir)) == nil {
		return f.bootstrap(ctx, dataDir)
	}
	if venue == "" {
		return nil // a journal without a venue: the standby adopts the log's or refuses it
	}
	lctx, cancel := context.WithTimeout(ctx, logAttempt)
	defer cancel()
	claim, err := f.log.LastEpoch(lctx)
	if err != nil {
		return err
	}
	if claim == nil {
		return nil // nobody claimed the log yet: this node's journal is all there is (the first primary appends it)
	}
	fork, err := DiscardUnreplicated(lctx, f.log, dataDir, venue, journal.Options{Logger: f.lg})
	switch {
	case err == nil:
		if fork.WALLast > fork.At {
			f.rejoins.Add(1)
		}
		f.lg.Info("replication: rejoining as a standby", "agreed_up_to", fork.At, "wal_last", fork.WALLast,
			"log_last", fork.LogLast, "discarded_tail", fork.WALLast > fork.At)
		return nil
	case errors.Is(err, ErrNoOverlap), errors.Is(err, journal.ErrNoBase):
		f.lg.Warn("replication: this node's journal cannot follow the log; setting it aside and bootstrapping", "err", err)
		if err := f.setAside(dataDir); err != nil {
			return err
		}
		return f.bootstrap(ctx, dataDir)
	default:
		return err
	}
}

// bootstrap starts an empty dataDir from the bucket's newest snapshot.
func (f *Failover) bootstrap(ctx context.Context, dataDir string) error {
	_, err := Bootstrap(ctx, f.snaps, f.log, dataDir, f.lg)
	if errors.Is(err, ErrNoRemoteSnapshot) || errors.Is(err, ErrNoUsableSnapshot) {
		// The log from its start, then: Standby refuses it (a gap) if its
		// front was trimmed, and says so.
		f.lg.Info("replication: no usable snapshot in the bucket; following the log from its start", "why", err)
		return nil
	}
	if err != nil {
		return err
	}
	f.bootstraps.Add(1)
	return nil
}

// setAside renames the journal of dataDir (its WAL and snapshots) into
// <dataDir>.aside-<unix nanos>/. The venue id stays: DiscardUnreplicated
// found the log to be this venue's.
func (f *Failover) setAside(dataDir string) error {
	aside := fmt.Sprintf("%s.aside-%d", filepath.Clean(dataDir), time.Now().UnixNano())
	if err := os.MkdirAll(aside, 0o750); err != nil {
		return fmt.Errorf("replication: set aside: %w", err)
	}
	for _, name := range []string{journal.WALDir, journal.SnapshotDir} {
		err := os.Rename(filepath.Join(dataDir, name), filepath.Join(aside, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("replication: set aside: %w", err)
		}
	}
	f.asides.Add(1)
	f.lg.Warn("replication: journal set aside", "to", aside)
	return nil
}

// PublishSnapshots runs on the primary n until ctx ends: it puts the
// journal's newest snapshot the log holds every command of in the bucket
// (SnapshotBucket.Publish), when there is a new one.
func (f *Failover) PublishSnapshots(ctx context.Context, dataDir string, n *Node) {
	f.snaps.Publish(ctx, filepath.Join(dataDir, journal.SnapshotDir), 2*time.Second, n.log)
}

// NextRole is the role the process serves in next after serve returned
// err ("" to stop): the primary after a promotion, a standby after
// ErrRejoin. Under automatic failover a primary's serve that failed
// otherwise (its start met the log or the lease gone to another node, or
// anything else) serves again as a standby rather than stopping the
// process: it releases the lease if it holds it and waits a TTL before it
// competes again, so that another node takes over first and a failure
// that repeats cannot spin.
func NextRole(err error, cfg NodeConfig) Role {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrPromoted):
		return RolePrimary
	case errors.Is(err, ErrRejoin):
		if cfg.Auto != nil {
			cfg.Auto.release() // a fenced primary that still holds the lease lets another node have it
		}
		return RoleStandby
	case cfg.Auto != nil && cfg.Role == RolePrimary:
		f := cfg.Auto
		logging.Critical(context.Background(), f.lg, "replication: the primary stopped; releasing the lease and serving again as a standby", "err", err)
		f.release()
		time.Sleep(f.lease.cfg.TTL)
		return RoleStandby
	}
	return ""
}
