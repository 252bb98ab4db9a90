package replication_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/replication/natstest"
)

func startAt(t *testing.T, dir string, cfg journal.Config) *journal.Pipeline {
	t.Helper()
	cfg.Dir, cfg.Logger, cfg.ReadView, cfg.SnapshotEvery, cfg.KeepSnapshots = dir, quiet(), true, 700, 5
	pl, err := journal.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pl.Close() })
	return pl
}

func openBucket(t *testing.T, url string, keep int) *replication.SnapshotBucket {
	return openBucketOf(t, url, keep, 3, "venue-1")
}

// openBucketOf opens the snapshot bucket with replicas and the venue Put
// records.
func openBucketOf(t *testing.T, url string, keep, replicas int, venue string) *replication.SnapshotBucket {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := replication.OpenSnapshotBucket(ctx, replication.SnapshotBucketConfig{URL: url, Replicas: replicas,
		Keep: keep, Node: "a", Venue: venue, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// openVenueLog is openLog for a node whose claims carry venue.
func openVenueLog(t *testing.T, url, node, venue string) *replication.Log {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := replication.Open(ctx, replication.Config{URL: url, Node: node, Venue: venue, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// appendStored appends commands first..last (records of 100; the log does
// not decode them) and waits until the log stores them.
func appendStored(t *testing.T, l *replication.Log, first, last core.Seq) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for seq := first; seq <= last; seq += 100 {
		var cmds [][]byte
		for s := seq; s < seq+100 && s <= last; s++ {
			cmds = append(cmds, []byte(fmt.Sprintf("command %d", s)))
		}
		if err := l.Append(seq, cmds); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WaitStored(ctx, last); err != nil {
		t.Fatal(err)
	}
}

// bucketSeqs lists the bucket's snapshots as seq@venue.
func bucketSeqs(t *testing.T, b *replication.SnapshotBucket) []string {
	t.Helper()
	list, err := b.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range list {
		out = append(out, fmt.Sprintf("%d@%s", r.Seq, r.Venue))
	}
	return out
}

// tree lists every file and directory under dir.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		out = append(out, p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A primary's snapshots go to the bucket (the newest Keep kept); a new node
// bootstraps from the newest: its journal recovers exactly that state (the
// snapshot's hash), then it follows the log from the next seq and reaches
// the primary's state.
func TestBootstrapFromTheNewestSnapshot(t *testing.T) {
	c := natstest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	la, lb := openVenueLog(t, c.URL(), "a", "venue-1"), openLog(t, c.URL(), "b")
	if err := la.Claim(ctx, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	dirA := t.TempDir()
	pa := startAt(t, dirA, journal.Config{Replicator: la})
	w := workload(t, 11)
	submit(t, pa, w, 3000)
	// The pipeline writes its snapshots at 700, 1400, 2100 and 2800; the
	// test's own SnapshotStore is opened once they are all written (opening
	// one removes the temp file of a snapshot being written). The publisher
	// only reads the directory (journal.LatestSnapshotIn).
	waitFor(t, "the snapshot at 2800", func() bool { return pa.StateStats().Snapshots >= 4 })
	snapDir := filepath.Join(dirA, journal.SnapshotDir)
	snaps, err := journal.OpenSnapshotStore(snapDir, quiet())
	if err != nil {
		t.Fatal(err)
	}

	b := openBucket(t, c.URL(), 2)
	nb, err := replication.Bootstrap(ctx, b, lb, t.TempDir(), quiet())
	if !errors.Is(err, replication.ErrNoRemoteSnapshot) {
		t.Fatalf("Bootstrap from an empty bucket: %+v, %v", nb, err)
	}
	// Older snapshots first (put by hand), then the newest through
	// PublishNewest: the bucket keeps the newest 2.
	infos, err := snaps.List()
	if err != nil || len(infos) < 3 {
		t.Fatalf("%d local snapshots, %v", len(infos), err)
	}
	for _, in := range infos[:len(infos)-1] {
		data, err := snaps.Load(in.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Put(ctx, in.Seq, data); err != nil {
			t.Fatal(err)
		}
	}
	newest := infos[len(infos)-1].Seq
	if seq, err := b.PublishNewest(ctx, snapDir, la); err != nil || seq != newest {
		t.Fatalf("PublishNewest: %d, %v (want %d)", seq, err, newest)
	}
	if seq, err := b.PublishNewest(ctx, snapDir, la); err != nil || seq != 0 {
		t.Fatalf("PublishNewest again: %d, %v (want nothing new)", seq, err)
	}
	// The listing may come from a replica that lags (an R=3 bucket): the
	// pruned list shows within a bounded wait.
	want := []uint64{infos[len(infos)-2].Seq, newest}
	var seqs []uint64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		list, err := b.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		seqs = seqs[:0]
		for _, r := range list {
			seqs = append(seqs, r.Seq)
		}
		if slices.Equal(seqs, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bucket holds %v, want %v", seqs, want)
		}
	}
	r, err := b.Newest(ctx)
	if err != nil || r.Seq != newest || r.Venue != "venue-1" || r.Node != "a" {
		t.Fatalf("Newest: %+v, %v", r, err)
	}
	local, err := snaps.Load(newest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Fetch(ctx, r)
	if err != nil || !bytes.Equal(got, local) {
		t.Fatalf("Fetch: %d bytes (local %d), equal %v, %v", len(got), len(local), bytes.Equal(got, local), err)
	}

	// A new node bootstraps, recovers exactly the snapshot's state, follows.
	dirB := t.TempDir()
	r, err = replication.Bootstrap(ctx, b, lb, dirB, quiet())
	if err != nil || r.Seq != newest {
		t.Fatalf("Bootstrap: %+v, %v", r, err)
	}
	if _, err := replication.Bootstrap(ctx, b, lb, dirB, quiet()); !errors.Is(err, replication.ErrDataDirNotEmpty) {
		t.Fatalf("Bootstrap into a dir holding a snapshot: %v", err)
	}
	pb := startAt(t, dirB, journal.Config{Standby: true})
	if seq, hash := viewHash(t, pb); seq != core.Seq(newest) || hash != core.StateHashOf(local) {
		t.Fatalf("the bootstrapped node recovered seq %d hash %s; the snapshot is seq %d hash %s",
			seq, hash, newest, core.StateHashOf(local))
	}
	sb := replication.NewStandby(lb, pb)
	runErr := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { runErr <- sb.Run(runCtx) }()
	last := submit(t, pa, w, 500)
	waitFor(t, "the bootstrapped standby to catch up", func() bool { return pb.DurableSeq() >= last })
	waitFor(t, "the views", func() bool {
		sa, _ := viewHash(t, pa)
		sb, _ := viewHash(t, pb)
		return sa == last && sb == last
	})
	sa, ha := viewHash(t, pa)
	sbq, hb := viewHash(t, pb)
	if sa != sbq || ha != hb {
		t.Fatalf("primary at %d hash %s, bootstrapped standby at %d hash %s", sa, ha, sbq, hb)
	}
	stop()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	// A node with WAL entries is refused, nothing changed.
	if _, err := replication.Bootstrap(ctx, b, lb, dirA, quiet()); !errors.Is(err, replication.ErrDataDirNotEmpty) {
		t.Fatalf("Bootstrap into the primary's data dir: %v", err)
	}
}

// The object store on the real nats-server binary (v2.9.10 here): the
// bucket is created, a snapshot put and fetched back whole, the oldest
// pruned.
func TestSnapshotBucketOnRealServer(t *testing.T) {
	c := natstest.StartProcs(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := openBucket(t, c.URL(), 2)
	data := bytes.Repeat([]byte("state "), 200_000) // 1.2 MB: several chunks
	for _, seq := range []uint64{10, 20, 30} {
		if err := b.Put(ctx, seq, append([]byte{byte(seq)}, data...)); err != nil {
			t.Fatal(err)
		}
	}
	list, err := b.List(ctx)
	if err != nil || len(list) != 2 || list[0].Seq != 20 || list[1].Seq != 30 {
		t.Fatalf("List: %+v, %v", list, err)
	}
	got, err := b.Fetch(ctx, list[1])
	if err != nil || !bytes.Equal(got, append([]byte{30}, data...)) {
		t.Fatalf("Fetch: %d bytes, %v", len(got), err)
	}
}

// The publisher puts only a snapshot the log stores (seq at most the last
// command this node has stored in the log), recording the log's venue: a
// newer local snapshot (over a WAL tail the log does not hold) waits until
// the log holds its commands, while the newest one at or below them goes
// out. A node that has not written the log puts nothing; a bucket
// configured for another venue than the log's puts nothing.
func TestPublishPutsOnlyWhatTheLogStores(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	la := openVenueLog(t, c.URL(), "a", "venue-1")
	if err := la.Claim(ctx, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	appendStored(t, la, 1, 1500)
	snapDir := t.TempDir()
	snaps, err := journal.OpenSnapshotStore(snapDir, quiet())
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{700, 1400, 2100} {
		if err := snaps.Write(seq, []byte(fmt.Sprintf("state at %d", seq))); err != nil {
			t.Fatal(err)
		}
	}
	b := openBucketOf(t, c.URL(), 10, 1, "") // the venue recorded is the log's
	publish := func(want uint64, bucket ...string) {
		t.Helper()
		if seq, err := b.PublishNewest(ctx, snapDir, la); err != nil || seq != want {
			t.Fatalf("PublishNewest (the log stores up to %d): %d, %v; want %d", la.Appended(), seq, err, want)
		}
		if got := bucketSeqs(t, b); !slices.Equal(got, bucket) {
			t.Fatalf("the bucket holds %v, want %v", got, bucket)
		}
	}
	publish(1400, "1400@venue-1") // 2100 is above the log's 1500
	publish(0, "1400@venue-1")
	appendStored(t, la, 1501, 2100)
	publish(2100, "1400@venue-1", "2100@venue-1")
	if err := snaps.Write(2800, []byte("state at 2800")); err != nil {
		t.Fatal(err)
	}
	publish(0, "1400@venue-1", "2100@venue-1")
	r, err := b.Newest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := b.Fetch(ctx, r); err != nil || string(data) != "state at 2100" {
		t.Fatalf("Fetch %d: %q, %v", r.Seq, data, err)
	}

	// A node that never wrote the log (a standby) puts nothing.
	lb := openVenueLog(t, c.URL(), "b", "venue-1")
	if seq, err := openBucketOf(t, c.URL(), 10, 1, "").PublishNewest(ctx, snapDir, lb); err != nil || seq != 0 {
		t.Fatalf("PublishNewest beside a log this node never wrote: %d, %v", seq, err)
	}
	// A bucket configured for another venue than the log's puts nothing.
	if seq, err := openBucketOf(t, c.URL(), 10, 1, "venue-2").PublishNewest(ctx, snapDir, la); !errors.Is(err, replication.ErrOtherVenue) {
		t.Fatalf("PublishNewest of venue-2 beside venue-1's log: %d, %v", seq, err)
	}
	if got, want := bucketSeqs(t, b), []string{"1400@venue-1", "2100@venue-1"}; !slices.Equal(got, want) {
		t.Fatalf("the bucket holds %v, want %v", got, want)
	}
}

// Bootstrap takes the newest snapshot the log can be continued from: of
// the venue its last claim names, at a seq whose next command the log
// still holds (its front trimmed), not past its end. Newer ones that are
// not are passed over for an older one; with none, ErrNoUsableSnapshot and
// the data dir is left as it was.
func TestBootstrapOnlyFromASnapshotTheLogContinues(t *testing.T) {
	c := natstest.Start(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	la, lb := openVenueLog(t, c.URL(), "a", "venue-1"), openVenueLog(t, c.URL(), "b", "venue-1")
	if err := la.Claim(ctx, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	appendStored(t, la, 1, 1500)
	at, _, err := lb.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lb.Claim(ctx, at, 1500, 2); err != nil {
		t.Fatal(err)
	}
	appendStored(t, lb, 1501, 3000)
	if first, last, err := lb.Held(ctx); err != nil || first != 1 || last != 3000 {
		t.Fatalf("Held: %d..%d, %v; want 1..3000", first, last, err)
	}

	b1, b2 := openBucketOf(t, c.URL(), 10, 1, "venue-1"), openBucketOf(t, c.URL(), 10, 1, "venue-2")
	put := func(b *replication.SnapshotBucket, seq uint64) {
		t.Helper()
		if err := b.Put(ctx, seq, []byte(fmt.Sprintf("state at %d", seq))); err != nil {
			t.Fatal(err)
		}
	}
	put(b1, 500)
	put(b2, 2500) // another venue's
	put(b1, 3500) // past the log's end
	bootstrap := func(dir string, want uint64) {
		t.Helper()
		r, err := replication.Bootstrap(ctx, b1, lb, dir, quiet())
		if err != nil || r.Seq != want || r.Venue != "venue-1" {
			t.Fatalf("Bootstrap: %+v, %v; want seq %d of venue-1", r, err, want)
		}
		seq, data, err := journal.LatestSnapshotIn(filepath.Join(dir, journal.SnapshotDir))
		if err != nil || seq != want || string(data) != fmt.Sprintf("state at %d", want) {
			t.Fatalf("the bootstrapped dir's snapshot: %d %q, %v; want %d", seq, data, err, want)
		}
	}
	bootstrap(t.TempDir(), 500)

	// Trim the log's front up to the record holding command 1001: the log
	// no longer holds 501, so the snapshot at 500 is no use.
	sq, err := lb.Seek(ctx, 1001)
	if err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, c.URL())
	st, err := js.Stream(ctx, replication.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(sq)); err != nil {
		t.Fatal(err)
	}
	if first, last, err := lb.Held(ctx); err != nil || first != 1001 || last != 3000 {
		t.Fatalf("Held after the trim: %d..%d, %v; want 1001..3000", first, last, err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, journal.WALDir), 0o750); err != nil { // empty: allowed
		t.Fatal(err)
	}
	before := tree(t, dir)
	if r, err := replication.Bootstrap(ctx, b1, lb, dir, quiet()); !errors.Is(err, replication.ErrNoUsableSnapshot) {
		t.Fatalf("Bootstrap with no usable snapshot: %+v, %v", r, err)
	}
	if after := tree(t, dir); !slices.Equal(before, after) {
		t.Fatalf("the refused bootstrap changed the data dir: %v, then %v", before, after)
	}
	put(b1, 1000) // the log holds 1001 on: usable
	bootstrap(dir, 1000)
}
