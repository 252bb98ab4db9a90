package main

import (
	"bytes"
	"context"
	"encoding/json"

	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ubscore/ubscore/bench"
)

// `bench all` runs a short version of every scenario in this process (each
// through run(), exactly as its CLI), then writes report.json, report.md
// and the plots into --out. A scenario that fails is reported and the rest
// still run; the Postgres ones are skipped, with the reason, when Postgres
// is unreachable.

// allProfile sizes every scenario of one `bench all` run.
type allProfile struct {
	name          string
	pipeline      []string // extra pipeline flags (commands, users ...)
	pipeBatches   []int    // journal max-batch per pipeline run; each is also a disk-ceiling batch
	processor     []string
	shape         []string // processor --shape book flags
	binary        []string // processor --shape binary flags
	disk          []string // disk-ceiling flags except --batches
	replay        []string
	http          []string // load flags of http, http-ceiling and sweep
	httpRounds    string   // http's --rounds: alternating hello-world/exchange rounds
	transfer      []string // transfer and pg-baseline flags except --modes
	transferModes string
	sweep         []string // sweep flags beyond http's
	sink          []string // sink flags (closed loop: the full pipeline rate)
	replication   []string // replication flags
	ws            []string // bench ws flags
}

var profiles = map[string]allProfile{
	// full: <= 10 minutes on 2 cores.
	"full": {name: "full",
		pipeline:      []string{"--commands", "2000000", "--producers", "4"},
		pipeBatches:   []int{64, 4096},
		processor:     []string{"--commands", "3000000"},
		shape:         []string{"--runs", "1"},
		binary:        []string{"--commands", "2000000", "--runs", "5"},
		disk:          []string{"--duration", "3s"},
		replay:        []string{"--commands", "2000000"},
		http:          []string{"--conns", "256", "--duration", "5s", "--warmup", "1s"},
		httpRounds:    "3",
		transfer:      []string{"--users", "1000", "--clients", "64", "--duration", "10s", "--warmup", "2s"},
		transferModes: "fsm",
		sweep:         []string{"--fractions", "0.1,0.25,0.5,0.75,0.9,1.0,1.1,1.2", "--duration", "8s", "--warmup", "1s"},
		sink:          []string{"--commands", "300000"},
		replication:   []string{"--commands", "200000", "--rounds", "3"},
		ws:            []string{"--subscribers", "1000", "--duration", "3s", "--rounds", "3"},
	},
	// quick: about a minute.
	"quick": {name: "quick",
		pipeline:      []string{"--commands", "1000000", "--producers", "4"},
		pipeBatches:   []int{64, 4096},
		processor:     []string{"--commands", "2000000"},
		shape:         []string{"--orders", "100000", "--runs", "1"},
		binary:        []string{"--commands", "1000000", "--runs", "3"},
		disk:          []string{"--duration", "500ms"},
		replay:        []string{"--commands", "1000000"},
		http:          []string{"--conns", "32", "--duration", "2s", "--warmup", "500ms"},
		httpRounds:    "1",
		transfer:      []string{"--users", "256", "--clients", "16", "--duration", "1500ms", "--warmup", "300ms"},
		transferModes: "fsm",
		sweep:         []string{"--fractions", "0.1,0.5,0.9,1.2", "--duration", "1500ms", "--warmup", "300ms"},
		sink:          []string{"--commands", "100000"},
		replication:   []string{"--commands", "50000", "--rounds", "1"},
		ws:            []string{"--quick"},
	},
	// tiny: the harness's own test (seconds).
	"tiny": {name: "tiny",
		pipeline:      []string{"--commands", "20000", "--producers", "2", "--users", "500", "--seed-per-book", "50"},
		pipeBatches:   []int{64, 4096},
		processor:     []string{"--commands", "20000", "--users", "500", "--seed-per-book", "50"},
		shape:         []string{"--orders", "5000", "--runs", "1", "--accounts", "100,1000000"},
		binary:        []string{"--commands", "20000", "--runs", "1", "--users", "500", "--seed-per-book", "50"},
		disk:          []string{"--duration", "100ms"},
		replay:        []string{"--commands", "20000", "--users", "500", "--seed-per-book", "50"},
		http:          []string{"--conns", "4", "--duration", "300ms", "--warmup", "100ms", "--users", "4"},
		httpRounds:    "1",
		transfer:      []string{"--users", "16", "--clients", "4", "--pool", "8", "--duration", "300ms", "--warmup", "100ms"},
		transferModes: "fsm",
		sweep:         []string{"--fractions", "0.5,1.2", "--duration", "300ms", "--warmup", "100ms"},
		sink:          []string{"--commands", "20000", "--users", "500", "--seed-per-book", "50"},
		replication:   []string{"--commands", "5000", "--rounds", "1", "--nodes", "1", "--users", "500"},
		ws:            []string{"--subscribers", "20", "--producers", "8", "--duration", "300ms", "--rounds", "1"},
	},
}

