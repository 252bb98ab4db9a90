package bench

import (
	"errors"
	"math"
	"time"

	"github.com/ubscore/ubscore/core"
)

// ProcessorTarget is the core's throughput goal in commands/s on the mixed
// workload; reports compare the processor scenario against it.
const ProcessorTarget = 3_000_000

// processorChunk is how many commands are filled (untimed) before they are
// applied (timed): big enough that the clock reads are noise, small enough
// to stay in cache (a Command is a few hundred bytes).
const processorChunk = 4_096

// ProcessorConfig configures the processor scenario: the core alone, in
// process, on the workload's mixed stream (no ring, WAL, fsync or replies).
type ProcessorConfig struct {
	Commands int // steady commands applied and timed, >= 1 (setup is applied first, untimed)
	Seed     uint64
	Workload Options
}

// ProcessorResult is the scenario's outcome; its JSON form is the report.
type ProcessorResult struct {
	Commands   int     `json:"commands"`     // steady commands timed
	CmdsPerSec float64 `json:"cmds_per_sec"` // Commands / time spent inside Apply
	NsPerCmd   float64 `json:"ns_per_cmd"`
	Target     float64 `json:"target_cmds_per_sec"` // ProcessorTarget
	Ratio      float64 `json:"ratio"`               // CmdsPerSec / Target
	Rejected   int     `json:"rejected"`            // commands whose result code was not OK
	StateHash  string  `json:"state_hash"`
}

// RunProcessor applies the workload's setup, then cfg.Commands steady
// commands, timing only Apply. The same seed and options give the same
// state hash.
func RunProcessor(cfg ProcessorConfig) (ProcessorResult, error) {
	if cfg.Commands < 1 {
		return ProcessorResult{}, errors.New("bench: processor needs commands >= 1")
	}
	w, err := NewWorkload(cfg.Seed, cfg.Workload)
	if err != nil {
		return ProcessorResult{}, err
	}
	p := core.New(core.Config{})
	var c core.Command
	seq := firstSeq
	for ; int(seq) <= w.SetupLen(); seq++ {
		w.Fill(seq, &c)
		c.Seq, c.Time = seq, DefaultTime
		if ev := p.Apply(&c); ev[len(ev)-1].Code != core.OK {
			return ProcessorResult{}, errors.New("bench: a setup command was rejected")
		}
	}
	buf := make([]core.Command, processorChunk)
	var spent time.Duration
	rejected := 0
	for left := cfg.Commands; left > 0; {
		n := min(left, len(buf))
		for i := range buf[:n] {
			w.Fill(seq+core.Seq(i), &buf[i])
			buf[i].Seq, buf[i].Time = seq+core.Seq(i), DefaultTime
		}
		t0 := time.Now()
		for i := range buf[:n] {
			if ev := p.Apply(&buf[i]); ev[len(ev)-1].Code != core.OK {
				rejected++
			}
		}
		spent += time.Since(t0)
		seq += core.Seq(n)
		left -= n
	}
	rate := float64(cfg.Commands) / spent.Seconds()
	return ProcessorResult{Commands: cfg.Commands, CmdsPerSec: math.Round(rate),
		NsPerCmd: round1(float64(spent.Nanoseconds()) / float64(cfg.Commands)), Target: ProcessorTarget,
		Ratio: roundSig3(rate / ProcessorTarget), Rejected: rejected, StateHash: p.StateHash()}, nil
}

// roundSig3 rounds v to 3 significant digits, so a small ratio (a slow run
// under the race detector on a loaded machine) stays above 0.
func roundSig3(v float64) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	p := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}
