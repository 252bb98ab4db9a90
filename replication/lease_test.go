package replication

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/ubscore/ubscore/replication/natstest"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testLease opens a lease for node on the cluster at url; cfg's zero
// fields take the test timings (TTL 1 s, renew 100 ms, margin 200 ms).
func testLease(t *testing.T, url, node string, cfg LeaseConfig) *Lease {
	t.Helper()
	cfg.URL, cfg.Node = url, node
	if cfg.Replicas == 0 {
		cfg.Replicas = 3
	}
	if cfg.TTL == 0 {
		cfg.TTL, cfg.Renew, cfg.Margin, cfg.Poll = time.Second, 100*time.Millisecond, 200*time.Millisecond, 50*time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = quietLog()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := OpenLease(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func acquire(t *testing.T, l *Lease, within time.Duration) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	rev, err := l.Acquire(ctx)
	if err != nil {
		t.Fatalf("%s: Acquire: %v", l.Node(), err)
	}
	return rev
}

// The KV semantics the lease relies on, on the real nats-server binary
// (v2.9.10 here): a key not written for the bucket's TTL is gone; Create
// fails on a live key and succeeds on an expired or deleted one; Update is a
// compare-and-set on the revision; revisions grow.
func TestLeaseKVSemanticsOnRealServer(t *testing.T) {
	c := natstest.StartProcs(t, 3)
	js := natstest.JetStream(t, c.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var kv jetstream.KeyValue
	var err error
	for {
		kv, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "T", History: 1, TTL: time.Second,
			Storage: jetstream.FileStorage, Replicas: 3})
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	r1, err := kv.Create(ctx, "k", []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "k", []byte("b")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("Create on a live key: %v, want ErrKeyExists", err)
	}
	r2, err := kv.Update(ctx, "k", []byte("c"), r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("Update at the right revision: %d, %v", r2, err)
	}
	if _, err := kv.Update(ctx, "k", []byte("d"), r1); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("Update at a stale revision: %v, want ErrKeyRevisionMismatch", err)
	}
	// Expiry: gone after the TTL (the server's expiry timer; allow it 2 s more).
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, err := kv.Get(ctx, "k")
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the key outlived the bucket's TTL by 2 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := kv.Update(ctx, "k", []byte("e"), r2); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("Update of an expired key: %v, want ErrKeyRevisionMismatch", err)
	}
	r3, err := kv.Create(ctx, "k", []byte("f"))
	if err != nil || r3 <= r2 {
		t.Fatalf("Create after expiry: %d, %v", r3, err)
	}
	if err := kv.Delete(ctx, "k", jetstream.LastRevision(r3)); err != nil {
		t.Fatal(err)
	}
	// Reads are eventually consistent: the KV bucket allows direct gets,
	// which any replica answers, possibly one that has not applied the
	// delete yet (seen here on v2.9.10). Create is a compare-and-set on the
	// stream leader either way; a stale read only makes it try again.
	deadline = time.Now().Add(3 * time.Second)
	var r4 uint64
	for {
		if r4, err = kv.Create(ctx, "k", []byte("g")); err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrKeyExists) || time.Now().After(deadline) {
			t.Fatalf("Create after Delete: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r4 <= r3 {
		t.Fatalf("Create after Delete: revision %d after %d", r4, r3)
	}
	if _, err := kv.Create(ctx, "k", []byte("h")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("Create on the re-created key: %v, want ErrKeyExists", err)
	}
}

// Concurrent acquirers: at most one holds the lease at any time, and each
// gets it in turn as holders release it.
func TestLeaseOneHolderAtATime(t *testing.T) {
	c := natstest.Start(t, 3)
	var current atomic.Pointer[string]
	var wg sync.WaitGroup
	var turns atomic.Int64
	stop := time.Now().Add(4 * time.Second)
	errs := make(chan error, 8)
	for i := 0; i < 4; i++ {
		l := testLease(t, c.URL(), fmt.Sprintf("n%d", i), LeaseConfig{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := uint64(0)
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Until(stop)+time.Second)
				rev, err := l.Acquire(ctx)
				cancel()
				if err != nil {
					if time.Now().Before(stop) {
						errs <- fmt.Errorf("%s: Acquire: %w", l.Node(), err)
					}
					return
				}
				if rev <= last {
					errs <- fmt.Errorf("%s: revision %d after %d", l.Node(), rev, last)
				}
				last = rev
				me := l.Node()
				if !current.CompareAndSwap(nil, &me) {
					errs <- fmt.Errorf("%s acquired while %s holds it", me, *current.Load())
					return
				}
				turns.Add(1)
				for j := 0; j < 3; j++ {
					time.Sleep(40 * time.Millisecond)
					if !l.Held() {
						errs <- fmt.Errorf("%s: lost the lease while renewing", me)
					}
				}
				current.Store(nil)
				if err := l.Release(context.Background()); err != nil {
					errs <- err
				}
				select {
				case <-l.Lost():
				default:
					errs <- fmt.Errorf("%s: Lost not closed by Release", me)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := turns.Load(); n < 8 {
		t.Errorf("%d acquisitions in 4 s among 4 nodes releasing after 120 ms: release does not hand over fast", n)
	}
	t.Logf("%d acquisitions", turns.Load())
}

// A holder that stops renewing stops claiming the lease TTL - margin after
// its last renewal, and another node takes it once it saw no renewal for a
// TTL. When the old holder resumes, it learns it lost it.
func TestLeaseStalledHolderLosesItAndLearnsSo(t *testing.T) {
	c := natstest.Start(t, 3)
	a := testLease(t, c.URL(), "a", LeaseConfig{ManualRenew: true})
	b := testLease(t, c.URL(), "b", LeaseConfig{})
	acquire(t, a, 10*time.Second)
	t0 := time.Now()
	var last time.Time
	for range 5 { // a renews for a while: b must not take it
		time.Sleep(100 * time.Millisecond)
		last = time.Now()
		if err := a.Renew(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	if _, err := b.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b acquired a renewed lease: %v", err)
	}
	cancel()
	// a has stopped renewing ("paused"). b takes over after a TTL without
	// renewals.
	paused := last
	bdone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := b.Acquire(ctx)
		bdone <- err
	}()
	select {
	case <-a.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("a's Lost not closed after its deadline")
	}
	lostAfter := time.Since(paused)
	if a.Held() {
		t.Fatal("a still claims the lease after its deadline")
	}
	if err := <-bdone; err != nil {
		t.Fatal(err)
	}
	tookAfter := time.Since(paused)
	if !b.Held() {
		t.Fatal("b acquired but does not hold")
	}
	if tookAfter < lostAfter {
		t.Fatalf("b took it %v after the pause, before a stopped claiming it (%v)", tookAfter, lostAfter)
	}
	// a resumes: its renewal is refused, it does not hold it again.
	if err := a.Renew(context.Background()); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("a's renewal after the take-over: %v, want ErrLeaseLost", err)
	}
	if a.Held() {
		t.Fatal("a claims the lease after its renewal was refused")
	}
	// and a cannot take it back while b renews.
	ctx, cancel = context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if _, err := a.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a re-acquired a lease b renews: %v", err)
	}
	if holder, _, err := b.Holder(context.Background()); err != nil || holder != "b" {
		t.Fatalf("holder %q, %v", holder, err)
	}
	if tookAfter < time.Second {
		t.Fatalf("b took it %v after a's last renewal: less than a TTL", tookAfter)
	}
	t.Logf("a renewed for %v; a stopped claiming it %v after its last renewal, b took over %v after it",
		paused.Sub(t0), lostAfter, tookAfter)
}

// A holder whose deadline passed without anybody else writing takes its
// lease straight back (its own revision is still the key's): a stall of the
// bucket does not hand the primary to another node if nobody took it.
func TestLeaseHolderRetakesItsOwnLapsedLease(t *testing.T) {
	c := natstest.Start(t, 3)
	a := testLease(t, c.URL(), "a", LeaseConfig{ManualRenew: true, TTL: 3 * time.Second, Renew: 100 * time.Millisecond,
		Margin: 2500 * time.Millisecond, Poll: 50 * time.Millisecond})
	r1 := acquire(t, a, 10*time.Second)
	<-a.Lost() // 500 ms: the key (TTL 3 s) is still there
	t0 := time.Now()
	r2 := acquire(t, a, 2*time.Second)
	if r2 <= r1 || time.Since(t0) > time.Second {
		t.Fatalf("re-acquired at revision %d (was %d) after %v", r2, r1, time.Since(t0))
	}
	if !a.Held() || a.Acquisitions() != 2 {
		t.Fatalf("held %v after %d acquisitions", a.Held(), a.Acquisitions())
	}
}

// A node waiting for the lease does not take it from a live holder: in a
// steady run, one acquisition and no failover. Logs the slowest renewal.
func TestLeaseNoFailoverInASteadyRun(t *testing.T) {
	t.Parallel() // it waits out its run: the package's other tests load the machine meanwhile
	d := 4 * time.Second
	if !testing.Short() {
		d = 20 * time.Second
	}
	c := natstest.Start(t, 3)
	var ls []*Lease
	for i := range 3 { // the production timings
		ls = append(ls, testLease(t, c.URL(), fmt.Sprintf("n%d", i), LeaseConfig{TTL: DefaultLeaseTTL,
			Renew: DefaultLeaseRenew, Margin: DefaultLeaseMargin, Poll: DefaultLeasePoll}))
	}
	acquire(t, ls[0], 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range ls[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.Acquire(ctx); err == nil {
				t.Errorf("%s took the lease from a live holder", l.Node())
			}
		}()
	}
	select {
	case <-ls[0].Lost():
		t.Errorf("the holder lost its lease in a steady run")
	case <-ctx.Done():
	}
	wg.Wait()
	var n uint64
	for _, l := range ls {
		n += l.Acquisitions()
	}
	if n != 1 || !ls[0].Held() {
		t.Fatalf("%d acquisitions in %v, holder holds: %v", n, d, ls[0].Held())
	}
	t.Logf("%v steady: 1 acquisition, slowest renewal %v (the holder tolerates %v without one)",
		d, ls[0].MaxRenewal(), DefaultLeaseTTL-DefaultLeaseMargin)
}

// The lease on real nats-server processes, with the production timings: a
// holder whose process "dies" (Close: no renewal, no release) is replaced
// once a TTL has passed since its last renewal, and not before.
func TestLeaseFailoverOnRealServer(t *testing.T) {
	c := natstest.StartProcs(t, 3)
	prod := LeaseConfig{TTL: DefaultLeaseTTL, Renew: DefaultLeaseRenew, Margin: DefaultLeaseMargin, Poll: DefaultLeasePoll}
	a := testLease(t, c.URL(), "a", prod)
	b := testLease(t, c.URL(), "b", prod)
	acquire(t, a, 30*time.Second)
	closedAt := make(chan time.Time, 1)
	go func() {
		time.Sleep(time.Second)
		closedAt <- time.Now()
		a.Close()
	}()
	acquire(t, b, 15*time.Second)
	took := time.Since(<-closedAt)
	// a's last renewal was at most Renew before it closed.
	if took < DefaultLeaseTTL-DefaultLeaseRenew {
		t.Fatalf("b took the lease %v after a stopped: less than a TTL after a's last renewal", took)
	}
	if a.Held() || !b.Held() {
		t.Fatalf("a held %v, b held %v", a.Held(), b.Held())
	}
	t.Logf("b acquired the lease %v after a stopped renewing (TTL %v, renew every %v, poll %v)",
		took, DefaultLeaseTTL, DefaultLeaseRenew, DefaultLeasePoll)
}

// leaseChildEnv runs the test binary as a lease holder (TestLeasePausedProcess).
const leaseChildEnv = "UBS_LEASE_CHILD_URL"

// A holder process stopped by SIGSTOP past its lease: another node takes
// the lease; on SIGCONT the holder learns at once that it lost it (Held is
// false before any renewal is tried), and sees the other node as holder.
func TestLeasePausedProcess(t *testing.T) {
	if url := os.Getenv(leaseChildEnv); url != "" {
		leaseChild(t, url)
		return
	}
	c := natstest.Start(t, 3)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeasePausedProcess$", "-test.v")
	cmd.Env = append(os.Environ(), leaseChildEnv+"="+c.URL())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(prefix string, within time.Duration) string {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the child ended before %q", prefix)
				}
				if strings.HasPrefix(l, prefix) {
					return l
				}
			case <-deadline:
				t.Fatalf("no %q from the child within %v", prefix, within)
			}
		}
	}
	expect("HELD", 30*time.Second)
	b := testLease(t, c.URL(), "b", LeaseConfig{})
	time.Sleep(300 * time.Millisecond) // a few renewals
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	acquire(t, b, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if l := expect("LOST", 5*time.Second); l != "LOST held=false holder=b" {
		t.Fatalf("the resumed holder says %q", l)
	}
	if !b.Held() {
		t.Fatal("b lost the lease to the resumed process")
	}
}

