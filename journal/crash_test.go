//go:build unix

package journal

// TestCrashRecovery proves the durability contract with real crashes: the
// journaling pipeline runs in a child process (crash_child_test.go) and is
// SIGKILLed at seeded random moments, some during exec, init and recovery,
// most under load, many inside snapshot writes; every 5th round starts with
// a half-written snapshot temp file planted beside the data. After every
// kill the data dir is recovered the way the next start would recover it,
// and every command the child reported acknowledged must be there, every
// journaled command must be exactly the one submitted at its seq, the
// recovered state hash must equal a clean replay, and the invariants must
// hold. The next round restarts the child on the same dir, which must come
// up at exactly the seq the parent recovered.
//
// Clean replay: the parent keeps its own core.Processor fed with the
// workload's commands (a pure function of seed and seq) for seqs 1..LastSeq,
// independent of the WAL and of snapshots. In the "keep-wal" run the WAL is
// never truncated (TruncateLimit = keepAll) and a replay of the whole WAL
// ignoring snapshots (RecoverConfig{IgnoreSnapshots, ReadOnly}) must give
// the same hash too; the "truncate-wal" run uses production truncation
// behind the oldest kept snapshot, so only the reference replay is possible.
//
// Replay a failure with -crash.seed=N (the seed is printed). The file also
// holds TestCrashPoisonRebuildRace and TestCrashRestartAfterSelfCross, for
// two bugs the crash test found.

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ubscore/ubscore/core"
)

var crashSeedFlag = flag.Uint64("crash.seed", 0, "seed of TestCrashRecovery (0: random)")

// Rounds and timing. Every round is one SIGKILL.
const (
	crashRounds      = 24
	crashRoundsShort = 12                    // per data dir: still 2 planted temp files, 2 full replays, ~4 start-up kills; a new seed each run
	crashEarlyPct    = 30                    // % of rounds killed at a random moment of start-up (exec, init, recovery)
	crashRunMin      = 20 * time.Millisecond // kill this long after the first ack, at least
	crashRunMax      = 300 * time.Millisecond
	crashRunMaxShort = 120 * time.Millisecond
	crashFullEvery   = 5                // keep-wal: replay the whole WAL every 5th round and at the end
	crashPlantEvery  = 5                // every 5th round starts with a leftover snapshot temp file
	crashStartWait   = 30 * time.Second // bound on the child's start-up (race builds are slow)
	crashExitWait    = 10 * time.Second // bound on a killed child's exit
	crashStderrKeep  = 16 << 10
)

func TestCrashRecovery(t *testing.T) {
	seed := *crashSeedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -crash.seed=%d)", seed, seed)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rounds, runMax := crashRounds, crashRunMax
	if testing.Short() {
		rounds, runMax = crashRoundsShort, crashRunMaxShort
	}
	for _, mode := range []string{"keep", "truncate"} {
		t.Run(mode+"-wal", func(t *testing.T) {
			h := &crashHarness{t: t, exe: exe, dir: t.TempDir(), seed: seed, truncate: mode == "truncate",
				rng: rand.New(rand.NewPCG(seed, uint64(len(mode)))), ref: core.New(crashCoreConfig),
				runMax: runMax, rounds: rounds, startup: 200 * time.Millisecond, phases: map[string]int{}}
			for round := 1; round <= rounds; round++ {
				h.round(round)
			}
			h.summary()
		})
	}
}

// crashHarness is the parent's state across the rounds of one data dir.
type crashHarness struct {
	t        *testing.T
	exe, dir string
	seed     uint64
	truncate bool
	rng      *rand.Rand
	runMax   time.Duration
	rounds   int

	ref      *core.Processor // clean replay of the workload, 1..ref.LastSeq()
	last     core.Seq        // LastSeq recovered after the previous round
	verified core.Seq        // WAL entries up to here were compared with the workload
	walFirst core.Seq        // the WAL's first seq after the last recovery

	startup   time.Duration  // exec to "start" line, as last measured
	phases    map[string]int // kills per phase of the child
	acks      []int          // acked commands per round
	snapLeft  int            // kills that left a half-written snapshot (temp file)
	truncLeft int            // kills that left an unfinished WAL front truncation
	snapshots int            // rounds whose recovery started from a snapshot
	poisoned  int
}

