package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/stream"
)

// bench ws: the WebSocket fan-out (package stream) beside the pipeline it
// follows, in one process on a fresh data dir. Each round measures, in
// this order:
//
//   - max: the pipeline's maximum (closed loop: Producers goroutines each
//     submitting an order and waiting for its durable answer), no hub;
//   - off: an open loop at half of that maximum, no hub: the orders
//     answered per second and their ack latency (from each order's
//     scheduled time, so a stall is not hidden by the producers waiting);
//   - on: the same offered rate with the hub following the WAL and
//     Subscribers sockets subscribed to Channels of the one market:
//     achieved rate and ack latency again, messages and bytes delivered
//     per second (over every socket), and the latency from an order's
//     acknowledgement to the arrival of the depth diff covering its seq
//     on the first wsSampled sockets;
//   - closed: the closed loop again with the fan-out on (its maximum);
//   - max again, hub stopped (the machine drifts: the round's maximum is
//     the mean of the two).
//
// The target (issue 36) is the pipeline's throughput at the fixed offered
// rate with the fan-out on vs off (Ratio >= 0.9); ClosedRatio, the
// maxima's ratio, is reported beside it: here the subscribers' own
// process shares the 2 cores with the pipeline, so it also measures the
// clients. The report gives the medians over the rounds.

// WSConfig configures RunWS.
type WSConfig struct {
	Dir         string
	Subscribers int
	Producers   int
	Duration    time.Duration // of each phase
	Rounds      int
	Frame       time.Duration // the hub's conflation frame (0: stream.DefaultFrame)
	// Channels each subscriber takes on the one market (nil:
	// WSDefaultChannels).
	Channels []string
	Seed     uint64
	Logger   *slog.Logger
	// ClientCmd, if set, starts the subscribers in a child process: the
	// command and its first arguments (bench ws-clients), to which
	// --addr and --subscribers are added. Empty: in this process.
	ClientCmd []string
	ClientEnv []string // added to the child's environment
}

// WSDefaultChannels are what each subscriber takes by default: the
// conflated market data (at most one message per channel per frame). The
// trades channel carries every trade; at half the pipeline's maximum
// (tens of thousands of trades a second on the one market) it is some MB/s
// per socket, which 1,000 sockets over loopback on 2 cores cannot carry:
// `--channels depth,trades,ticker` measures that bound (bytes/s).
var WSDefaultChannels = []string{"depth", "ticker"}

// WSRound is one round's measurements.
type WSRound struct {
	OffCmdsPerSec float64 `json:"off_cmds_per_sec"` // the closed loop's maximum, fan-out off
	OnCmdsPerSec  float64 `json:"on_cmds_per_sec"`  // the closed loop's maximum, fan-out on
	ClosedRatio   float64 `json:"closed_ratio"`     // OnCmdsPerSec / OffCmdsPerSec
	OfferedPerSec float64 `json:"offered_per_sec"`  // half of the round's first maximum
	// At OfferedPerSec, fan-out off and on: orders answered per second,
	// their ratio (the target), and ack latency from the scheduled time.
	AchievedOffPerSec    float64 `json:"achieved_off_per_sec"`
	AchievedPerSec       float64 `json:"achieved_per_sec"`
	Ratio                float64 `json:"ratio"`
	AckP99OffMs          float64 `json:"ack_p99_off_ms"`
	AckP99OnMs           float64 `json:"ack_p99_on_ms"`
	DeliveredMsgPerSec   float64 `json:"delivered_msgs_per_sec"`
	DeliveredBytesPerSec float64 `json:"delivered_bytes_per_sec"`
	LatencyP50ms         float64 `json:"latency_p50_ms"` // ack -> delivery
	LatencyP99ms         float64 `json:"latency_p99_ms"`
	Dropped              uint64  `json:"dropped"`
}

// WSResult is bench ws's report (medians over the rounds).
type WSResult struct {
	Subscribers int       `json:"subscribers"`
	Producers   int       `json:"producers"`
	Channels    []string  `json:"channels"`
	FrameMs     float64   `json:"frame_ms"`
	Rounds      []WSRound `json:"rounds"`
	WSRound               // the medians
}

// wsUsers trade on market 1 (USD scale 2, BTC scale 0).
const wsUsers = 1000

type wsBench struct {
	cfg  WSConfig
	pl   *journal.Pipeline
	reg  *gateway.Registry
	auth *gateway.Authenticator
	acks []atomic.Int64 // unix ns of each seq's acknowledgement, from base
	base atomic.Uint64
}

