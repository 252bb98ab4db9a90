package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/bench/binaryshape"
)

// runProcessorBinary is `bench processor --shape binary`: the full
// processor on binary YES/NO markets vs on the spot mixed workload, same
// users and resting orders per book, in the same run (bench.RunBinary).
// Its seed is binaryshape.DefaultSeed unless --seed is given.
func runProcessorBinary(fs *flag.FlagSet, pc bench.ProcessorConfig, runs int, asJSON bool, stdout, stderr io.Writer) int {
	cfg := bench.BinaryConfig{Commands: pc.Commands, Runs: runs, Seed: binaryshape.DefaultSeed, Users: pc.Workload.Users,
		PerBook: pc.Workload.SeedPerBook}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "seed" {
			cfg.Seed = pc.Seed
		}
	})
	if cfg.Commands < 1 || cfg.Runs < 1 || cfg.Users < 2 || cfg.Users%2 != 0 || cfg.PerBook < 1 {
		fmt.Fprintln(stderr, "bench processor: --shape binary needs --commands >= 1, --runs >= 1, an even --users >= 2 and --seed-per-book >= 1")
		return exitUsage
	}
	res, err := bench.RunBinary(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bench processor:", err)
		return exitFail
	}
	if asJSON {
		return printJSON(stdout, stderr, "processor", res)
	}
	fmt.Fprintf(stdout, "binary        %.0f cmds/s (%.3f steady allocs/cmd)\nspot mixed    %.0f cmds/s (%.3f steady allocs/cmd)\n"+
		"ratio         %.3f (runs %v)\nper 100 binary commands: transfer YES %.1f, transfer NO %.1f, mint %.1f, burn %.1f fills; "+
		"%.1f cancels, %.1f rejected\n%d commands per side per run, %d users, %d orders per book; medians of %d runs, %s\n",
		res.BinaryPerSec, res.BinaryAllocsCmd, res.MixedPerSec, res.MixedAllocsCmd, res.Ratio, res.Ratios,
		res.TransferYes, res.TransferNo, res.Mint, res.Burn, res.Cancels, res.Rejected,
		res.Commands, res.Users, res.PerBook, res.Runs, res.Clock)
	return exitOK
}

// binaryPairs is the report's row of `processor --shape binary`.
func binaryPairs(e *allEnv) []pair {
	p := pair{Name: "processor, binary YES/NO markets", Unit: "cmd/s", CeilingName: "processor, spot mixed, same run"}
	var r bench.BinaryResult
	if !e.result("processor-binary", &r) {
		if s := e.scenario["processor-binary"]; s != nil {
			p.Note = "processor-binary: " + firstOf(s.Skipped, s.Error)
		}
		return []pair{p}
	}
	p.Value, p.Ceiling, p.Ratio = r.BinaryPerSec, r.MixedPerSec, r.Ratio
	p.Note = fmt.Sprintf("medians of %d runs, %s; %d users, %d orders per book; per 100 commands: mint %.1f, transfer %.1f, "+
		"burn %.1f fills, %.1f rejected; %.3f steady allocs/cmd", r.Runs, r.Clock, r.Users, r.PerBook, r.Mint,
		r.TransferYes+r.TransferNo, r.Burn, r.Rejected, r.BinaryAllocsCmd)
	return []pair{p}
}
