package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// These tests run the publisher against the real NATS JetStream server of
// the machine (127.0.0.1:4222, UBS_NATS_URL to override; skipped when
// absent unless CI is set) and a real journal.Pipeline. Each test has its
// own stream and subjects. They prove: every event of the WAL reaches the
// stream once, in order, with the id <seq>-<event index>; a publisher
// stopped at any point (even between the events of one command) resumes
// exactly after the last stored message; an outage of the broker does not
// stall the core and the publisher catches up after it.

func natsURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("UBS_NATS_URL")
	if url == "" {
		url = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(url, nats.Timeout(time.Second))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("NATS at %s: %v (CI: .ci/run starts it)", url, err)
		}
		t.Skipf("NATS at %s: %v", url, err)
	}
	nc.Close()
	return url
}

var streamN struct {
	sync.Mutex
	n int
}

// testStream returns a fresh stream name and subject prefix, deleted at the end.
func testStream(t *testing.T, url string) (name, prefix string) {
	streamN.Lock()
	streamN.n++
	n := streamN.n
	streamN.Unlock()
	id := fmt.Sprintf("T%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, n)
	name, prefix = "UBS_TEST_"+id, "ubstest."+id+"."
	t.Cleanup(func() {
		nc, err := nats.Connect(url)
		if err != nil {
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		_ = js.DeleteStream(context.Background(), name)
	})
	return name, prefix
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// exchange is a pipeline with USD (asset 1, scale 2), BTC (2) and a market.
type exchange struct {
	t  *testing.T
	pl *journal.Pipeline
	r  *journal.Reply
}

func newExchange(t *testing.T) *exchange {
	pl, err := journal.Start(journal.Config{Dir: t.TempDir(), Logger: quiet(), TruncateLimit: func() core.Seq { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pl.Close() })
	x := &exchange{t: t, pl: pl, r: journal.NewReply()}
	x.do(core.Command{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 2})
	x.do(core.Command{Kind: core.KindConfigAsset, Asset: 2, BaseScale: 0})
	x.do(core.Command{Kind: core.KindConfigMarket, Market: 1, Cfg: core.MarketCfg{Base: 2, Quote: 1, Tick: 1, Lot: 1,
		MinQty: 1, MaxQty: 1000}})
	return x
}

func (x *exchange) do(c core.Command) core.Event {
	x.t.Helper()
	if _, err := x.pl.Submit(&c, x.r); err != nil {
		x.t.Fatal(err)
	}
	if err := x.pl.Wait(x.r); err != nil {
		x.t.Fatal(err)
	}
	return x.r.Result()
}

// traffic submits n rounds of p2p and trading commands (users first).
func (x *exchange) traffic(round, n int) {
	if round == 0 {
		x.do(core.Command{Kind: core.KindP2PCreateUser, User: 11, Text: "alice", Asset: 1, Amount: 1_000_000})
		x.do(core.Command{Kind: core.KindP2PCreateUser, User: 12, Text: "bob", Asset: 1, Amount: 1_000_000})
		k, _ := core.KeyFrom("btc")
		x.do(core.Command{Kind: core.KindSpotDeposit, User: 12, Asset: 2, Amount: 1_000_000, Key: k})
	}
	for i := 0; i < n; i++ {
		x.do(core.Command{Kind: core.KindP2PTransfer, User: 11, OrderID: 12, Asset: 1, Amount: 100})
		res := x.do(core.Command{Kind: core.KindP2PTransfer, User: 12, OrderID: 11, Asset: 1, Amount: 5, Qty: 1e12})
		x.do(core.Command{Kind: core.KindP2PCancel, User: 12, OrderID: res.OrderID})
		x.do(core.Command{Kind: core.KindP2PTick})
		x.do(core.Command{Kind: core.KindPlaceOrder, User: 12, Market: 1, Side: core.Sell, Type: core.Limit, TIF: core.GTC, Price: 10, Qty: 2})
		x.do(core.Command{Kind: core.KindPlaceOrder, User: 11, Market: 1, Side: core.Buy, Type: core.Limit, TIF: core.IOC, Price: 10, Qty: 2})
	}
}

// expected is every message id the WAL yields, in order, with its subject.
func (x *exchange) expected(prefix string) (ids, subjects []string) {
	x.t.Helper()
	f, err := x.pl.NewFollower(1)
	if err != nil {
		x.t.Fatal(err)
	}
	for f.NextSeq() <= x.pl.DurableSeq() {
		recs, err := f.Next(context.Background(), 1000)
		if err != nil {
			x.t.Fatal(err)
		}
		for _, r := range recs {
			ms, _ := appendMessages(nil, nil, newSubjects(prefix), r.Events, f.Processor())
			for _, m := range ms {
				ids = append(ids, MsgID(r.Cmd.Seq, m.idx))
				subjects = append(subjects, m.subject)
			}
		}
	}
	return ids, subjects
}

// stored reads the whole stream: ids, subjects and payloads.
func stored(t *testing.T, url, name string) (ids, subjects []string, data [][]byte) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream seq %d: %v", seq, err)
		}
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
		subjects = append(subjects, m.Subject)
		data = append(data, m.Data)
	}
	return ids, subjects, data
}

// run starts p and returns its stop function.
func run(p *Publisher, wal WAL) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx, wal) }()
	return func() { cancel(); <-done }
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sameList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d stored, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: #%d is %q, want %q", what, i, got[i], want[i])
		}
	}
}

