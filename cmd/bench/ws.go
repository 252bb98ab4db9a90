package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/stream"
)

// runWS is `bench ws`: the WebSocket fan-out (GET /ws) with many
// subscribers on one market, beside the pipeline it follows (bench/ws.go).
func runWS(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench ws", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.WSConfig
	asJSON := fs.Bool("json", false, "print the report as one JSON line")
	fs.StringVar(&cfg.Dir, "data", "", "WAL data dir (empty: a temp dir, removed afterwards)")
	fs.IntVar(&cfg.Subscribers, "subscribers", 1000, "WebSocket subscribers (each takes --channels of the one market)")
	channels := fs.String("channels", strings.Join(bench.WSDefaultChannels, ","), "channels each subscriber takes (depth among them): depth, trades, ticker")
	fs.IntVar(&cfg.Producers, "producers", 64, "order producers (each submits and waits for the durable answer)")
	fs.DurationVar(&cfg.Duration, "duration", 3*time.Second, "length of each phase (max, off and on at half of it, max on, max)")
	fs.IntVar(&cfg.Rounds, "rounds", 3, "rounds (the report gives medians)")
	fs.DurationVar(&cfg.Frame, "frame", stream.DefaultFrame, "the hub's conflation frame (--ws-frame)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "workload seed")
	quick := fs.Bool("quick", false, "a short variant: one round of 1 s phases")
	cpuprof := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	fs.Bool("in-process", false, "run the subscribers in this process (default: a child process, as clients on their own machine would be)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	cfg.Channels = strings.Split(*channels, ",")
	if *quick {
		cfg.Rounds, cfg.Duration = 1, time.Second
	}
	fail := func(err error) int { fmt.Fprintln(stderr, "bench ws:", err); return exitFail }
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "ubs-bench-ws-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	inProcess := fs.Lookup("in-process").Value.(flag.Getter).Get().(bool)
	if !inProcess {
		exe, err := os.Executable()
		if err != nil {
			return fail(err)
		}
		// (Not niced: starved clients fill their sockets' queues and are
		// dropped as slow consumers, which measures the box, not the hub.)
		cfg.ClientCmd = []string{exe, "ws-clients"}
		cfg.ClientEnv = []string{childEnv + "=1"} // a test binary standing in for bench runs the scenario
	}
	stop, err := bench.StartCPUProfile(*cpuprof)
	if err != nil {
		return fail(err)
	}
	res, err := bench.RunWS(cfg)
	if perr := stop(); err == nil {
		err = perr
	}
	if err != nil {
		return fail(err)
	}
	if *asJSON {
		return printJSON(stdout, stderr, "ws", res)
	}
	for i, r := range res.Rounds {
		fmt.Fprintf(stdout, "round %d: at %.0f/s offered: off %.0f, on %.0f cmd/s (%.3f), ack p99 %.2f / %.2f ms; "+
			"%.0f msgs/s, %.0f KB/s delivered, ack -> delivery p50 %.2f ms, p99 %.2f ms, dropped %d; max off %.0f, on %.0f cmd/s (%.3f)\n",
			i+1, r.OfferedPerSec, r.AchievedOffPerSec, r.AchievedPerSec, r.Ratio, r.AckP99OffMs, r.AckP99OnMs,
			r.DeliveredMsgPerSec, r.DeliveredBytesPerSec/1e3, r.LatencyP50ms, r.LatencyP99ms, r.Dropped, r.OffCmdsPerSec, r.OnCmdsPerSec, r.ClosedRatio)
	}
	fmt.Fprintf(stdout, "subscribers      %d on %s (frame %.0f ms)\n"+
		"half load        %.0f cmd/s offered: fan-out off %.0f, on %.0f answered/s: ratio %.3f (target >= 0.9; medians)\n"+
		"ack p99          off %.2f ms, on %.2f ms (from the scheduled time)\n"+
		"delivered        %.0f msgs/s, %.0f KB/s\nack -> delivery  p50 %.2f ms  p99 %.2f ms\ndropped          %d\n"+
		"closed loop      %.0f cmd/s fan-out off, %.0f on: ratio %.3f (the subscribers' process shares the cores)\n",
		res.Subscribers, strings.Join(res.Channels, ","), res.FrameMs, res.OfferedPerSec, res.AchievedOffPerSec, res.AchievedPerSec, res.Ratio,
		res.AckP99OffMs, res.AckP99OnMs, res.DeliveredMsgPerSec, res.DeliveredBytesPerSec/1e3, res.LatencyP50ms, res.LatencyP99ms, res.Dropped,
		res.OffCmdsPerSec, res.OnCmdsPerSec, res.ClosedRatio)
	return exitOK
}

// runWSClients is `bench ws-clients` (bench ws's child process): the
// subscribers, driven over stdin/stdout (bench.RunWSClients).
func runWSClients(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench ws-clients", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "the hub's address")
	n := fs.Int("subscribers", 1000, "subscribers")
	channels := fs.String("channels", strings.Join(bench.WSDefaultChannels, ","), "channels each subscriber takes")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if err := bench.RunWSClients(*addr, *n, strings.Split(*channels, ","), os.Stdin, stdout); err != nil {
		fmt.Fprintln(stderr, "bench ws-clients:", err)
		return exitFail
	}
	return exitOK
}