// scenarioRun is one scenario of the report.
type scenarioRun struct {
	Name      string          `json:"name"`
	Args      []string        `json:"args"`
	Seconds   float64         `json:"seconds"`
	LoadStart float64         `json:"load_start"` // 1-minute load average when it started
	LoadMax   float64         `json:"load_max"`   // highest 1-minute load average sampled during it
	Warning   string          `json:"warning,omitempty"`
	Skipped   string          `json:"skipped,omitempty"` // why it did not run
	Error     string          `json:"error,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"` // the scenario's --json report
}

// allReport is report.json.
type allReport struct {
	Profile   string         `json:"profile"`
	Runs      int            `json:"runs,omitempty"` // > 1: a merge of this many runs (medians)
	Seed      uint64         `json:"seed"`
	Machine   machineInfo    `json:"machine"`
	Seconds   float64        `json:"seconds"`
	Scenarios []*scenarioRun `json:"scenarios"`
	Pairs     []pair         `json:"pairs"`
	Sweep     *sweepReport   `json:"sweep,omitempty"`
}

// allEnv is what the steps of one run share.
type allEnv struct {
	prof     allProfile
	seed     string
	exe      string // the exchange binary ("" = unavailable: why in noExe)
	noExe    string
	pgURL    string // admin URL ("" = unreachable: why in noPG)
	noPG     string
	stderr   io.Writer
	tmp      string
	rep      *allReport
	scenario map[string]*scenarioRun
}

func runAll(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench all", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "output directory for report.json, report.md and the plots (required)")
	quick := fs.Bool("quick", false, "the ~1 minute version")
	profile := fs.String("profile", "", "full, quick or tiny (tiny: the harness's own test); overrides --quick")
	exe := fs.String("exchange", "", "the exchange binary (empty: go build ./cmd/exchange into a temp dir)")
	pgURL := fs.String("pg-url", bench.DefaultTransferPGURL, "admin Postgres URL (throw-away databases are created and dropped)")
	seed := fs.Uint64("seed", 1, "workload seed")
	runs := fs.Int("runs", 1, "run everything this many times (into DIR/run-1 ...) and write DIR's report as per-row medians (as bench merge)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	name := "full"
	if *quick {
		name = "quick"
	}
	if *profile != "" {
		name = *profile
	}
	prof, ok := profiles[name]
	if !ok || *out == "" {
		fmt.Fprintln(stderr, "bench all: --out DIR is required; --profile is full, quick or tiny")
		return exitUsage
	}
	if *runs < 1 {
		fmt.Fprintln(stderr, "bench all: --runs must be >= 1")
		return exitUsage
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "bench all:", err); return exitFail }
	if *runs == 1 {
		if _, err := allOnce(prof, *out, *exe, *pgURL, *seed, stderr); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s\n", filepath.Join(*out, "report.md"))
		return exitOK
	}
	var reps []*allReport
	for i := 1; i <= *runs; i++ {
		dir := filepath.Join(*out, "run-"+strconv.Itoa(i))
		fmt.Fprintf(stderr, "bench all: run %d of %d into %s\n", i, *runs, dir)
		rep, err := allOnce(prof, dir, *exe, *pgURL, *seed, stderr)
		if err != nil {
			return fail(err)
		}
		reps = append(reps, rep)
	}
	m, err := mergeReports(reps)
	if err != nil {
		return fail(err)
	}
	if err := writeReports(*out, m); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "%s\n", filepath.Join(*out, "report.md"))
	return exitOK
}

