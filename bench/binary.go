package bench

import (
	"errors"
	"math"
	"runtime"
	"time"

	"github.com/ubscore/ubscore/bench/binaryshape"
	"github.com/ubscore/ubscore/core"
)

// The binary scenario (issue 22): the full processor on binary YES/NO
// markets (package binaryshape's stream: mint, transfer and burn fills,
// cancels, refusals) beside the same processor on this package's spot mixed
// workload, with the same users and resting orders per book, in the same
// run. `bench processor --shape binary` runs it; core's
// BenchmarkBinaryVsMixed is its in-package twin (against core's own mixed
// stream).

const (
	// binaryChunk is how many commands are copied or filled (untimed)
	// before they are applied (timed), alike on both sides.
	binaryChunk = processorChunk
	// binarySegment is how many commands each side runs per turn.
	binarySegment = 1 << 14
)

// BinaryConfig selects one comparison.
type BinaryConfig struct {
	Commands int    // timed commands per side per run, >= 1
	Runs     int    // >= 1; the report takes medians
	Seed     uint64 // seeds both streams
	Users    int    // funded users on both sides (even, for binaryshape)
	PerBook  int    // resting orders per book: binaryshape's target, the mixed workload's seed per book
}

// BinaryResult is the comparison's outcome; its JSON form is the report.
type BinaryResult struct {
	Commands     int       `json:"commands"` // timed per side per run
	Runs         int       `json:"runs"`
	Users        int       `json:"users"`
	PerBook      int       `json:"per_book"`
	Stream       int       `json:"binary_stream"`       // binary commands generated; the run restarts them from their snapshot (untimed)
	BinaryPerSec float64   `json:"binary_cmds_per_sec"` // median over runs
	MixedPerSec  float64   `json:"mixed_cmds_per_sec"`  // median over runs
	Ratio        float64   `json:"ratio"`               // median over runs of binary / mixed
	Ratios       []float64 `json:"ratios"`              // per run
	// Allocations per command during the timed turns after each side's
	// first turn on a fresh (restored) processor.
	BinaryAllocsCmd float64 `json:"binary_steady_allocs_per_cmd"`
	MixedAllocsCmd  float64 `json:"mixed_steady_allocs_per_cmd"`
	// The binary stream's mix: fills by kind and refusals per 100 commands.
	TransferYes float64 `json:"transfer_yes_per_100"`
	TransferNo  float64 `json:"transfer_no_per_100"`
	Mint        float64 `json:"mint_per_100"`
	Burn        float64 `json:"burn_per_100"`
	Cancels     float64 `json:"cancels_per_100"`
	Rejected    float64 `json:"rejected_per_100"`
	Clock       string  `json:"clock"`
	// State hashes of both processors at the end of the last run (the
	// binary one after Commands mod Stream commands of its stream, or all
	// of it).
	BinaryHash string `json:"binary_state_hash"`
	MixedHash  string `json:"mixed_state_hash"`
}

// binarySide is one side of the comparison: a processor and where it is in
// its stream.
type binarySide struct {
	snap                     []byte
	p                        *core.Processor
	fill                     func(i int, c *core.Command) // command i of the stream (untimed)
	n                        int                          // stream length; 0: unbounded
	i                        int
	fresh                    bool // restored since its last turn: the next turn grows its tables
	spent                    time.Duration
	steadyAllocs, steadyCmds uint64
}

func (s *binarySide) restart() error {
	p, err := core.Restore(core.Config{}, s.snap)
	s.p, s.i, s.fresh = p, 0, true
	return err
}

// turn applies cmds commands (restarting a bounded stream at its end),
// timing only Apply on the thread clock.
func (s *binarySide) turn(buf []core.Command, cmds int) error {
	var ms runtime.MemStats
	var allocs uint64
	for left := cmds; left > 0; {
		if s.n > 0 && s.i == s.n {
			if err := s.restart(); err != nil {
				return err
			}
		}
		k := min(left, len(buf))
		if s.n > 0 {
			k = min(k, s.n-s.i)
		}
		for j := range buf[:k] {
			s.fill(s.i+j, &buf[j])
		}
		runtime.ReadMemStats(&ms)
		a0 := ms.Mallocs
		t0 := threadClock()
		for j := range buf[:k] {
			s.p.Apply(&buf[j])
		}
		s.spent += threadClock() - t0
		runtime.ReadMemStats(&ms)
		allocs += ms.Mallocs - a0
		s.i += k
		left -= k
	}
	if !s.fresh {
		s.steadyAllocs += allocs
		s.steadyCmds += uint64(cmds)
	}
	s.fresh = false
	return nil
}

