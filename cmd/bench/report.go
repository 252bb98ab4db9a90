package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ubscore/ubscore/bench"
)

// pair is one row of the report: a measured rate beside the ceiling or
// baseline it should be read against.
type pair struct {
	Name        string  `json:"name"`
	Unit        string  `json:"unit"`
	Value       float64 `json:"value"` // 0 = not measured (Note says why)
	Ceiling     float64 `json:"ceiling"`
	CeilingName string  `json:"ceiling_name"`
	Ratio       float64 `json:"ratio"` // Value / Ceiling; 0 when either is missing
	Note        string  `json:"note,omitempty"`
	// Values are the runs' values when this row is a median of several
	// runs (bench merge); Value, Ceiling and Ratio are then medians.
	Values []float64 `json:"values,omitempty"`
}

// pairsOf derives the report's rows from the scenarios' results.
func pairsOf(e *allEnv) []pair {
	var out []pair
	add := func(p pair, valueFrom, ceilingFrom string) {
		if p.Value > 0 && p.Ceiling > 0 {
			p.Ratio = float64(int64(p.Value/p.Ceiling*1000+0.5)) / 1000
		}
		for _, n := range []string{valueFrom, ceilingFrom} {
			if s := e.scenario[n]; s != nil && s.Result == nil && p.Note == "" {
				p.Note = n + ": " + firstOf(s.Skipped, s.Error)
			}
		}
		out = append(out, p)
	}
	var proc bench.ProcessorResult
	e.result("processor", &proc)
	add(pair{Name: "processor", Unit: "cmd/s", Value: proc.CmdsPerSec, Ceiling: bench.ProcessorTarget,
		CeilingName: "target 3M cmd/s"}, "processor", "")
	out = append(out, shapePairs(e)...)
	out = append(out, binaryPairs(e)...)
	var disk bench.DiskResult
	e.result("disk-ceiling", &disk)
	for _, b := range e.prof.pipeBatches {
		var pr bench.PipelineResult
		e.result(pipelineName(b), &pr)
		p := pair{Name: fmt.Sprintf("pipeline (max batch %d)", b), Unit: "cmd/s", Value: pr.CmdsPerSec,
			CeilingName: fmt.Sprintf("disk-ceiling, batch %d", b)}
		for _, d := range disk.Points {
			if d.Batch == b {
				p.Ceiling = d.RecordsPerS
			}
		}
		add(p, pipelineName(b), "disk-ceiling")
	}
	var hr httpReport
	var hc bench.HTTPResult
	e.result("http", &hr)
	e.result("http-ceiling", &hc)
	// The ratio is the http scenario's own: hello-world and exchange loads
	// alternated in the same run (the round of median ratio); the
	// http-ceiling scenario's separate run is the fallback.
	hp := pair{Name: "http POST /api/v1/order", Unit: "req/s", Value: hr.Exchange.RPS, Ceiling: hc.RPS,
		CeilingName: "http-ceiling (hello-world)"}
	if hr.Baseline.RPS > 0 {
		hp.Ceiling = hr.Baseline.RPS
		hp.CeilingName = "http-ceiling (hello-world), same run"
		if len(hr.Rounds) > 1 {
			hp.CeilingName += fmt.Sprintf(", round of median ratio of %d alternating rounds", len(hr.Rounds))
		}
	}
	if b, x := hr.Baseline.CPU, hr.Exchange.CPU; b != nil && x != nil {
		hp.Note = "CPU per request, us summed over cores (generator / server / postgres / other / idle): exchange " +
			cpuSplit(x) + ", hello-world " + cpuSplit(b)
	}
	if hr.WAL != nil {
		if hp.Note != "" {
			hp.Note += "; "
		}
		hp.Note += "exchange WAL: " + hr.WAL.String()
	}
	add(hp, "http", "http-ceiling")
	var tr bench.TransferReport
	var pb pgBaselineReport
	e.result("transfer", &tr)
	e.result("pg-baseline", &pb)
	base := 0.0
	if pb.Naive != nil {
		base = pb.Naive.TPS
	}
	for _, m := range []struct {
		name string
		r    *bench.TransferResult
	}{{bench.ModeFSM, tr.FSM}} {
		if m.r == nil && !slices.Contains(strings.Split(e.prof.transferModes, ","), m.name) {
			continue
		}
		v := 0.0
		if m.r != nil {
			v = m.r.TPS
		}
		add(pair{Name: "transfer " + m.name, Unit: "transfers/s", Value: v, Ceiling: base,
			CeilingName: "pg-baseline (naive ledger)"}, "transfer", "pg-baseline")
	}
	var rr bench.ReplayResult
	e.result("replay", &rr)
	add(pair{Name: "replay (snapshot + WAL)", Unit: "cmd/s", Value: rr.CmdsPerSec, Ceiling: bench.ProcessorTarget,
		CeilingName: "target 3M cmd/s"}, "replay", "")
	if hr.Exchange.RPS > 0 {
		add(pair{Name: "sink lag during http (max)", Unit: "commands", Value: hr.SinkLagMax,
			CeilingName: "-", Note: fmt.Sprintf("~%.3f s of orders at the measured rate", hr.SinkLagSec)}, "http", "")
	}
	var sk bench.SinkResult
	e.result("sink", &sk)
	sinkNote := ""
	if sk.Commands > 0 {
		verdict := "unmet"
		if sk.LagMaxms < bench.SinkLagTargetMs && sk.OfferedRate == 0 {
			verdict = "met"
		}
		sinkNote = fmt.Sprintf("lag (commit - ack) p50 %.0f ms, p99 %.0f ms, max %.0f ms; target max < 1 s at full pipeline rate: %s; "+
			"%.0f events/s, %.0f rows/s", sk.LagP50ms, sk.LagP99ms, sk.LagMaxms, verdict, sk.EventsPerSec, sk.RowsPerSec)
	}
	add(pair{Name: "sink (Postgres)", Unit: "records/s", Value: sk.RecordsPerSec, Ceiling: sk.PipelineRate,
		CeilingName: "pipeline rate, same run", Note: sinkNote}, "sink", "")
	var ws bench.WSResult
	e.result("ws", &ws)
	wsNote := ""
	if ws.Subscribers > 0 {
		wsNote = fmt.Sprintf("%d subscribers on %s, frame %.0f ms; at half load (%.0f cmd/s offered): ack p99 off %.2f ms, on %.2f ms; "+
			"%.0f msgs/s (%.0f KB/s) delivered, ack -> delivery p50 %.1f ms, p99 %.1f ms; %d dropped; closed loop on/off %.3f; target ratio >= 0.9",
			ws.Subscribers, strings.Join(ws.Channels, ","), ws.FrameMs, ws.OfferedPerSec, ws.AckP99OffMs, ws.AckP99OnMs,
			ws.DeliveredMsgPerSec, ws.DeliveredBytesPerSec/1e3, ws.LatencyP50ms, ws.LatencyP99ms, ws.Dropped, ws.ClosedRatio)
	}
	add(pair{Name: "pipeline at half load with the WebSocket fan-out", Unit: "cmd/s", Value: ws.AchievedPerSec, Ceiling: ws.AchievedOffPerSec,
		CeilingName: "same offered rate, fan-out off, same run", Note: wsNote}, "ws", "")
	var sw sweepReport
	if e.result("sweep", &sw) {
		e.rep.Sweep = &sw
	}
	return out
}