// allOnce runs every scenario once and writes the reports into out.
func allOnce(prof allProfile, out, exe, pgURL string, seed uint64, stderr io.Writer) (*allReport, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "ubs-bench-all-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	e := &allEnv{prof: prof, seed: strconv.FormatUint(seed, 10), exe: exe, stderr: stderr, tmp: tmp,
		rep: &allReport{Profile: prof.name, Seed: seed, Machine: currentMachine()}, scenario: map[string]*scenarioRun{}}
	e.prepare(pgURL)
	e.runSteps()
	e.rep.Seconds = round1s(time.Since(start).Seconds())
	e.rep.Pairs = pairsOf(e)
	if err := writeReports(out, e.rep); err != nil {
		return nil, err
	}
	return e.rep, nil
}

// prepare finds the exchange binary and Postgres.
func (e *allEnv) prepare(pgURL string) {
	if e.exe == "" {
		e.exe = filepath.Join(e.tmp, "exchange")
		cmd := exec.Command("go", "build", "-o", e.exe, "github.com/ubscore/ubscore/cmd/exchange")
		if b, err := cmd.CombinedOutput(); err != nil {
			e.exe, e.noExe = "", fmt.Sprintf("go build ./cmd/exchange: %v: %s", err, bytes.TrimSpace(b))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		e.noPG = "Postgres unreachable: " + err.Error()
		return
	}
	_ = conn.Close(ctx)
	e.pgURL = pgURL
}

// exchangeStep runs scenario name (a flag list that starts an exchange with
// its own fresh data dir) with a throw-away database of its own, dropped
// afterwards, or with no Postgres at all when it is unreachable. Each
// exchange needs its own: a database the sink of another WAL has already
// advanced holds another history (its checkpoint, order ids and trade ids
// are not this WAL's), and the sweep's sink stalled on the http scenario's
// database in 2 of 3 runs.
func (e *allEnv) exchangeStep(name string, args []string) {
	pg := "none"
	drop := func() error { return nil }
	if e.pgURL != "" && e.exe != "" {
		url, d, err := bench.TempDatabase(context.Background(), e.pgURL)
		if err != nil {
			fmt.Fprintln(e.stderr, "bench all: exchange runs without Postgres:", err)
		} else {
			pg, drop = url, d
		}
	}
	e.step(name, e.noExe, append([]string{args[0], "--exchange", e.exe, "--pg-url", pg, "--json"}, args[1:]...))
	if err := drop(); err != nil {
		fmt.Fprintln(e.stderr, "bench all:", err)
	}
}

// runSteps runs every scenario in order.
func (e *allEnv) runSteps() {
	p, seed := e.prof, e.seed
	for _, b := range p.pipeBatches {
		dir := filepath.Join(e.tmp, "pipeline-"+strconv.Itoa(b))
		e.step(pipelineName(b), "", append([]string{"pipeline", "--data", dir, "--seed", seed, "--max-batch",
			strconv.Itoa(b), "--json"}, p.pipeline...))
		_ = os.RemoveAll(dir)
	}
	e.step("processor", "", append([]string{"processor", "--seed", seed, "--json"}, p.processor...))
	e.step("processor-shape", "", append([]string{"processor", "--shape", "book", "--json"}, p.shape...))
	e.step("processor-binary", "", append([]string{"processor", "--shape", "binary", "--json"}, p.binary...))
	e.step("disk-ceiling", "", append([]string{"disk-ceiling", "--data", e.tmp, "--batches",
		joinInts(diskBatches(p)), "--json"}, p.disk...))
	e.step("replay", "", append([]string{"replay", "--seed", seed, "--json"}, p.replay...))
	e.step("http-ceiling", "", append([]string{"http-ceiling", "--json"}, httpLoadFlags(p.http)...))
	e.exchangeStep("http", append(append([]string{"http"}, p.http...), "--rounds", p.httpRounds))
	e.exchangeStep("sweep", append(append([]string{"sweep"}, p.http...), p.sweep...))
	e.step("transfer", e.noPG, append([]string{"transfer", "--pg-url", e.pgURL, "--modes", p.transferModes, "--json"},
		p.transfer...))
	e.step("ws", "", append([]string{"ws", "--json"}, p.ws...))
	e.step("sink", e.noPG, append([]string{"sink", "--pg-url", e.pgURL, "--seed", seed, "--json"}, p.sink...))
	e.step("pg-baseline", e.noPG, append([]string{"pg-baseline", "--pg-url", e.pgURL, "--json"}, p.transfer...))
	e.step("replication", "", append([]string{"replication", "--seed", seed, "--json"}, p.replication...))
}

func pipelineName(batch int) string { return "pipeline-batch-" + strconv.Itoa(batch) }

// diskBatches: every default batch size in the full run; else 1 and the
// pipeline runs' batches.
func diskBatches(p allProfile) []int {
	if p.name == "full" {
		return bench.DiskBatches
	}
	out := []int{1}
	for _, b := range p.pipeBatches {
		if b != 1 {
			out = append(out, b)
		}
	}
	return out
}

// httpLoadFlags drops the flags http-ceiling does not take (--users).
func httpLoadFlags(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--users" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// step runs one scenario through run() unless skip says why not, and
// records it.
func (e *allEnv) step(name, skip string, args []string) {
	s := &scenarioRun{Name: name, Args: args}
	e.rep.Scenarios = append(e.rep.Scenarios, s)
	e.scenario[name] = s
	if skip != "" {
		s.Skipped = skip
		fmt.Fprintf(e.stderr, "bench all: %-18s skipped: %s\n", name, skip)
		return
	}
	var out, errb bytes.Buffer
	lw := watchLoad()
	t0 := time.Now()
	code := run(args, &out, &errb)
	s.Seconds = round1s(time.Since(t0).Seconds())
	s.LoadStart, s.LoadMax = lw.finish()
	if cores := float64(e.rep.Machine.Cores); s.LoadMax > cores {
		s.Warning = fmt.Sprintf("load average reached %.2f on %d cores (%.2f at the start; the bench's own threads count too): "+
			"numbers may be low", s.LoadMax, e.rep.Machine.Cores, s.LoadStart)
	}
	switch {
	case code != exitOK:
		s.Error = fmt.Sprintf("exit %d: %s", code, lastLines(errb.String(), 5))
	case !json.Valid(bytes.TrimSpace(out.Bytes())):
		s.Error = "stdout is not one JSON report: " + lastLines(out.String(), 3)
	default:
		s.Result = json.RawMessage(bytes.TrimSpace(out.Bytes()))
	}
	status := "ok"
	if s.Error != "" {
		status = s.Error
	}
	fmt.Fprintf(e.stderr, "bench all: %-18s %5.1f s  load %.2f..%.2f  %s\n", name, s.Seconds, s.LoadStart, s.LoadMax, status)
}

// result decodes the report of scenario name into v; false if it did not run.
func (e *allEnv) result(name string, v any) bool {
	s := e.scenario[name]
	return s != nil && s.Result != nil && json.Unmarshal(s.Result, v) == nil
}

func lastLines(s string, n int) string {
	b := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.Join(b, []byte(" | ")))
}

func round1s(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