func TestPublishExactlyOnceAcrossRestarts(t *testing.T) {
	url := natsURL(t)
	name, prefix := testStream(t, url)
	x := newExchange(t)
	x.traffic(0, 20)
	newPub := func() *Publisher {
		p := New(url, quiet())
		p.Stream, p.Prefix = name, prefix
		return p
	}
	p := newPub()
	stop := run(p, x.pl)
	waitFor(t, "the first catch-up", 10*time.Second, func() bool { return p.Checkpoint() == x.pl.DurableSeq() })
	stop()
	// Stopped at arbitrary points, with traffic in between: each restart
	// resumes after the stream's last message.
	for round := 1; round <= 5; round++ {
		x.traffic(round, 10)
		p = newPub()
		stop = run(p, x.pl)
		time.Sleep(time.Duration(round) * time.Millisecond)
		stop()
	}
	p = newPub()
	stop = run(p, x.pl)
	defer stop()
	waitFor(t, "the final catch-up", 10*time.Second, func() bool { return p.Checkpoint() == x.pl.DurableSeq() })
	wantIDs, wantSubj := x.expected(prefix)
	ids, subj, data := stored(t, url, name)
	sameList(t, "ids", ids, wantIDs)
	sameList(t, "subjects", subj, wantSubj)
	// The payloads: spec 003 §7's transfer events, with seq and handles.
	kinds := map[string]int{}
	for i, d := range data {
		var m map[string]any
		if err := json.Unmarshal(d, &m); err != nil {
			t.Fatalf("%s: %v: %s", ids[i], err, d)
		}
		seq, _, _ := ParseMsgID(ids[i])
		if m["seq"] != float64(seq) || m["timestamp"] == "" {
			t.Fatalf("%s: %s", ids[i], d)
		}
		et := m["eventType"].(string)
		kinds[et]++
		if et == "TRANSFER_COMPLETED" && (m["fromUserId"] != "alice" || m["toUserId"] != "bob" || m["amount"] != 1.0) {
			t.Fatalf("completed: %s", d)
		}
		if et == "TRANSFER_CANCELLED" && m["reason"] != "User requested cancellation" {
			t.Fatalf("cancelled: %s", d)
		}
	}
	for _, k := range []string{"TRANSFER_CREATED", "TRANSFER_COMPLETED", "TRANSFER_CANCELLED", "TRADE", "ORDER", "BALANCE"} {
		if kinds[k] == 0 {
			t.Fatalf("no %s event: %v", k, kinds)
		}
	}
	if s := p.Stats(); s.Errors != 0 || s.Gaps != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestPublishResumesInsideACommand: the stream ends after event k of a
// command (a crash between two publishes of one command); the publisher
// continues with the event after k, never repeating one.
func TestPublishResumesInsideACommand(t *testing.T) {
	url := natsURL(t)
	name, prefix := testStream(t, url)
	x := newExchange(t)
	x.traffic(0, 3)
	wantIDs, wantSubj := x.expected(prefix)
	// Store a prefix of the messages by hand, ending inside a command.
	cut := -1
	for i := 1; i < len(wantIDs); i++ {
		a, _, _ := ParseMsgID(wantIDs[i-1])
		b, _, _ := ParseMsgID(wantIDs[i])
		if a == b && i > len(wantIDs)/2 {
			cut = i // wantIDs[:cut] ends between two events of one command
			break
		}
	}
	if cut < 0 {
		t.Fatal("no command with two events")
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	if _, err := EnsureStream(context.Background(), js, name, prefix); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < cut; i++ {
		if _, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: wantSubj[i], Data: []byte("{}")},
			jetstream.WithMsgID(wantIDs[i])); err != nil {
			t.Fatal(err)
		}
	}
	p := New(url, quiet())
	p.Stream, p.Prefix = name, prefix
	stop := run(p, x.pl)
	defer stop()
	waitFor(t, "catch-up", 10*time.Second, func() bool { return p.Checkpoint() == x.pl.DurableSeq() })
	ids, _, _ := stored(t, url, name)
	sameList(t, "ids", ids, wantIDs)
}

