package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const wrkOutput = `Running 3s test @ http://127.0.0.1:38457/api/v1/order
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.05ms    3.12ms  77.12ms   97.66%
    Req/Sec    17.49k     3.44k   25.01k    71.67%
  Latency Distribution
     50%  621.00us
     75%  812.00us
     90%    1.10ms
     99%   12.50ms
  104345 requests in 3.00s, 13.33MB read
Requests/sec:  34781.93
Transfer/sec:      4.44MB
`

func TestParseWrk(t *testing.T) {
	s, err := parseWrk([]byte(wrkOutput))
	if err != nil {
		t.Fatal(err)
	}
	if s != (wrkSample{RPS: 34781.93, P50us: 621, P99us: 12500}) {
		t.Fatalf("parsed %+v", s)
	}
	for _, bad := range []string{
		strings.Replace(wrkOutput, "Requests/sec", "Req", 1),
		strings.Replace(wrkOutput, "     99%", "     98%", 1),
		wrkOutput + "  Non-2xx or 3xx responses: 12\n",
	} {
		if _, err := parseWrk([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	if s, err := parseWrk([]byte(strings.Replace(wrkOutput, "12.50ms", "1.20s", 1))); err != nil || s.P99us != 1.2e6 {
		t.Errorf("seconds: %+v %v", s, err)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestParseLevels(t *testing.T) {
	got, err := parseLevels(" 4:1, 32,256:2", 99, 2)
	if err != nil || len(got) != 3 || got[0] != (wrkLevel{4, 1}) || got[1] != (wrkLevel{32, 2}) || got[2] != (wrkLevel{256, 2}) {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := parseLevels("", 8, 2); err != nil || len(got) != 1 || got[0] != (wrkLevel{8, 2}) {
		t.Fatalf("no list: %v %v", got, err)
	}
	for _, bad := range []string{"x", "4:y", "2:4", "0", ",", "4:0"} {
		if _, err := parseLevels(bad, 8, 2); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if !agrees(0.85) || !agrees(1.15) || agrees(0.849) || agrees(1.151) {
		t.Error("agrees is not [0.85, 1.15]")
	}
}

func TestWrkCheckUsage(t *testing.T) {
	for _, args := range [][]string{{"wrk-check", "--runs", "0"}, {"wrk-check", "--threads", "4", "--conns", "2"},
		{"wrk-check", "--conns-list", "4,1"}, {"wrk-check", "--engine", "curl"},
		{"wrk-check", "--duration", "10ms"}, {"wrk-check", "x"}} {
		if code, _, _ := runBench(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, _, _ := runBench(t, "wrk-check", "--wrk", "/nonexistent/wrk"); code != exitFail {
		t.Errorf("missing wrk: exit %d, want %d", code, exitFail)
	}
}

// With wrk installed, one short run of each tool against the hello-world
// child process gives both samples and their ratios.
func TestWrkCheckRuns(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk is not installed")
	}
	code, out, errs := runBench(t, "wrk-check", "--runs", "1", "--duration", "1s", "--conns-list", "2:1,4", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want a JSON line per level: %q", out)
	}
	var rep wrkCheckReport
	for i, want := range []wrkLevel{{2, 1}, {4, 2}} {
		rep = wrkCheckReport{}
		if err := json.Unmarshal([]byte(lines[i]), &rep); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		if rep.Conns != want.conns || rep.Threads != want.threads || rep.Engine != "evloop" || len(rep.Wrk) != 1 || len(rep.Ours) != 1 ||
			rep.RPSRatio <= 0 || rep.P50Ratio <= 0 || rep.P99Ratio <= 0 || rep.Ours[0].RawP99us <= 0 ||
			rep.Pass != (agrees(rep.RPSRatio) && agrees(rep.P50Ratio) && agrees(rep.P99Ratio)) {
			t.Fatalf("level %d: report %+v", i, rep)
		}
	}
	code, out, errs = runBench(t, "wrk-check", "--runs", "1", "--duration", "1s", "--conns", "4", "--concurrent", "--json")
	if code != exitOK {
		t.Fatalf("concurrent: exit %d: %s", code, errs)
	}
	rep = wrkCheckReport{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Concurrent || len(rep.Wrk) != 1 || len(rep.Ours) != 1 {
		t.Fatalf("concurrent: %v %+v", err, rep)
	}
}