// RunWS runs bench ws.
func RunWS(cfg WSConfig) (WSResult, error) {
	if cfg.Subscribers <= 0 || cfg.Producers <= 0 || cfg.Duration <= 0 || cfg.Rounds <= 0 {
		return WSResult{}, fmt.Errorf("bench ws: subscribers, producers, duration and rounds must be > 0")
	}
	if cfg.Frame <= 0 {
		cfg.Frame = stream.DefaultFrame
	}
	if len(cfg.Channels) == 0 {
		cfg.Channels = WSDefaultChannels
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	dir := filepath.Join(cfg.Dir, "ws-bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return WSResult{}, err
	}
	defer os.RemoveAll(dir)
	pl, err := journal.Start(journal.Config{Dir: dir, Logger: cfg.Logger, TruncateLimit: func() core.Seq { return 0 }})
	if err != nil {
		return WSResult{}, err
	}
	defer pl.Close()
	b := &wsBench{cfg: cfg, pl: pl}
	if err := b.setup(); err != nil {
		return WSResult{}, err
	}
	res := WSResult{Subscribers: cfg.Subscribers, Producers: cfg.Producers, Channels: cfg.Channels, FrameMs: float64(cfg.Frame) / 1e6}
	for r := 0; r < cfg.Rounds; r++ {
		rd, err := b.round(uint64(r))
		if err != nil {
			return res, err
		}
		res.Rounds = append(res.Rounds, rd)
	}
	med := func(f func(WSRound) float64) float64 {
		v := make([]float64, 0, len(res.Rounds))
		for _, r := range res.Rounds {
			v = append(v, f(r))
		}
		return median(v)
	}
	res.OffCmdsPerSec = med(func(r WSRound) float64 { return r.OffCmdsPerSec })
	res.OnCmdsPerSec = med(func(r WSRound) float64 { return r.OnCmdsPerSec })
	res.ClosedRatio = med(func(r WSRound) float64 { return r.ClosedRatio })
	res.OfferedPerSec = med(func(r WSRound) float64 { return r.OfferedPerSec })
	res.AchievedOffPerSec = med(func(r WSRound) float64 { return r.AchievedOffPerSec })
	res.AchievedPerSec = med(func(r WSRound) float64 { return r.AchievedPerSec })
	res.Ratio = med(func(r WSRound) float64 { return r.Ratio })
	res.AckP99OffMs = med(func(r WSRound) float64 { return r.AckP99OffMs })
	res.AckP99OnMs = med(func(r WSRound) float64 { return r.AckP99OnMs })
	res.DeliveredMsgPerSec = med(func(r WSRound) float64 { return r.DeliveredMsgPerSec })
	res.DeliveredBytesPerSec = med(func(r WSRound) float64 { return r.DeliveredBytesPerSec })
	// Latencies: the rounds whose sampled sockets recorded any (a round
	// whose sampled sockets were dropped has none).
	var p50, p99 []float64
	for _, r := range res.Rounds {
		if r.LatencyP99ms > 0 {
			p50, p99 = append(p50, r.LatencyP50ms), append(p99, r.LatencyP99ms)
		}
	}
	if len(p99) > 0 {
		res.LatencyP50ms, res.LatencyP99ms = median(p50), median(p99)
	}
	for _, r := range res.Rounds {
		res.Dropped += r.Dropped
	}
	return res, nil
}

func (b *wsBench) do(c core.Command, r *journal.Reply) (core.Seq, error) {
	seq, err := b.pl.Submit(&c, r)
	if err != nil {
		return 0, err
	}
	return seq, b.pl.Wait(r)
}

func (b *wsBench) setup() error {
	mcfg := core.MarketCfg{Base: 2, Quote: 1, Tick: 1, Lot: 1, MinQty: 1, MaxQty: 1_000_000}
	var err error
	b.reg, err = gateway.NewRegistry([]gateway.Asset{{ID: 1, Symbol: "USD", Scale: 2}, {ID: 2, Symbol: "BTC"}},
		[]gateway.MarketSpec{{ID: 1, Symbol: "BTC-USD", Cfg: mcfg}})
	if err != nil {
		return err
	}
	b.auth, err = gateway.NewAuthenticator([]byte("bench-ws-secret-0123456789abcdef0123456789"))
	if err != nil {
		return err
	}
	r := journal.NewReply()
	cmds := []core.Command{{Kind: core.KindConfigAsset, Asset: 1, BaseScale: 2}, {Kind: core.KindConfigAsset, Asset: 2},
		{Kind: core.KindConfigMarket, Market: 1, Cfg: mcfg}}
	for u := core.UserID(1); u <= wsUsers; u++ {
		for a := core.AssetID(1); a <= 2; a++ {
			k, _ := core.KeyFrom("ws-" + strconv.Itoa(int(u)) + "-" + strconv.Itoa(int(a)))
			cmds = append(cmds, core.Command{Kind: core.KindSpotDeposit, User: u, Asset: a, Amount: 1 << 50, Key: k})
		}
	}
	for _, c := range cmds {
		if _, err := b.do(c, r); err != nil {
			return err
		}
	}
	return nil
}

// order is a random order around 1000: half resting (GTC), half crossing (IOC).
func order(rng *rand.Rand) core.Command {
	side := core.Side(1 + rng.IntN(2))
	c := core.Command{Kind: core.KindPlaceOrder, User: core.UserID(1 + rng.IntN(wsUsers)), Market: 1, Side: side,
		Type: core.Limit, TIF: core.GTC, Qty: core.Units(1 + rng.IntN(5))}
	off := core.Price(1 + rng.IntN(10))
	if rng.IntN(2) == 0 { // crossing
		c.TIF = core.IOC
		off = -off
	}
	if side == core.Buy {
		c.Price = 1000 - off
	} else {
		c.Price = 1000 + off
	}
	return c
}

// load submits orders for d: closed loop (rate 0) or paced at rate/s in
// total. It returns the orders answered per second and, paced, the ack
// latency's 99th percentile in ms, from each order's scheduled time (a
// producer that falls behind its schedule counts the wait).
func (b *wsBench) load(d time.Duration, rate float64, seed uint64, record bool) (float64, float64, error) {
	var n atomic.Int64
	var firstErr atomic.Pointer[error]
	var mu sync.Mutex
	hist := newLatencyHist()
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for p := 0; p < b.cfg.Producers; p++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(p)))
			r := journal.NewReply()
			var interval time.Duration
			next := start
			var mine *hdrhistogram.Histogram
			if rate > 0 {
				interval = time.Duration(float64(b.cfg.Producers) / rate * 1e9)
				next = start.Add(interval * time.Duration(p) / time.Duration(b.cfg.Producers))
				mine = newLatencyHist()
				defer func() { mu.Lock(); hist.Merge(mine); mu.Unlock() }()
			}
			for {
				sched := next
				if interval > 0 {
					if w := time.Until(next); w > 0 {
						time.Sleep(w)
					}
					next = next.Add(interval)
				}
				if time.Now().After(end) {
					return
				}
				seq, err := b.do(order(rng), r)
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				now := time.Now()
				if mine != nil {
					_ = mine.RecordValue(min(max(int64(now.Sub(sched)), latencyMin), latencyMax))
				}
				if record {
					if i := int64(seq) - int64(b.base.Load()); i >= 0 && i < int64(len(b.acks)) {
						b.acks[i].Store(now.UnixNano())
					}
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return 0, 0, *e
	}
	return float64(n.Load()) / time.Since(start).Seconds(), round2(float64(hist.ValueAtQuantile(99)) / 1e6), nil
}

