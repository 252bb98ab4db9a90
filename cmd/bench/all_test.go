package main

// This test runs `bench all` in its tiny profile, in-process, so the
// harness cannot rot: every scenario runs (the Postgres ones are skipped
// only when Postgres is unreachable and CI is unset), report.json,
// report.md and both plots exist, and report.md holds every expected row.

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/persist/pgtest"
)

// TestAllTiny runs with the race detector in make test-long; make test
// (-short) runs TestAllQuick instead: the same checks on the quick profile,
// without the race detector, rather than both.
func TestAllTiny(t *testing.T) {
	if testing.Short() && os.Getenv("UBS_BENCH_TINY_TEST") != "1" {
		t.Skip("make test runs TestAllQuick (the same checks); make test-long runs this one (UBS_BENCH_TINY_TEST=1 forces it)")
	}
	checkAll(t, "tiny")
}

// TestAllQuick is `make bench-quick` (bench all --quick) with the checks of
// TestAllTiny. It takes about a minute, so `make test` runs it once,
// without the race detector (UBS_BENCH_QUICK_TEST=1); elsewhere it is
// skipped.
func TestAllQuick(t *testing.T) {
	if os.Getenv("UBS_BENCH_QUICK_TEST") != "1" {
		t.Skip("set UBS_BENCH_QUICK_TEST=1 (make test does)")
	}
	checkAll(t, "quick")
}

// checkAll runs `bench all --profile profile` in process and checks that
// every scenario produced a result, report.md holds every expected row and
// both plots are PNGs it links.
func checkAll(t *testing.T, profile string) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "exchange")
	if b, err := exec.Command("go", "build", "-o", exe, "github.com/ubscore/ubscore/cmd/exchange").CombinedOutput(); err != nil {
		t.Fatalf("build the exchange: %v: %s", err, b)
	}
	out := filepath.Join(dir, "out")
	code, stdout, errs := runBench(t, "all", "--profile", profile, "--out", out, "--exchange", exe, "--pg-url", pgtest.AdminURL())
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.TrimSpace(stdout) != filepath.Join(out, "report.md") {
		t.Fatalf("stdout %q", stdout)
	}
	var rep allReport
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	pgDown := false
	for _, s := range rep.Scenarios {
		switch {
		case s.Skipped != "" && strings.Contains(s.Skipped, "Postgres unreachable") && os.Getenv("CI") == "":
			pgDown = true
		case s.Result == nil:
			t.Errorf("scenario %s: no result (skipped %q, error %q)", s.Name, s.Skipped, s.Error)
		}
	}
	checkCPUShares(t, &rep)
	checkWALWindow(t, &rep)
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := []string{"| processor | ", "| pipeline (max batch 64) | ", "| pipeline (max batch 4096) | ",
		"| http POST /api/v1/order | ", "| replay (snapshot + WAL) | ", "disk-ceiling, batch 64",
		"http-ceiling (hello-world)", "| processor vs bare book (book shape, ", "bare FIFO book, same run",
		"| processor, binary YES/NO markets | ", "processor, spot mixed, same run", "## Latency vs offered load", "| 50% |", "| 120% |", "machine: ", "commit: "}
	if !pgDown {
		rows = append(rows, "| transfer fsm | ", "pg-baseline (naive ledger)", "| sink (Postgres) | ", "pipeline rate, same run")
	}
	for _, r := range rows {
		if !bytes.Contains(md, []byte(r)) {
			t.Errorf("report.md lacks %q:\n%s", r, md)
		}
	}
	// Every measured row has a value and a ratio (no "-" in those columns).
	for _, p := range rep.Pairs {
		if p.Ceiling > 0 && (p.Value <= 0 || p.Ratio <= 0) && !(pgDown && (strings.HasPrefix(p.Name, "transfer") || strings.HasPrefix(p.Name, "sink"))) {
			t.Errorf("pair %+v: missing value or ratio", p)
		}
	}
	// Rows that are always measured (no Postgres, no exchange needed).
	for _, name := range []string{"processor", "processor, binary YES/NO markets"} {
		i := slices.IndexFunc(rep.Pairs, func(p pair) bool { return p.Name == name })
		if i < 0 || rep.Pairs[i].Value <= 0 || rep.Pairs[i].Ceiling <= 0 || rep.Pairs[i].Ratio <= 0 {
			t.Errorf("pair %q missing or not measured: %+v", name, rep.Pairs[max(i, 0)])
		}
	}
	for _, name := range []string{plotSweep, plotThroughput} {
		f, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r := img.Bounds(); r.Dx() < 200 || r.Dy() < 200 {
			t.Fatalf("%s is %v", name, r)
		}
		if !bytes.Contains(md, []byte("("+name+")")) {
			t.Errorf("report.md does not link %s", name)
		}
	}
}

// httpScenario is the http scenario's report in rep.
func httpScenario(t *testing.T, rep *allReport) httpReport {
	t.Helper()
	for _, s := range rep.Scenarios {
		if s.Name != "http" || s.Result == nil {
			continue
		}
		var hr httpReport
		if err := json.Unmarshal(s.Result, &hr); err != nil {
			t.Fatal(err)
		}
		return hr
	}
	t.Fatal("no http scenario result")
	return httpReport{}
}

// checkCPUShares: on Linux the http scenario says where the CPU went for
// both targets, in µs per request that add up to the machine's time per
// request (cores / rate), with the generator and the server both busy.
func checkCPUShares(t *testing.T, rep *allReport) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	hr := httpScenario(t, rep)
	for name, r := range map[string]bench.HTTPResult{"baseline": hr.Baseline, "exchange": hr.Exchange} {
		c := r.CPU
		if c == nil {
			t.Errorf("%s: no cpu_per_request", name)
			continue
		}
		machine := float64(runtime.NumCPU()) * 1e6 / r.RPS // µs of all cores per request
		if c.Generator <= 0 || c.Server <= 0 || c.Other < 0 || c.Idle < 0 || math.Abs(c.Total()-machine) > 0.25*machine {
			t.Errorf("%s: cpu_per_request %+v (total %.1f), machine time per request %.1f us", name, *c, c.Total(), machine)
		}
	}
}

// checkWALWindow: the http scenario says what the exchange's WAL did in
// its measured window, and the commands its group commits carried are the
// window's orders (give or take those in flight at either edge: at most
// one per connection, plus 5% for the scrape's own moments).
func checkWALWindow(t *testing.T, rep *allReport) {
	t.Helper()
	hr := httpScenario(t, rep)
	w, n := hr.WAL, float64(hr.Exchange.Requests)
	if w == nil {
		t.Fatal("http: no exchange_wal")
	}
	cmds := w.Commits * w.CommandsPerCommit
	if w.Commits < 1 || w.CommandsPerCommit < 1 || w.SingleShare < 0 || w.SingleShare > 1 || w.AppendMeanUs <= 0 ||
		math.Abs(cmds-n) > 256+0.05*n {
		t.Errorf("exchange_wal %+v (%.0f commands) for %.0f measured orders", *w, cmds, n)
	}
}

func TestAllUsage(t *testing.T) {
	for _, args := range [][]string{{"all"}, {"all", "--out", t.TempDir(), "--profile", "huge"}, {"all", "x"},
		{"all", "--out", t.TempDir(), "--runs", "0"}} {
		if code, _, _ := runBench(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}