// cpuSplit is c as "g / s / p / o / i = total".
func cpuSplit(c *bench.CPUShare) string {
	return fmt.Sprintf("%.1f / %.1f / %.1f / %.1f / %.1f = %.1f", c.Generator, c.Server, c.Postgres, c.Other, c.Idle, c.Total())
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// writeReports writes report.json, report.md and the plots into dir.
func writeReports(dir string, rep *allReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	plots, err := writePlots(dir, rep)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(markdown(rep, plots)), 0o644)
}

func num(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func markdown(rep *allReport, plots []string) string {
	var b strings.Builder
	m := rep.Machine
	fmt.Fprintf(&b, "# Benchmark report (%s)\n\n", rep.Profile)
	if rep.Runs > 1 {
		fmt.Fprintf(&b, "Medians of %d runs: each value, ceiling and ratio is the median of the runs' (a ratio is taken within each run, then the median); "+
			"the runs' values are in the notes. The sweep's points are per-load medians.\n\n", rep.Runs)
	}
	fmt.Fprintf(&b, "- machine: %s, %d cores, %s, kernel %s\n- commit: %s\n- started: %s, took %.1f s, seed %d\n\n",
		m.CPU, m.Cores, m.GoVersion, firstOf(m.Kernel, "?"), firstOf(m.GitCommit, "unknown"), m.Time, rep.Seconds, rep.Seed)
	b.WriteString("## Rates beside their ceilings\n\n| scenario | value | unit | ceiling / baseline | ceiling | ratio | note |\n|---|---:|---|---|---:|---:|---|\n")
	for _, p := range rep.Pairs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", p.Name, num(p.Value), p.Unit, p.CeilingName,
			num(p.Ceiling), num(p.Ratio), p.Note)
	}
	b.WriteString("\n## Scenarios\n\n| scenario | seconds | load start | load max | status |\n|---|---:|---:|---:|---|\n")
	var warnings []string
	for _, s := range rep.Scenarios {
		st := "ok"
		switch {
		case s.Skipped != "":
			st = "skipped: " + s.Skipped
		case s.Error != "":
			st = "FAILED: " + s.Error
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.2f | %.2f | %s |\n", s.Name, s.Seconds, s.LoadStart, s.LoadMax,
			strings.ReplaceAll(st, "|", "/"))
		if s.Warning != "" {
			warnings = append(warnings, fmt.Sprintf("- **%s**: %s", s.Name, s.Warning))
		}
	}
	if len(warnings) > 0 {
		b.WriteString("\n## Warnings\n\n" + strings.Join(warnings, "\n") + "\n")
	}
	if sw := rep.Sweep; sw != nil {
		fmt.Fprintf(&b, "\n## Latency vs offered load (%s, open loop, corrected for coordinated omission)\n\n"+
			"Maximum (closed loop): %.0f req/s. Each point starts once the sink's backlog is below %d commands (settle s); "+
			"sink lag is its backlog at the start and its maximum; slow WAL appends are group commits (write + fdatasync) over 25 / 100 ms during the point.\n\n"+
			"| load | offered req/s | achieved req/s | p50 us | p99 us | p99.9 us | raw p99 us | non-2xx | errors | settle s | sink lag start / max | WAL appends > 25 / 100 ms |\n"+
			"|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", sw.Target, sw.MaxRPS, sweepSettleLag)
		for _, p := range sw.Points {
			r := p.Result
			fmt.Fprintf(&b, "| %.0f%% | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %d | %d | %.1f | %.0f / %.0f | %.0f / %.0f |\n", p.Fraction*100, r.OfferedRPS,
				r.RPS, r.P50us, r.P99us, r.P999us, r.RawP99us, r.Non2xx, r.Errors, p.SettleSec, p.SinkLagStart, p.SinkLagMax,
				p.Appends25ms, p.Appends100ms)
		}
	}
	if len(plots) > 0 {
		b.WriteString("\n## Plots\n\n")
		for _, p := range plots {
			fmt.Fprintf(&b, "![%s](%s)\n", p, p)
		}
	}
	return b.String()
}