// wsClients are the subscribers: in a child process (WSConfig.ClientCmd,
// so their reading does not share the Go scheduler with the pipeline, as
// on a real venue), or in this process.
type wsClients struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	local *WSClientSet
}

// WSClientSet is a set of subscriber sockets (bench ws-clients).
type WSClientSet struct {
	subs     []*wsSub
	counting atomic.Bool
	mu       sync.Mutex
	samples  [][3]int64 // prev_seq, last_seq, unix ns received (sampled sockets)
}

// wsSub is one subscriber socket.
type wsSub struct {
	c      *websocket.Conn
	msgs   atomic.Int64
	bytes  atomic.Int64
	sample bool
}

// WSClientReport is what a client set measured while counting.
type WSClientReport struct {
	Msgs    int64      `json:"msgs"`
	Bytes   int64      `json:"bytes"`
	Samples [][3]int64 `json:"samples"`
}

// wsSampled is how many sockets record latencies (the first ones).
const wsSampled = 8

// DialWSClients opens n subscribers to channels of BTC-USD (depth among
// them) at addr and waits for every depth snapshot; the first wsSampled
// record latencies.
func DialWSClients(addr string, n int, channels []string) (*WSClientSet, error) {
	if !slices.Contains(channels, "depth") {
		return nil, fmt.Errorf("bench ws: the subscribers' channels must include depth (its diffs give the latency)")
	}
	cs := &WSClientSet{subs: make([]*wsSub, n)}
	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	for i := range cs.subs {
		c, _, err := d.Dial("ws://"+addr+stream.Path, nil)
		if err != nil {
			cs.Close()
			return nil, fmt.Errorf("bench ws: subscriber %d: %w", i, err)
		}
		cs.subs[i] = &wsSub{c: c, sample: i < wsSampled}
		for _, ch := range channels {
			if err := c.WriteMessage(websocket.TextMessage, []byte(`{"op":"subscribe","channel":"`+ch+`","market":"BTC-USD"}`)); err != nil {
				cs.Close()
				return nil, err
			}
		}
	}
	var ready sync.WaitGroup
	for _, s := range cs.subs {
		ready.Add(1)
		go cs.read(s, &ready)
	}
	done := make(chan struct{})
	go func() { ready.Wait(); close(done) }()
	select {
	case <-done:
		return cs, nil
	case <-time.After(60 * time.Second):
		cs.Close()
		return nil, fmt.Errorf("bench ws: subscribers not all subscribed within 60 s")
	}
}