// crashChild is one child process and what it printed.
type crashChild struct {
	cmd        *exec.Cmd
	stderr     crashTail
	started    chan core.Seq // the base seq the child recovered to
	firstAck   chan struct{} // closed at the first acked line
	done       chan struct{} // closed when stdout reached EOF
	t0         time.Time     // exec
	mu         sync.Mutex    // guards the fields below
	recovering bool          // the child is past init and inside Start
	sawStart   bool
	startup    time.Duration // exec to start line
	ok         bool          // the child reported success (poison-race)
	base       core.Seq      // from the start line
	maxAcked   core.Seq      // highest acked seq
	acked      int           // acked lines
	bad        []string      // protocol violations and child errors
	waitOnce   sync.Once
	waitErr    error
}

func (h *crashHarness) round(round int) {
	t := h.t
	planted := ""
	if round%crashPlantEvery == 0 {
		planted = h.plantSnapshotTemp(round)
	}
	early := h.rng.IntN(100) < crashEarlyPct && planted == ""
	var delay time.Duration
	if early { // somewhere in the start-up the previous round measured, or just after it
		delay = time.Duration(h.rng.Int64N(int64(h.startup) * 5 / 4))
	} else {
		delay = crashRunMin + time.Duration(h.rng.Int64N(int64(h.runMax-crashRunMin)))
	}

	ch := h.startChild()
	if !early {
		select {
		case <-ch.firstAck:
		case <-ch.done: // died on its own: reported below
		case <-time.After(crashStartWait):
			ch.kill()
			t.Fatalf("round %d: no ack within %v\n%s", round, crashStartWait, ch.report())
		}
	}
	select {
	case <-time.After(delay):
	case <-ch.done:
	}
	ch.kill()
	// A child that died on its own is a failure, but it is a crash like any
	// other: recovery is still checked, and the rounds go on.
	if err := ch.wait(); !crashKilled(err) {
		t.Errorf("round %d: the child died on its own before the SIGKILL (%v)\n%s", round, err, ch.report())
	} else if s := ch.stderr.String(); strings.Contains(s, "DATA RACE") || strings.Contains(s, "panic: ") ||
		strings.Contains(s, "fatal error:") {
		t.Errorf("round %d: child failed\n%s", round, ch.report())
	}

	ch.mu.Lock()
	base, maxAcked, acked, bad := ch.base, ch.maxAcked, ch.acked, ch.bad
	phase := "exec/init"
	switch {
	case ch.sawStart:
		phase = "running"
		h.startup = ch.startup
	case ch.recovering:
		phase = "recovery"
	}
	ch.mu.Unlock()
	h.phases[phase]++
	if len(bad) > 0 {
		t.Errorf("round %d: %s", round, strings.Join(bad, "; "))
	}
	select {
	case <-ch.started:
		if base != h.last {
			t.Errorf("round %d: child recovered to seq %d, the parent had recovered %d", round, base, h.last)
		}
		if planted != "" {
			if _, err := os.Stat(planted); err == nil {
				t.Errorf("round %d: child started but left the stale snapshot temp file %s", round, planted)
			}
		}
	default: // killed before it finished starting
	}
	snapTmp, walTmp := h.countLeftovers()
	if snapTmp > 0 {
		h.snapLeft++
	}
	if walTmp > 0 {
		h.truncLeft++
	}
	h.acks = append(h.acks, acked)

	h.check(round, maxAcked)
	after := "start"
	if !early {
		after = "first ack"
	}
	started := "child killed before it had recovered"
	if phase == "running" {
		started = fmt.Sprintf("child recovered to %6d, acked %5d (up to %6d)", base, acked, maxAcked)
	}
	t.Logf("round %2d: killed %3dms after %-9s (in %-9s): %s; parent recovered to %6d",
		round, delay.Milliseconds(), after, phase, started, h.last)
}