// RunBinary generates both workloads and runs the comparison: per run, both
// sides start from their snapshots and take turns by segments of 16k
// commands, each timed alone on the thread's clock, so a neighbour's load
// falls on both alike.
func RunBinary(cfg BinaryConfig) (BinaryResult, error) {
	if cfg.Commands < 1 || cfg.Runs < 1 {
		return BinaryResult{}, errors.New("bench: binary needs commands >= 1 and runs >= 1")
	}
	if cfg.Users < 2 || cfg.Users%2 != 0 || cfg.Users > MaxUsers || cfg.PerBook < 1 || cfg.PerBook > MaxSeedPerBook {
		return BinaryResult{}, errors.New("bench: binary needs an even number of users (2..1000000) and per-book 1..100000")
	}
	bw, err := binaryshape.Generate(binaryshape.Config{Seed: cfg.Seed, Commands: min(cfg.Commands, binaryshape.DefaultCommands),
		Users: cfg.Users, TargetLive: cfg.PerBook})
	if err != nil {
		return BinaryResult{}, err
	}
	mw, err := NewWorkload(cfg.Seed, Options{Users: cfg.Users, SeedPerBook: cfg.PerBook})
	if err != nil {
		return BinaryResult{}, err
	}
	mp := core.New(core.Config{})
	var c core.Command
	for seq := firstSeq; int(seq) <= mw.SetupLen(); seq++ {
		mw.Fill(seq, &c)
		c.Seq, c.Time = seq, DefaultTime
		if ev := mp.Apply(&c); ev[len(ev)-1].Code != core.OK {
			return BinaryResult{}, errors.New("bench: binary: a mixed setup command was rejected")
		}
	}
	steady := firstSeq + core.Seq(mw.SetupLen())
	bin := &binarySide{snap: bw.Snap, n: len(bw.Cmds), fill: func(i int, c *core.Command) { *c = bw.Cmds[i] }}
	mix := &binarySide{snap: mp.AppendSnapshot(nil), fill: func(i int, c *core.Command) {
		seq := steady + core.Seq(i)
		mw.Fill(seq, c)
		c.Seq, c.Time = seq, DefaultTime
	}}
	runtime.LockOSThread() // threadClock reads this thread's clock
	defer runtime.UnlockOSThread()
	buf := make([]core.Command, binaryChunk)
	res := BinaryResult{Commands: cfg.Commands, Runs: cfg.Runs, Users: cfg.Users, PerBook: cfg.PerBook, Stream: len(bw.Cmds),
		Clock: ThreadClockName}
	var binRates, mixRates []float64
	for r := 0; r < cfg.Runs; r++ {
		if err := errors.Join(bin.restart(), mix.restart()); err != nil {
			return BinaryResult{}, err
		}
		bin.spent, mix.spent = 0, 0
		runtime.GC()
		for done := 0; done < cfg.Commands; done += binarySegment {
			n := min(binarySegment, cfg.Commands-done)
			if err := errors.Join(mix.turn(buf, n), bin.turn(buf, n)); err != nil {
				return BinaryResult{}, err
			}
		}
		br, mr := float64(cfg.Commands)/bin.spent.Seconds(), float64(cfg.Commands)/mix.spent.Seconds()
		binRates, mixRates = append(binRates, br), append(mixRates, mr)
		res.Ratios = append(res.Ratios, roundSig3(br/mr))
	}
	res.BinaryHash, res.MixedHash = bin.p.StateHash(), mix.p.StateHash()
	res.BinaryPerSec, res.MixedPerSec = math.Round(median(binRates)), math.Round(median(mixRates))
	res.Ratio = roundSig3(median(append([]float64(nil), res.Ratios...)))
	perCmd := func(a, n uint64) float64 {
		if n == 0 {
			return 0
		}
		return float64(a) / float64(n)
	}
	res.BinaryAllocsCmd, res.MixedAllocsCmd = perCmd(bin.steadyAllocs, bin.steadyCmds), perCmd(mix.steadyAllocs, mix.steadyCmds)
	per100 := func(v int) float64 { return round1(100 * float64(v) / float64(len(bw.Cmds))) }
	m := &bw.Mix
	res.TransferYes, res.TransferNo = per100(m.Fills[core.FillTransferYes]), per100(m.Fills[core.FillTransferNo])
	res.Mint, res.Burn = per100(m.Fills[core.FillMint]), per100(m.Fills[core.FillBurn])
	res.Cancels, res.Rejected = per100(m.Cancels), per100(m.Rejected)
	return res, nil
}