// Count starts counting (and sampling) from now; Report stops and returns it.
func (cs *WSClientSet) Count() {
	for _, s := range cs.subs {
		s.msgs.Store(0)
		s.bytes.Store(0)
	}
	cs.counting.Store(true)
}

// Report stops counting and returns what was counted.
func (cs *WSClientSet) Report() WSClientReport {
	cs.counting.Store(false)
	var r WSClientReport
	for _, s := range cs.subs {
		r.Msgs += s.msgs.Load()
		r.Bytes += s.bytes.Load()
	}
	cs.mu.Lock()
	r.Samples, cs.samples = cs.samples, nil
	cs.mu.Unlock()
	return r
}

// Close closes every socket.
func (cs *WSClientSet) Close() {
	for _, s := range cs.subs {
		if s != nil {
			_ = s.c.Close()
		}
	}
}

var (
	keyLast = []byte(`"last_seq":`)
	keyPrev = []byte(`"prev_seq":`)
)

func seqAfter(m, key []byte) (int64, bool) {
	i := bytes.Index(m, key)
	if i < 0 {
		return 0, false
	}
	var v int64
	j := i + len(key)
	for ; j < len(m) && m[j] >= '0' && m[j] <= '9'; j++ {
		v = v*10 + int64(m[j]-'0')
	}
	return v, j > i+len(key)
}

func (cs *WSClientSet) read(s *wsSub, ready *sync.WaitGroup) {
	snap := false
	defer func() {
		if !snap {
			ready.Done()
		}
	}()
	for {
		_, m, err := s.c.ReadMessage()
		if err != nil {
			return
		}
		if !snap && bytes.Contains(m, []byte(`"type":"snapshot"`)) {
			snap = true
			ready.Done()
		}
		if !cs.counting.Load() {
			continue
		}
		s.msgs.Add(1)
		s.bytes.Add(int64(len(m)))
		if !s.sample || !bytes.Contains(m, []byte(`"type":"diff"`)) {
			continue
		}
		now := time.Now().UnixNano()
		last, ok1 := seqAfter(m, keyLast)
		prev, ok2 := seqAfter(m, keyPrev)
		if ok1 && ok2 {
			cs.mu.Lock()
			cs.samples = append(cs.samples, [3]int64{prev, last, now})
			cs.mu.Unlock()
		}
	}
}

// RunWSClients is `bench ws-clients`: n subscribers to addr; it prints
// "ready" once they are subscribed, then answers the lines of in:
// "count" starts counting, "report" prints the WSClientReport as JSON;
// at the end of in it closes the sockets.
func RunWSClients(addr string, n int, channels []string, in io.Reader, out io.Writer) error {
	cs, err := DialWSClients(addr, n, channels)
	if err != nil {
		return err
	}
	defer cs.Close()
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		switch sc.Text() {
		case "count":
			cs.Count()
		case "report":
			b, err := json.Marshal(cs.Report())
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s\n", b)
		}
	}
	return sc.Err()
}

func (b *wsBench) startClients(addr string) (*wsClients, error) {
	if len(b.cfg.ClientCmd) == 0 {
		cs, err := DialWSClients(addr, b.cfg.Subscribers, b.cfg.Channels)
		return &wsClients{local: cs}, err
	}
	args := append(append([]string(nil), b.cfg.ClientCmd[1:]...), "--addr", addr, "--subscribers", strconv.Itoa(b.cfg.Subscribers),
		"--channels", strings.Join(b.cfg.Channels, ","))
	cmd := exec.Command(b.cfg.ClientCmd[0], args...)
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), b.cfg.ClientEnv...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &wsClients{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	line, err := c.out.ReadString('\n')
	if err != nil || line != "ready\n" {
		c.close()
		return nil, fmt.Errorf("bench ws: the clients' process: %q %v", line, err)
	}
	return c, nil
}