// check recovers the dir as the next start would and verifies it.
func (h *crashHarness) check(round int, maxAcked core.Seq) {
	t := h.t
	rec, err := Recover(RecoverConfig{Dir: h.dir, SegmentSize: crashSegmentSize, Core: crashCoreConfig,
		Logger: quietLog()})
	if err != nil {
		t.Fatalf("round %d: recovery after the kill failed: %v", round, err)
	}
	defer rec.WAL.Close()
	last := rec.Proc.LastSeq()
	if last < maxAcked {
		t.Fatalf("round %d: LOST ACKED COMMANDS: recovered to seq %d, seq %d was acknowledged", round, last, maxAcked)
	}
	if last < h.last {
		t.Fatalf("round %d: recovered to seq %d, the previous round had recovered %d", round, last, h.last)
	}
	if rec.SnapshotSeq > 0 {
		h.snapshots++
	}
	if v := rec.Proc.CheckInvariants(); len(v) != 0 {
		t.Fatalf("round %d: invariants broken after recovery: %+v", round, v)
	}

	// Every journaled command is the one the workload submitted at its seq.
	first := core.Seq(rec.WAL.FirstSeq())
	if !h.truncate && first != 1 {
		t.Fatalf("round %d: WAL starts at seq %d although truncation is off", round, first)
	}
	if core.Seq(rec.WAL.LastSeq()) != last {
		t.Fatalf("round %d: WAL ends at %d, state at %d", round, rec.WAL.LastSeq(), last)
	}
	from := max(first, h.verified+1)
	if round%4 == 0 {
		from = first // now and then, re-read everything still held
	}
	var got, want core.Command
	err = rec.WAL.Iterate(uint64(from), func(seq uint64, payload []byte) error {
		if err := core.DecodeCommand(payload, &got); err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		crashCommand(h.seed, crashPoison(h.truncate), core.Seq(seq), &want)
		want.Seq, want.Time = core.Seq(seq), got.Time
		if got != want {
			return fmt.Errorf("seq %d holds %+v, the workload submitted %+v", seq, got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("round %d: WAL content: %v", round, err)
	}
	h.verified, h.walFirst = last, first

	// The state equals a clean replay of the workload.
	var c core.Command
	for s := h.ref.LastSeq() + 1; s <= last; s++ {
		crashCommand(h.seed, crashPoison(h.truncate), s, &c)
		c.Seq = s
		if c.Kind == core.KindDebugPanic && !h.ref.Halted() {
			h.ref.Discard(&c, core.Rollback{}) // what the pipeline and Recover do with a poison command
			h.poisoned++
			continue
		}
		h.ref.Apply(&c)
	}
	if v := h.ref.CheckInvariants(); len(v) != 0 {
		t.Fatalf("round %d: invariants broken in the clean replay at seq %d: %+v", round, last, v)
	}
	if want := h.ref.StateHash(); rec.StateHash != want {
		t.Fatalf("round %d: recovered state hash %s at seq %d (snapshot %d), clean replay gives %s",
			round, rec.StateHash, last, rec.SnapshotSeq, want)
	}
	if !h.truncate && (round%crashFullEvery == 0 || round == h.rounds) {
		full, err := Recover(RecoverConfig{Dir: h.dir, IgnoreSnapshots: true, ReadOnly: true, Core: crashCoreConfig,
			Logger: quietLog()})
		if err != nil {
			t.Fatalf("round %d: replay of the whole WAL: %v", round, err)
		}
		full.WAL.Close()
		if full.StateHash != rec.StateHash || full.Proc.LastSeq() != last {
			t.Fatalf("round %d: snapshot+WAL recovery %s@%d, whole-WAL replay %s@%d", round, rec.StateHash, last,
				full.StateHash, full.Proc.LastSeq())
		}
	}
	h.last = last
}

// plantSnapshotTemp leaves what a kill in the middle of a snapshot write
// leaves: a temp file holding part of a snapshot. Start-up must ignore and
// remove it.
func (h *crashHarness) plantSnapshotTemp(round int) string {
	dir := filepath.Join(h.dir, SnapshotDir)
	infos, err := (&SnapshotStore{dir: dir}).List()
	if err != nil || len(infos) == 0 {
		return ""
	}
	data, err := os.ReadFile(infos[len(infos)-1].Path)
	if err != nil {
		h.t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%splanted%d%s", snapPrefix, round, snapTempSuffix))
	if err := os.WriteFile(path, data[:len(data)/2], 0o640); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// countLeftovers counts files a kill left half-done: snapshot temp files,
// and the temp/START files of an interrupted WAL front truncation.
func (h *crashHarness) countLeftovers() (snap, wal int) {
	des, _ := os.ReadDir(filepath.Join(h.dir, SnapshotDir))
	for _, de := range des {
		if n := de.Name(); strings.HasSuffix(n, snapTempSuffix) && !strings.Contains(n, "planted") {
			snap++
		}
	}
	des, _ = os.ReadDir(filepath.Join(h.dir, WALDir))
	for _, de := range des {
		if n := de.Name(); strings.HasSuffix(n, ".TEMP") || strings.HasSuffix(n, ".START") {
			wal++
		}
	}
	return snap, wal
}

func (h *crashHarness) summary() {
	total := 0
	for _, a := range h.acks {
		total += a
	}
	h.t.Logf("%d kills (by phase %v), %d commands acked (per round %v), final seq %d, %d recoveries from a "+
		"snapshot; %d kills left a half-written snapshot, %d an unfinished WAL truncation; %d poison commands; "+
		"WAL front at seq %d", len(h.acks), h.phases, total, h.acks, h.last, h.snapshots, h.snapLeft, h.truncLeft,
		h.poisoned, h.walFirst)
	if h.truncate && h.walFirst <= 1 {
		h.t.Errorf("the WAL was never truncated: the truncate-wal run did not test what it claims")
	}
}

func (h *crashHarness) startChild() *crashChild {
	mode := "keep"
	if h.truncate {
		mode = "truncate"
	}
	return crashStartChild(h.t, h.exe, h.dir, h.seed, mode)
}

func crashStartChild(t *testing.T, exe, dir string, seed uint64, mode string) *crashChild {
	cmd := exec.Command(exe, "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvDir+"="+dir, crashEnvSeed+"="+strconv.FormatUint(seed, 10),
		crashEnvMode+"="+mode)
	ch := &crashChild{cmd: cmd, started: make(chan core.Seq, 1), firstAck: make(chan struct{}),
		done: make(chan struct{}), t0: time.Now()}
	cmd.Stderr = &ch.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.kill(); _ = ch.wait() }) // on every path, even a failed check
	go ch.read(stdout)
	return ch
}

// read parses the child's stdout: "recovering", "start <base>", then
// "acked <seq>" for base+1, base+2, ... in order, or "error <why>".
func (ch *crashChild) read(r io.Reader) {
	defer close(ch.done)
	sc := bufio.NewScanner(r)
	firstAck := true
	for sc.Scan() {
		line := sc.Text()
		verb, arg, _ := strings.Cut(line, " ")
		ch.mu.Lock()
		switch verb {
		case "recovering":
			ch.recovering = true
		case "start":
			n, err := strconv.ParseUint(arg, 10, 64)
			if err != nil {
				ch.bad = append(ch.bad, "bad line "+strconv.Quote(line))
				break
			}
			if ch.sawStart {
				ch.bad = append(ch.bad, "second start line")
				break
			}
			ch.base, ch.maxAcked, ch.sawStart, ch.startup = core.Seq(n), core.Seq(n), true, time.Since(ch.t0)
			ch.started <- ch.base
		case "acked":
			n, err := strconv.ParseUint(arg, 10, 64)
			if err != nil || !ch.sawStart {
				ch.bad = append(ch.bad, "bad or early line "+strconv.Quote(line))
				break
			}
			if core.Seq(n) != ch.maxAcked+1 {
				ch.bad = append(ch.bad, fmt.Sprintf("acked seq %d after %d (acks must be contiguous)", n, ch.maxAcked))
			}
			ch.maxAcked = max(ch.maxAcked, core.Seq(n))
			ch.acked++
			if firstAck {
				firstAck = false
				close(ch.firstAck)
			}
		case "ok":
			ch.ok = true
		case "error":
			ch.bad = append(ch.bad, "child: "+arg)
		default:
			// the testing package's own output, if any
		}
		ch.mu.Unlock()
	}
}

// kill SIGKILLs the child (idempotent; harmless once it has exited).
func (ch *crashChild) kill() { _ = ch.cmd.Process.Signal(syscall.SIGKILL) }

// wait reaps the child, with a bound: its stdout must reach EOF first.
func (ch *crashChild) wait() error {
	ch.waitOnce.Do(func() {
		select {
		case <-ch.done:
		case <-time.After(crashExitWait):
			ch.waitErr = errors.New("stdout not closed after the kill")
		}
		if err := ch.cmd.Wait(); ch.waitErr == nil {
			ch.waitErr = err
		}
	})
	return ch.waitErr
}

func (ch *crashChild) report() string {
	return "child stderr (tail):\n" + ch.stderr.String()
}

func crashKilled(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// crashTail keeps the last crashStderrKeep bytes written to it.
type crashTail struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *crashTail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if w.b.Len() > 2*crashStderrKeep {
		keep := append([]byte(nil), w.b.Bytes()[w.b.Len()-crashStderrKeep:]...)
		w.b.Reset()
		w.b.Write(keep)
	}
	return len(p), nil
}

func (w *crashTail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestCrashPoisonRebuildRace: a poison command makes the processor rebuild
// its state from the newest snapshot plus the WAL while the snapshot writer
// goes on writing and pruning snapshots, and the journaler truncates the WAL
// behind them. Nothing keeps those from deleting the snapshot or the WAL
// entries the rebuild is using; Pipeline.poison then fails the pipeline and
// panics, killing the process. The crash test hits this now and then ("gap
// between snapshot seq S and WAL first seq F"); here the child makes the
// snapshot writer's work land inside the rebuild deterministically (see
// crashPoisonRaceChild) and must survive the poison command.
func TestCrashPoisonRebuildRace(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ch := crashStartChild(t, exe, t.TempDir(), 0, "poison-race")
	select {
	case <-ch.done:
	case <-time.After(2 * crashStartWait): // its start, then its wait for a snapshot
		t.Fatalf("the child did not finish within %v\n%s", 2*crashStartWait, ch.report())
	}
	err = ch.wait()
	ch.mu.Lock()
	ok, bad := ch.ok, ch.bad
	ch.mu.Unlock()
	if err != nil || !ok || len(bad) > 0 {
		t.Fatalf("the pipeline did not survive a poison command whose rebuild raced with the snapshot writer "+
			"(%v %v)\n%s", err, bad, ch.report())
	}
}

// TestCrashRestartAfterSelfCross is the regression test of a bug the crash
// test found: a GTC limit with STP expire-taker that met its own resting
// order rested crossed, the market halted, the snapshot written at Close
// broke invariants and Start refused to come up (fixed in core, and Recover
// now tolerates violations a halt already contains). The crash workload
// sends such orders all the time; this is the minimal case.
func TestCrashRestartAfterSelfCross(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, Logger: quietLog(), TruncateLimit: keepAll}
	pl, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmds := append(setupCmds()[:5],
		core.Command{Kind: core.KindSpotDeposit, User: 2, Asset: 1, Amount: 10_000_000_000, Key: crashKey('x', 1)},
		core.Command{Kind: core.KindPlaceOrder, User: 2, Market: 1, Side: core.Sell, Type: core.Limit, TIF: core.GTC,
			Price: 50_000_000_000, Qty: 1_000_000},
		core.Command{Kind: core.KindPlaceOrder, User: 2, Market: 1, Side: core.Buy, Type: core.Limit, TIF: core.GTC,
			STP: core.STPExpireTaker, Price: 50_000_000_000, Qty: 1_000_000})
	runAll(t, pl, cmds)
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if v := pl.Processor().CheckInvariants(); len(v) != 0 {
		m, _ := pl.Processor().Market(1)
		t.Errorf("a GTC expire-taker buy meeting its own ask left violations %+v (market status %d)", v, m.Status)
	}
	pl2, err := Start(cfg)
	if err != nil {
		t.Fatalf("restart after Close: %v", err)
	}
	if err := pl2.Close(); err != nil {
		t.Fatal(err)
	}
}
