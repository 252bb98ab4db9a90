package journal

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

// TestStateFollower: the state follower (issue 39) hashes the state at an
// exact seq while commands keep coming, equal to the hash of the same
// commands applied to a fresh processor; writes the snapshots (an explicit
// KindSnapshot and every SnapshotEvery) and makes the last one the
// poison-rebuild base (a poison command after it rebuilds from it, and the
// state still matches); CheckOnState checks its replica; a seq it has
// passed is an error.
func TestStateFollower(t *testing.T) {
	pl, err := Start(Config{Dir: t.TempDir(), Logger: quietLog(), SnapshotEvery: 30, TruncateLimit: keepAll,
		Core: core.Config{AllowDebugPanic: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	cmds := setupCmds()
	ref := core.New(core.Config{AllowDebugPanic: true})
	hashes := map[core.Seq]string{}
	r := NewReply()
	submit := func(c core.Command) core.Seq {
		t.Helper()
		seq, err := pl.Submit(&c, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := pl.Wait(r); err != nil {
			t.Fatal(err)
		}
		return seq
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// ask for a seq ahead of the durable one: answered once the follower gets there
	ahead := core.Seq(len(cmds) / 2)
	got := make(chan string, 1)
	go func() {
		h, err := pl.StateHashAt(ctx, ahead)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	for i := range cmds {
		c := cmds[i]
		c.Seq = submit(cmds[i])
		c.Time = r.Result().Time
		ref.Apply(&c)
		hashes[c.Seq] = ref.StateHash()
	}
	if h := <-got; h != hashes[ahead] {
		t.Fatalf("hash at seq %d from the state follower differs from the reference", ahead)
	}
	if _, err := pl.StateHashAt(ctx, 1); err == nil {
		t.Fatal("a seq the follower passed was hashed")
	}
	snapSeq := submit(core.Command{Kind: core.KindSnapshot})
	deadline := time.Now().Add(20 * time.Second)
	for pl.StateStats().Seq < snapSeq || pl.lastSnapSeen() < snapSeq {
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot at or after seq %d: %+v", snapSeq, pl.StateStats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := pl.StateStats(); st.Snapshots < 2 || st.LastBytes == 0 {
		t.Fatalf("snapshots %+v", st)
	}
	// a poison command rebuilds from the follower's base and the state still agrees
	poison := submit(core.Command{Kind: core.KindDebugPanic, User: 1})
	if r.Result().Code != core.CodePoisonCommand {
		t.Fatalf("poison: %v", r.Result().Code)
	}
	last := submit(core.Command{Kind: core.KindSnapshot})
	h, err := pl.StateHashAt(ctx, last)
	if err != nil {
		t.Fatal(err)
	}
	seq, open, _, err := pl.checkState(ctx)
	if err != nil || len(open) != 0 || seq < last {
		t.Fatalf("check on the state follower: seq %d open %v err %v", seq, open, err)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if got := pl.Processor().StateHash(); got != h || pl.Processor().LastSeq() != last || poison >= last {
		t.Fatalf("after close the processor differs from the state follower's hash at seq %d", last)
	}
}

// lastSnapSeen is the seq of the newest snapshot on disk (0 = none).
func (pl *Pipeline) lastSnapSeen() core.Seq {
	infos, _ := pl.snaps.List()
	var s core.Seq
	for _, in := range infos {
		s = max(s, core.Seq(in.Seq))
	}
	return s
}

// TestStateFollowerSerializesOncePerSeq (issue 39 review): when the hash
// hook, a periodic snapshot and a StateHashAt request all fall on one seq,
// the state follower serializes its replica there once and all three use
// it (it serialized three times); the hashes agree with the snapshot
// written.
func TestStateFollowerSerializesOncePerSeq(t *testing.T) {
	const at = 10
	pl, err := Start(Config{Dir: t.TempDir(), Logger: quietLog(), SnapshotEvery: at, TruncateLimit: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	hooked := make(chan string, 4)
	pl.SetStateHashHook(at, func(seq core.Seq, hash string) {
		if seq == at {
			hooked <- hash
		}
	})
	// the request is with the follower (received: the channel is
	// unbuffered) before the commands come, so it waits there for seq 10
	req := stateReq{kind: reqHash, seq: at, reply: make(chan stateRes, 1)}
	select {
	case pl.stateReqs <- req:
	case <-time.After(10 * time.Second):
		t.Fatal("the state follower took no request")
	}
	runAll(t, pl, setupCmds()[:at])
	var res stateRes
	select {
	case res = <-req.reply:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer at seq 10")
	}
	if res.err != nil || res.seq != at {
		t.Fatalf("answer %+v", res)
	}
	hook := <-hooked
	deadline := time.Now().Add(10 * time.Second)
	for pl.StateStats().Snapshots < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot at seq %d: %+v", at, pl.StateStats())
		}
		time.Sleep(2 * time.Millisecond)
	}
	base := *pl.baseSnap.Load()
	if st := pl.StateStats(); st.Serialized != 1 || st.Seq != at {
		t.Fatalf("the replica was serialized %d times at seq %d, want once", st.Serialized, st.Seq)
	}
	if want := core.StateHashOf(base); res.hash != want || hook != want {
		t.Fatal("the hashes at seq 10 differ from the snapshot written there")
	}
}

// TestStartWarmUp: Config.WarmUp runs during Start after recovery (its
// report and the durable seq are the recovered ones, a follower replays the
// WAL up to there) and Start waits for it; its error fails Start, which
// leaves the data dir to a later Start.
func TestStartWarmUp(t *testing.T) {
	dir := t.TempDir()
	pl, err := Start(Config{Dir: dir, Logger: quietLog(), ReadView: true})
	if err != nil {
		t.Fatal(err)
	}
	cmds := setupCmds()
	runAll(t, pl, cmds)
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	want := core.Seq(len(cmds))
	var replayed, durable, recovered core.Seq
	warm := func(pl *Pipeline) error {
		recovered, durable = pl.Recovery().Seq, pl.DurableSeq()
		f, err := pl.NewFollower(1)
		if err != nil {
			return err
		}
		for f.NextSeq() <= recovered {
			recs, err := f.Next(context.Background(), 1000)
			if err != nil {
				return err
			}
			replayed += core.Seq(len(recs))
		}
		return nil
	}
	pl, err = Start(Config{Dir: dir, Logger: quietLog(), ReadView: true, WarmUp: warm})
	if err != nil {
		t.Fatal(err)
	}
	if recovered != want || durable != want || replayed != want {
		t.Fatalf("warm-up saw recovered seq %d, durable %d, replayed %d; want %d", recovered, durable, replayed, want)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("warm-up failed")
	if _, err := Start(Config{Dir: dir, Logger: quietLog(), ReadView: true, WarmUp: func(*Pipeline) error { return boom }}); !errors.Is(err, boom) {
		t.Fatalf("Start with a failing warm-up: %v", err)
	}
	pl, err = Start(Config{Dir: dir, Logger: quietLog(), ReadView: true})
	if err != nil {
		t.Fatalf("a start after the failed one: %v", err)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
}
