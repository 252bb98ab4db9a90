package replication_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

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
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := replication.OpenSnapshotBucket(ctx, replication.SnapshotBucketConfig{URL: url, Replicas: 3, Keep: keep,
		Node: "a", Venue: "venue-1", Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// A primary's snapshots go to the bucket (the newest Keep kept); a new node
// bootstraps from the newest: its journal recovers exactly that state (the
// snapshot's hash), then it follows the log from the next seq and reaches
// the primary's state.
func TestBootstrapFromTheNewestSnapshot(t *testing.T) {
	c := natstest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	la, lb := openLog(t, c.URL(), "a"), openLog(t, c.URL(), "b")
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
	nb, err := replication.Bootstrap(ctx, b, t.TempDir(), quiet())
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
	if seq, err := b.PublishNewest(ctx, snapDir); err != nil || seq != newest {
		t.Fatalf("PublishNewest: %d, %v (want %d)", seq, err, newest)
	}
	if seq, err := b.PublishNewest(ctx, snapDir); err != nil || seq != 0 {
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
	r, err = replication.Bootstrap(ctx, b, dirB, quiet())
	if err != nil || r.Seq != newest {
		t.Fatalf("Bootstrap: %+v, %v", r, err)
	}
	if _, err := replication.Bootstrap(ctx, b, dirB, quiet()); !errors.Is(err, replication.ErrDataDirNotEmpty) {
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
	if _, err := replication.Bootstrap(ctx, b, dirA, quiet()); !errors.Is(err, replication.ErrDataDirNotEmpty) {
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