// TestPublishOutageDoesNotStallTrading routes the publisher through a proxy
// that is cut: the core keeps answering, the publisher lags and counts
// errors, and after the proxy is back it catches up with every event once.
func TestPublishOutageDoesNotStallTrading(t *testing.T) {
	url := natsURL(t)
	name, prefix := testStream(t, url)
	px := newProxy(t, url)
	x := newExchange(t)
	x.traffic(0, 5)
	p := New(px.url(), quiet())
	p.Stream, p.Prefix = name, prefix
	stop := run(p, x.pl)
	defer stop()
	waitFor(t, "catch-up", 10*time.Second, func() bool { return p.Checkpoint() == x.pl.DurableSeq() })
	px.cut(true)
	start := time.Now()
	x.traffic(1, 50) // the core answers without the broker
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("trading took %v during the outage", d)
	}
	time.Sleep(200 * time.Millisecond)
	if p.Checkpoint() == x.pl.DurableSeq() {
		t.Fatal("published through a cut proxy")
	}
	px.cut(false)
	waitFor(t, "catch-up after the outage", 20*time.Second, func() bool { return p.Checkpoint() == x.pl.DurableSeq() })
	wantIDs, _ := x.expected(prefix)
	ids, _, _ := stored(t, url, name)
	sameList(t, "ids", ids, wantIDs)
}

func TestMsgID(t *testing.T) {
	for _, c := range []struct {
		s   string
		seq core.Seq
		idx int
		ok  bool
	}{{"1-0", 1, 0, true}, {"42-7", 42, 7, true}, {"0-1", 0, 0, false}, {"01-1", 0, 0, false}, {"1-01", 0, 0, false},
		{"1", 0, 0, false}, {"-1", 0, 0, false}, {"1-", 0, 0, false}, {"1--1", 0, 0, false}, {"a-1", 0, 0, false},
		{"18446744073709551615-2147483647", 18446744073709551615, 2147483647, true}, {"18446744073709551616-0", 0, 0, false}} {
		seq, idx, ok := ParseMsgID(c.s)
		if ok != c.ok || seq != c.seq || idx != c.idx {
			t.Errorf("%q: %d %d %v", c.s, seq, idx, ok)
		}
		if ok && MsgID(seq, idx) != c.s {
			t.Errorf("%q does not round-trip", c.s)
		}
	}
}

func FuzzParseMsgID(f *testing.F) {
	for _, s := range []string{"1-0", "0-0", "18446744073709551615-0", "1-2147483648", "", "-", "1-1-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		seq, idx, ok := ParseMsgID(s)
		if ok && MsgID(seq, idx) != s {
			t.Fatalf("%q accepted but is not canonical", s)
		}
	})
}

// proxy is a TCP proxy to the NATS server that can be cut (every
// connection closed, new ones refused).
type proxy struct {
	t      *testing.T
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
}

func newProxy(t *testing.T, url string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := url[len("nats://"):]
	px := &proxy{t: t, ln: ln, target: host}
	go px.accept()
	t.Cleanup(func() { ln.Close(); px.cut(true) })
	return px
}

func (px *proxy) url() string { return "nats://" + px.ln.Addr().String() }

func (px *proxy) accept() {
	for {
		c, err := px.ln.Accept()
		if err != nil {
			return
		}
		px.mu.Lock()
		down := px.down
		px.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", px.target)
		if err != nil {
			c.Close()
			continue
		}
		px.mu.Lock()
		px.conns = append(px.conns, c, u)
		px.mu.Unlock()
		go func() { _, _ = io.Copy(u, c); u.Close() }()
		go func() { _, _ = io.Copy(c, u); c.Close() }()
	}
}

func (px *proxy) cut(down bool) {
	px.mu.Lock()
	defer px.mu.Unlock()
	px.down = down
	if down {
		for _, c := range px.conns {
			c.Close()
		}
		px.conns = nil
	}
}
