package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// Bootstrap from a snapshot (issue 38): the primary puts each snapshot its
// journal writes into a JetStream object store bucket named after the log's
// stream (<stream>_SNAP), one object per snapshot named after its seq,
// keeping the newest few; a new or wiped node fetches the newest, writes it
// into its data dir as the journal's own snapshot at that seq (so
// journal.Recover starts from it, its WAL beginning at seq+1), and then
// follows the log from seq+1 (Standby: Seek finds the record).
//
// Both ends are bound to the log. The publisher puts only a snapshot whose
// seq the log stores (at most what this node has stored in it: a snapshot
// over a WAL tail the log never held, which a node rejoining would
// discard, holds commands no one else has), recording the log's venue.
// Bootstrap takes only a snapshot of the venue named by the log's last
// claim from which the log can be continued: the log holds every command
// after its seq (its front may have been trimmed) and the seq is not past
// the log's end.
//
// The object store checks the object's SHA-256 digest as it is read; the
// journal's snapshot file gets its own checksums when written, and
// recovery decodes and checks the state as for any snapshot.

// Defaults of SnapshotBucketConfig.
const (
	DefaultSnapshotKeep = 3
	snapObjPrefix       = "snapshot-"
)

// Errors of the snapshot bucket and of Bootstrap.
var (
	// ErrNoRemoteSnapshot: the bucket holds no snapshot.
	ErrNoRemoteSnapshot = errors.New("replication: no snapshot in the bucket")
	// ErrDataDirNotEmpty: Bootstrap into a data dir that holds WAL entries
	// or snapshots (wipe it first; it would not start from the fetched
	// snapshot).
	ErrDataDirNotEmpty = errors.New("replication: the data dir already holds a journal")
	// ErrNoUsableSnapshot: Bootstrap found no snapshot of the log's venue
	// that the log can be continued from (nothing changed on disk). When
	// the bucket is empty the error is also ErrNoRemoteSnapshot.
	ErrNoUsableSnapshot = errors.New("replication: no snapshot in the bucket that the log can be continued from")
)

// SnapshotBucketConfig configures a SnapshotBucket.
type SnapshotBucketConfig struct {
	URL      string // NATS server URL(s)
	Stream   string // the log's stream; the bucket is <Stream>_SNAP (DefaultStream if empty)
	Replicas int    // 3 on a cluster (1 if 0)
	Keep     int    // snapshots kept in the bucket (DefaultSnapshotKeep if 0)
	Node     string // this node's name, recorded with each snapshot it puts
	// Venue is the venue (its WAL id) Put records with each snapshot;
	// PublishNewest records the log's venue and refuses to put when Venue
	// is set and differs from it.
	Venue  string
	Logger *slog.Logger
}

// RemoteSnapshot describes a snapshot in the bucket.
type RemoteSnapshot struct {
	Name  string
	Seq   uint64 // the last command the snapshot includes
	Size  uint64
	Venue string // the venue it belongs to ("" if not recorded)
	Node  string // the node that put it
}

// SnapshotBucket is the object store bucket of a log's snapshots.
type SnapshotBucket struct {
	cfg  SnapshotBucketConfig
	log  *slog.Logger
	nc   *nats.Conn
	obs  jetstream.ObjectStore
	last uint64 // the newest seq this handle put (PublishNewest)
}

// listAttempt bounds one attempt of SnapshotBucket.List.
const listAttempt = 5 * time.Second

// SnapshotBucketName is the bucket of the log stream's snapshots.
func SnapshotBucketName(stream string) string { return stream + "_SNAP" }