func (c *wsClients) count() error {
	if c.local != nil {
		c.local.Count()
		return nil
	}
	_, err := io.WriteString(c.stdin, "count\n")
	return err
}

func (c *wsClients) report() (WSClientReport, error) {
	if c.local != nil {
		return c.local.Report(), nil
	}
	var r WSClientReport
	if _, err := io.WriteString(c.stdin, "report\n"); err != nil {
		return r, err
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(line, &r)
}

func (c *wsClients) close() {
	if c.local != nil {
		c.local.Close()
		return
	}
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

func (b *wsBench) round(r uint64) (WSRound, error) {
	var rd WSRound
	max1, _, err := b.load(b.cfg.Duration, 0, r*8, false)
	if err != nil {
		return rd, err
	}
	rate := max1 / 2
	offGot, offP99, err := b.load(b.cfg.Duration, rate, r*8+1, false)
	if err != nil {
		return rd, err
	}
	hub, addr, stop, err := b.startHub()
	if err != nil {
		return rd, err
	}
	cl, err := b.startClients(addr)
	if err != nil {
		stop()
		return rd, err
	}
	// The same offered rate with the fan-out on; acks recorded for the
	// ack -> delivery latency.
	b.acks = make([]atomic.Int64, int(rate*b.cfg.Duration.Seconds()*1.5)+1024)
	b.base.Store(uint64(b.pl.DurableSeq()) + 1)
	if err := cl.count(); err != nil {
		cl.close()
		stop()
		return rd, err
	}
	t := time.Now()
	got, onP99, err := b.load(b.cfg.Duration, rate, r*8+2, true)
	el := time.Since(t).Seconds()
	// Latencies need the frames covering every acknowledged seq: wait
	// (bounded) until the hub has sent them, and a little for the wire.
	for end, d := time.Now().Add(30*time.Second), uint64(b.pl.DurableSeq()); hub.Stats().FlushedSeq < d && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	rep, rerr := cl.report()
	if err == nil {
		err = rerr
	}
	var on float64
	if err == nil {
		on, _, err = b.load(b.cfg.Duration, 0, r*8+3, false)
	}
	rd.Dropped = hub.Stats().Slow
	cl.close()
	stop()
	if err != nil {
		return rd, err
	}
	max2, _, err := b.load(b.cfg.Duration, 0, r*8+4, false)
	if err != nil {
		return rd, err
	}
	h := newLatencyHist()
	base := int64(b.base.Load())
	for _, sm := range rep.Samples {
		for q := max(sm[0]+1, base); q <= sm[1]; q++ {
			if i := q - base; i < int64(len(b.acks)) {
				if at := b.acks[i].Load(); at > 0 {
					_ = h.RecordValue(max(sm[2]-at, latencyMin))
				}
			}
		}
	}
	off := (max1 + max2) / 2
	rd.OffCmdsPerSec, rd.OnCmdsPerSec = round1(off), round1(on)
	rd.ClosedRatio = roundSig3(on / off)
	rd.OfferedPerSec, rd.AchievedOffPerSec, rd.AchievedPerSec = round1(rate), round1(offGot), round1(got)
	rd.Ratio = roundSig3(got / offGot)
	rd.AckP99OffMs, rd.AckP99OnMs = offP99, onP99
	rd.DeliveredMsgPerSec = round1(float64(rep.Msgs) / el)
	rd.DeliveredBytesPerSec = round1(float64(rep.Bytes) / el)
	rd.LatencyP50ms = round2(float64(h.ValueAtQuantile(50)) / 1e6)
	rd.LatencyP99ms = round2(float64(h.ValueAtQuantile(99)) / 1e6)
	return rd, nil
}

// startHub runs a hub over the pipeline and an HTTP server for it.
func (b *wsBench) startHub() (*stream.Hub, string, func(), error) {
	hub := stream.New(stream.Config{Registry: b.reg, Auth: b.auth, WAL: b.pl, Logger: b.cfg.Logger, Frame: b.cfg.Frame,
		MaxConns: b.cfg.Subscribers + 10})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		wg.Wait()
		return nil, "", nil, err
	}
	srv := &fasthttp.Server{Handler: hub.Wrap(func(c *fasthttp.RequestCtx) { c.SetStatusCode(404) })}
	wg.Go(func() { _ = srv.Serve(ln) })
	return hub, ln.Addr().String(), func() {
		hub.Close(10 * time.Second)
		_ = srv.Shutdown()
		cancel()
		wg.Wait()
	}, nil
}