// leaseChild holds the lease until it is lost, then prints what it knows.
func leaseChild(t *testing.T, url string) {
	l := testLease(t, url, "child", LeaseConfig{})
	acquire(t, l, 20*time.Second)
	fmt.Println("HELD")
	select {
	case <-l.Lost():
	case <-time.After(60 * time.Second):
		t.Fatal("never lost")
	}
	holder, _, err := l.Holder(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("LOST held=%v holder=%s\n", l.Held(), holder)
}

// Release hands the lease over at the waiting node's next look, not after
// a TTL.
func TestLeaseReleaseHandsOverFast(t *testing.T) {
	c := natstest.Start(t, 3)
	a := testLease(t, c.URL(), "a", LeaseConfig{})
	b := testLease(t, c.URL(), "b", LeaseConfig{})
	acquire(t, a, 10*time.Second)
	got := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := b.Acquire(ctx); err == nil {
			got <- time.Now()
		}
		close(got)
	}()
	time.Sleep(1500 * time.Millisecond) // b has watched a renew for more than a TTL
	if b.Held() {
		t.Fatal("b took a renewed lease")
	}
	t0 := time.Now()
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	at, ok := <-got
	if !ok {
		t.Fatal("b never acquired the released lease")
	}
	// Without the release b would take it only once it had seen a's last
	// revision unchanged for a TTL: >= TTL - Renew (1.75 s) after it. The
	// bound leaves room for a loaded machine (1.08 s seen at load 6).
	if d := at.Sub(t0); d >= DefaultLeaseTTL-DefaultLeaseRenew-DefaultLeasePoll*2 {
		t.Fatalf("b took the released lease after %v: no faster than the TTL", d)
	} else {
		t.Logf("hand-over after Release: %v", d)
	}
	if a.Held() {
		t.Fatal("a holds a lease it released")
	}
}