// OpenSnapshotBucket connects and creates the bucket if needed.
func OpenSnapshotBucket(ctx context.Context, cfg SnapshotBucketConfig) (*SnapshotBucket, error) {
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Keep == 0 {
		cfg.Keep = DefaultSnapshotKeep
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.URL == "" {
		return nil, errors.New("replication: snapshot bucket: no NATS URL")
	}
	nc, js, err := dial("ubscore-snapshots-"+cfg.Node, cfg.URL, false)
	if err != nil {
		return nil, fmt.Errorf("replication: snapshot bucket: %w", err)
	}
	ocfg := jetstream.ObjectStoreConfig{Bucket: SnapshotBucketName(cfg.Stream), Storage: jetstream.FileStorage,
		Replicas: cfg.Replicas, Description: "snapshots of the replicated log " + cfg.Stream}
	var obs jetstream.ObjectStore
	err = untilReady(ctx, cfg.Logger, "snapshot bucket "+ocfg.Bucket, nil, func() (err error) {
		obs, err = js.CreateOrUpdateObjectStore(ctx, ocfg)
		return err
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("replication: snapshot bucket %s: %w", ocfg.Bucket, err)
	}
	return &SnapshotBucket{cfg: cfg, log: cfg.Logger, nc: nc, obs: obs}, nil
}

// Close closes the connection.
func (b *SnapshotBucket) Close() { b.nc.Close() }

func snapObjName(seq uint64) string { return fmt.Sprintf("%s%020d", snapObjPrefix, seq) }

// Put stores data (a journal snapshot's state at seq) as the object for
// seq, recording the configured Venue, then deletes the oldest beyond
// Keep. It does not check seq against the log (PublishNewest does).
func (b *SnapshotBucket) Put(ctx context.Context, seq uint64, data []byte) error {
	return b.put(ctx, seq, b.cfg.Venue, data)
}

func (b *SnapshotBucket) put(ctx context.Context, seq uint64, venue string, data []byte) error {
	t0 := time.Now()
	meta := jetstream.ObjectMeta{Name: snapObjName(seq), Metadata: map[string]string{
		"seq": strconv.FormatUint(seq, 10), "venue": venue, "node": b.cfg.Node}}
	if _, err := b.obs.Put(ctx, meta, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("replication: put snapshot %d: %w", seq, err)
	}
	b.log.Info("replication: snapshot put in the bucket", "seq", seq, "venue", venue, "bytes", len(data),
		"took", time.Since(t0))
	return b.prune(ctx, seq)
}

// prune deletes every snapshot but the newest Keep, counting the one just
// put at seq even if the listing (which a lagging replica may answer) does
// not show it yet.
func (b *SnapshotBucket) prune(ctx context.Context, seq uint64) error {
	all, err := b.List(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(all, func(r RemoteSnapshot) bool { return r.Seq == seq }) {
		all = append(all, RemoteSnapshot{Name: snapObjName(seq), Seq: seq})
		sort.Slice(all, func(i, j int) bool { return all[i].Seq < all[j].Seq })
	}
	for i := 0; i+b.cfg.Keep < len(all); i++ {
		if err := b.obs.Delete(ctx, all[i].Name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("replication: delete snapshot %d from the bucket: %w", all[i].Seq, err)
		}
	}
	return nil
}

// List returns the bucket's snapshots, oldest first. Objects whose name
// does not match their recorded seq are left out (with a warning).
//
// Each attempt is bounded (listAttempt) and retried: jetstream's List waits
// for its watcher's "initial values done" marker, which never comes when
// the watcher's first request (the bucket's last meta message) fails, as
// on a bucket just created whose stream has no leader yet: the first node
// of a new venue then hung in Prepare's bootstrap for good.
func (b *SnapshotBucket) List(ctx context.Context) ([]RemoteSnapshot, error) {
	var infos []*jetstream.ObjectInfo
	noObjects := func(err error) bool { return errors.Is(err, jetstream.ErrNoObjectsFound) }
	err := untilReady(ctx, b.log, "snapshot bucket listing", noObjects, func() (err error) {
		actx, cancel := context.WithTimeout(ctx, listAttempt)
		defer cancel()
		infos, err = b.obs.List(actx)
		return err
	})
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replication: list snapshots: %w", err)
	}
	var out []RemoteSnapshot
	for _, in := range infos {
		r, ok := remote(in)
		if !ok {
			b.log.Warn("replication: ignoring an object that is not a snapshot of ours", "bucket", in.Bucket, "name", in.Name)
			continue
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

func remote(in *jetstream.ObjectInfo) (RemoteSnapshot, bool) {
	if !strings.HasPrefix(in.Name, snapObjPrefix) || in.Deleted {
		return RemoteSnapshot{}, false
	}
	seq, err := strconv.ParseUint(strings.TrimPrefix(in.Name, snapObjPrefix), 10, 64)
	if err != nil || in.Metadata["seq"] != strconv.FormatUint(seq, 10) || in.Name != snapObjName(seq) {
		return RemoteSnapshot{}, false
	}
	return RemoteSnapshot{Name: in.Name, Seq: seq, Size: in.Size, Venue: in.Metadata["venue"], Node: in.Metadata["node"]}, true
}

// Newest is the newest snapshot in the bucket (ErrNoRemoteSnapshot if none).
func (b *SnapshotBucket) Newest(ctx context.Context) (RemoteSnapshot, error) {
	all, err := b.List(ctx)
	if err != nil {
		return RemoteSnapshot{}, err
	}
	if len(all) == 0 {
		return RemoteSnapshot{}, ErrNoRemoteSnapshot
	}
	return all[len(all)-1], nil
}

// Fetch reads the snapshot r, logging its progress about every second,
// and checks its digest (the object store does, at the end of the read).
func (b *SnapshotBucket) Fetch(ctx context.Context, r RemoteSnapshot) ([]byte, error) {
	res, err := b.obs.Get(ctx, r.Name)
	if err != nil {
		return nil, fmt.Errorf("replication: get snapshot %d: %w", r.Seq, err)
	}
	defer res.Close()
	buf := bytes.NewBuffer(make([]byte, 0, r.Size))
	t0, lastLog := time.Now(), time.Now()
	chunk := make([]byte, 256<<10)
	for {
		n, rerr := res.Read(chunk)
		buf.Write(chunk[:n])
		if time.Since(lastLog) >= time.Second {
			lastLog = time.Now()
			b.log.Info("replication: fetching snapshot", "seq", r.Seq, "bytes", buf.Len(), "of", r.Size,
				"elapsed", time.Since(t0))
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, fmt.Errorf("replication: read snapshot %d: %w", r.Seq, rerr)
		}
	}
	if uint64(buf.Len()) != r.Size {
		return nil, fmt.Errorf("replication: snapshot %d: read %d bytes, the bucket says %d", r.Seq, buf.Len(), r.Size)
	}
	b.log.Info("replication: snapshot fetched", "seq", r.Seq, "bytes", buf.Len(), "took", time.Since(t0))
	return buf.Bytes(), nil
}

// SnapshotBound is what the publisher reads of the log beside it (a *Log
// is one): Appended, the last command this node has stored in the log
// (every snapshot at or below it holds only commands the log holds; 0 on
// a node that has not written the log, which then puts nothing), and
// Venue, the venue its claims carry, recorded with each snapshot.
type SnapshotBound interface {
	Appended() core.Seq
	Venue() string
}

// PublishNewest puts in the bucket the newest valid snapshot of the
// journal's snapshot directory snapDir (<data dir>/journal.SnapshotDir)
// whose seq is at most log.Appended(), if it is newer than the last one
// this handle put, recording log.Venue(); it returns its seq (0 and nil if
// there was nothing new). A newer local snapshot (one over commands the
// log does not store yet, or never will: a WAL tail a rejoin discards) is
// left for a later look. It refuses to put (ErrOtherVenue) when the
// bucket's configured Venue is not the log's. It only reads snapDir
// (journal.LatestSnapshotAtOrBelow), so it runs beside the pipeline that
// writes there.
func (b *SnapshotBucket) PublishNewest(ctx context.Context, snapDir string, log SnapshotBound) (uint64, error) {
	venue := log.Venue()
	if b.cfg.Venue != "" && b.cfg.Venue != venue {
		return 0, fmt.Errorf("%w: the snapshot bucket is configured for venue %q, the log's is %q", ErrOtherVenue,
			b.cfg.Venue, venue)
	}
	upTo := uint64(log.Appended())
	if upTo <= b.last {
		return 0, nil
	}
	seq, data, err := journal.LatestSnapshotAtOrBelow(snapDir, upTo)
	if errors.Is(err, journal.ErrNoSnapshot) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if seq <= b.last {
		return 0, nil
	}
	if err := b.put(ctx, seq, venue, data); err != nil {
		return 0, err
	}
	b.last = seq
	return seq, nil
}

// Publish runs on the primary beside its journal: every interval it puts
// the newest snapshot of snapDir that the log stores in the bucket if it
// is new (PublishNewest; a failed put is logged and retried at the next
// look), until ctx ends. (A poll rather than a hook in the state follower:
// a snapshot is written every SnapshotEvery commands, minutes apart at
// production rates, and a put must never slow the follower.)
func (b *SnapshotBucket) Publish(ctx context.Context, snapDir string, interval time.Duration, log SnapshotBound) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := b.PublishNewest(ctx, snapDir, log); err != nil && ctx.Err() == nil {
			b.log.Warn("replication: cannot put the newest snapshot in the bucket; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Bootstrap makes dataDir, new or wiped, start from the newest snapshot
// in the bucket that the log l can be continued from: one whose Venue is
// the venue named by the log's last claim (its newest epoch marker) and
// whose seq is within the commands the log holds or just before them
// (Held: first-1 <= seq <= last), so that the log holds every command
// from seq+1 to its end. Newer snapshots that do not qualify (another
// venue's, past the log's end, or older than a trimmed front) are passed
// over, with a warning. It fetches the one chosen and writes it as the
// journal's snapshot at its seq (journal.SnapshotStore under
// dataDir/journal.SnapshotDir), so that journal.Start recovers that state
// with a WAL beginning at seq+1, after which the node follows the log from
// seq+1. It refuses a data dir whose journal holds WAL entries or
// snapshots (ErrDataDirNotEmpty), and answers ErrNoUsableSnapshot (also
// ErrNoRemoteSnapshot if the bucket is empty) when no snapshot qualifies
// or the log holds no claim: nothing is changed on disk then. An empty
// WAL directory (no entry) is removed once a snapshot is fetched, as it
// would otherwise start at seq 1. It returns what it fetched (its Venue is
// the venue the node must adopt).
func Bootstrap(ctx context.Context, b *SnapshotBucket, l *Log, dataDir string, log *slog.Logger) (RemoteSnapshot, error) {
	if log == nil {
		log = slog.Default()
	}
	walDir := filepath.Join(dataDir, journal.WALDir)
	if err := checkEmpty(dataDir, walDir); err != nil {
		return RemoteSnapshot{}, err
	}
	claim, err := l.LastEpoch(ctx)
	if err != nil {
		return RemoteSnapshot{}, err
	}
	if claim == nil {
		return RemoteSnapshot{}, fmt.Errorf("%w: the log holds no claim (epoch marker) naming its venue", ErrNoUsableSnapshot)
	}
	first, last, err := l.Held(ctx)
	if err != nil {
		return RemoteSnapshot{}, err
	}
	all, err := b.List(ctx)
	if err != nil {
		return RemoteSnapshot{}, err
	}
	if len(all) == 0 {
		return RemoteSnapshot{}, fmt.Errorf("%w: %w", ErrNoUsableSnapshot, ErrNoRemoteSnapshot)
	}
	for i := len(all) - 1; i >= 0; i-- {
		r := all[i]
		var why string
		switch {
		case r.Venue != claim.Venue:
			why = fmt.Sprintf("of venue %q, the log's last claim names %q", r.Venue, claim.Venue)
		case core.Seq(r.Seq) > last:
			why = fmt.Sprintf("past the log's last command %d", last)
		case core.Seq(r.Seq)+1 < first:
			why = fmt.Sprintf("the log no longer holds command %d (it holds %d..%d)", r.Seq+1, first, last)
		}
		if why != "" {
			log.Warn("replication: bootstrap: passing over a snapshot the log cannot be continued from", "seq", r.Seq,
				"venue", r.Venue, "from_node", r.Node, "why", why)
			continue
		}
		log.Info("replication: bootstrapping from the newest snapshot the log can be continued from", "seq", r.Seq,
			"bytes", r.Size, "venue", r.Venue, "from_node", r.Node, "log_holds_from", first, "log_last", last)
		data, err := b.Fetch(ctx, r)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			log.Warn("replication: bootstrap: the snapshot was deleted from the bucket meanwhile; trying an older one", "seq", r.Seq)
			continue
		}
		if err != nil {
			return RemoteSnapshot{}, err
		}
		if err := os.RemoveAll(walDir); err != nil {
			return RemoteSnapshot{}, fmt.Errorf("replication: bootstrap: remove the empty WAL: %w", err)
		}
		snaps, err := journal.OpenSnapshotStore(filepath.Join(dataDir, journal.SnapshotDir), log)
		if err != nil {
			return RemoteSnapshot{}, err
		}
		if err := snaps.Write(r.Seq, data); err != nil {
			return RemoteSnapshot{}, err
		}
		log.Info("replication: bootstrap snapshot written; the node recovers it and follows the log from the next seq",
			"seq", r.Seq, "next", r.Seq+1)
		return r, nil
	}
	return RemoteSnapshot{}, fmt.Errorf("%w: the log (venue %q) holds commands %d..%d; the bucket holds %d snapshot(s), none of that venue at a seq in %d..%d",
		ErrNoUsableSnapshot, claim.Venue, first, last, len(all), first-1, last)
}

// checkEmpty refuses a data dir whose journal holds anything.
func checkEmpty(dataDir, walDir string) error {
	if _, err := os.Stat(walDir); err == nil {
		w, err := journal.OpenReadOnly(walDir)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrDataDirNotEmpty, walDir, err)
		}
		first, last := w.FirstSeq(), w.LastSeq()
		w.Close()
		if last >= first {
			return fmt.Errorf("%w: its WAL holds seqs %d..%d", ErrDataDirNotEmpty, first, last)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replication: bootstrap: %w", err)
	}
	des, err := os.ReadDir(filepath.Join(dataDir, journal.SnapshotDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replication: bootstrap: %w", err)
	}
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".snap") {
			return fmt.Errorf("%w: it holds snapshot %s", ErrDataDirNotEmpty, de.Name())
		}
	}
	return nil
}
