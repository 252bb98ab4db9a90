package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// `bench merge --out DIR RUN...` merges the report.json of several
// `bench all` runs (directories or report.json files) into one report with
// per-row medians: each pair's value, ceiling and ratio are the medians of
// the runs' (the ratio is the median of the per-run ratios, each taken
// within one run, not the ratio of the medians), and each sweep point's
// rates and percentiles are the medians at that load. The runs' values
// stay in the report beside the medians. `bench all --runs N` runs N times
// and merges.

func runMerge(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench merge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "output directory for the merged report.json, report.md and plots (required)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	if *out == "" || fs.NArg() < 1 {
		fmt.Fprintln(stderr, "bench merge: --out DIR and at least one run (a bench all output dir or its report.json) are required")
		return exitUsage
	}
	var reps []*allReport
	for _, p := range fs.Args() {
		rep, err := readReport(p)
		if err != nil {
			fmt.Fprintln(stderr, "bench merge:", err)
			return exitFail
		}
		reps = append(reps, rep)
	}
	m, err := mergeReports(reps)
	if err != nil {
		fmt.Fprintln(stderr, "bench merge:", err)
		return exitFail
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(stderr, "bench merge:", err)
		return exitFail
	}
	if err := writeReports(*out, m); err != nil {
		fmt.Fprintln(stderr, "bench merge:", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "%s\n", filepath.Join(*out, "report.md"))
	return exitOK
}

func readReport(path string) (*allReport, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "report.json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep allReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if rep.Runs > 1 {
		return nil, fmt.Errorf("%s is already a merge of %d runs", path, rep.Runs)
	}
	return &rep, nil
}

// mergeReports is the median report of reps (all of one profile).
func mergeReports(reps []*allReport) (*allReport, error) {
	if len(reps) == 0 {
		return nil, fmt.Errorf("no runs")
	}
	first := reps[0]
	m := &allReport{Profile: first.Profile, Seed: first.Seed, Machine: first.Machine, Runs: len(reps)}
	var commits []string
	for i, r := range reps {
		if r.Profile != first.Profile {
			return nil, fmt.Errorf("run %d is profile %q, run 1 is %q", i+1, r.Profile, first.Profile)
		}
		m.Seconds += r.Seconds
		if c := r.Machine.GitCommit; !containsStr(commits, c) {
			commits = append(commits, c)
		}
		for _, s := range r.Scenarios {
			c := *s
			c.Name = "run " + strconv.Itoa(i+1) + ": " + s.Name
			m.Scenarios = append(m.Scenarios, &c)
		}
	}
	m.Machine.GitCommit = strings.Join(commits, ", ")
	// Pairs, by name, in run 1's order (then rows only later runs have).
	var names []string
	for _, r := range reps {
		for _, p := range r.Pairs {
			if !containsStr(names, p.Name) {
				names = append(names, p.Name)
			}
		}
	}
	for _, name := range names {
		var got []pair
		for _, r := range reps {
			for _, p := range r.Pairs {
				if p.Name == name {
					got = append(got, p)
				}
			}
		}
		mp := got[0]
		mp.Values = nil
		var values, ceilings, ratios []float64
		for _, p := range got {
			mp.Values = append(mp.Values, p.Value)
			if p.Value > 0 {
				values = append(values, p.Value)
			}
			if p.Ceiling > 0 {
				ceilings = append(ceilings, p.Ceiling)
			}
			if p.Ratio > 0 {
				ratios = append(ratios, p.Ratio)
			}
		}
		mp.Value, mp.Ceiling = median(values), median(ceilings)
		mp.Ratio = float64(int64(median(ratios)*1000+0.5)) / 1000
		if mp.Note == "" || len(got) > 1 {
			mp.Note = strings.TrimSpace(fmt.Sprintf("runs: %s. %s", joinNums(mp.Values), medianNote(got)))
		}
		m.Pairs = append(m.Pairs, mp)
	}
	m.Sweep = mergeSweeps(reps)
	return m, nil
}

// medianNote is the note of the run whose value is the median (its lag
// figures, for the sink row), or the first non-empty note.
func medianNote(got []pair) string {
	var vs []float64
	for _, p := range got {
		vs = append(vs, p.Value)
	}
	med := median(vs)
	best, bestD := "", -1.0
	for _, p := range got {
		if d := abs(p.Value - med); p.Note != "" && (bestD < 0 || d < bestD) {
			best, bestD = p.Note, d
		}
	}
	return best
}

// mergeSweeps is the per-fraction median of the runs' sweeps.
func mergeSweeps(reps []*allReport) *sweepReport {
	var sws []*sweepReport
	for _, r := range reps {
		if r.Sweep != nil {
			sws = append(sws, r.Sweep)
		}
	}
	if len(sws) == 0 {
		return nil
	}
	out := &sweepReport{Target: sws[0].Target}
	var maxes []float64
	for _, s := range sws {
		maxes = append(maxes, s.MaxRPS)
	}
	out.MaxRPS = median(maxes)
	for _, pt := range sws[0].Points {
		var rs []sweepPoint
		for _, s := range sws {
			for _, q := range s.Points {
				if q.Fraction == pt.Fraction {
					rs = append(rs, q)
				}
			}
		}
		f := func(get func(sweepPoint) float64) float64 {
			var v []float64
			for _, r := range rs {
				v = append(v, get(r))
			}
			return median(v)
		}
		mp := sweepPoint{Fraction: pt.Fraction}
		mp.Result.OfferedRPS = f(func(p sweepPoint) float64 { return p.Result.OfferedRPS })
		mp.Result.RPS = f(func(p sweepPoint) float64 { return p.Result.RPS })
		mp.Result.P50us = f(func(p sweepPoint) float64 { return p.Result.P50us })
		mp.Result.P99us = f(func(p sweepPoint) float64 { return p.Result.P99us })
		mp.Result.P999us = f(func(p sweepPoint) float64 { return p.Result.P999us })
		mp.Result.RawP99us = f(func(p sweepPoint) float64 { return p.Result.RawP99us })
		mp.SettleSec = f(func(p sweepPoint) float64 { return p.SettleSec })
		mp.SinkLagStart = f(func(p sweepPoint) float64 { return p.SinkLagStart })
		mp.SinkLagMax = f(func(p sweepPoint) float64 { return p.SinkLagMax })
		mp.Appends25ms = f(func(p sweepPoint) float64 { return p.Appends25ms })
		mp.Appends100ms = f(func(p sweepPoint) float64 { return p.Appends100ms })
		for _, r := range rs {
			mp.Result.Requests += r.Result.Requests
			mp.Result.Non2xx += r.Result.Non2xx
			mp.Result.Errors += r.Result.Errors
		}
		out.Points = append(out.Points, mp)
	}
	return out
}

func joinNums(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = num(x)
	}
	return strings.Join(s, " / ")
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