// The holder's own renewal stored with its answer lost (a reconnect, a
// timeout) does not lose it the lease: the next renewal finds the key
// naming it at a later revision and writes on that one. (Simulated: the
// holder's value written on its revision behind its back.)
func TestLeaseRenewalWhoseAnswerWasLost(t *testing.T) {
	c := natstest.Start(t, 1)
	a := testLease(t, c.URL(), "a", LeaseConfig{ManualRenew: true, Replicas: 1,
		TTL: 2 * time.Second, Renew: 250 * time.Millisecond, Margin: 500 * time.Millisecond, Poll: 50 * time.Millisecond})
	rev := acquire(t, a, 5*time.Second)
	ctx := context.Background()
	if _, err := a.kv.Update(ctx, a.cfg.Key, a.value(), rev); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx); err != nil || !a.Held() {
		t.Fatalf("Renew after its own stored renewal: %v, held %v", err, a.Held())
	}
	// Another node's write still ends the holding.
	if _, err := a.kv.Put(ctx, a.cfg.Key, []byte(`{"node":"b","at_ms":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx); !errors.Is(err, ErrLeaseLost) || a.Held() {
		t.Fatalf("Renew after another node's write: %v, held %v", err, a.Held())
	}
}

// A node configured with another TTL is refused: it would rewrite the
// bucket's TTL under the holder, whose key would then expire while it
// still believes it holds the lease.
func TestLeaseRefusesAnotherTTL(t *testing.T) {
	c := natstest.Start(t, 1)
	a := testLease(t, c.URL(), "a", LeaseConfig{ManualRenew: true, Replicas: 1,
		TTL: 4 * time.Second, Renew: 250 * time.Millisecond, Margin: 500 * time.Millisecond, Poll: 50 * time.Millisecond})
	acquire(t, a, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := OpenLease(ctx, LeaseConfig{URL: c.URL(), Node: "b", Key: a.cfg.Key, Bucket: a.cfg.Bucket, Replicas: 1,
		TTL: time.Second, Renew: 100 * time.Millisecond, Margin: 200 * time.Millisecond, Poll: 50 * time.Millisecond, Logger: quietLog()})
	if err == nil {
		b.Close()
		t.Fatal("a node with another TTL opened the lease")
	}
	if !a.Held() {
		t.Fatal("the holder lost the lease")
	}
}
