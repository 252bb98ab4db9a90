package main

import "fmt"

// walWindow is what the exchange's WAL did in one measured window, from
// its /metrics read as the window opened and closed: how many group
// commits (one write + one fdatasync each) carried the window's orders and
// how long each took. With the CPU split it says whether the exchange's
// idle time is the wait for the disk (few, slow commits) or its CPU.
type walWindow struct {
	Commits           float64 `json:"commits"`              // group commits in the window
	CommandsPerCommit float64 `json:"commands_per_commit"`  // mean commands per group commit
	SingleShare       float64 `json:"single_command_share"` // share of the commits that carried one command
	AppendMeanUs      float64 `json:"append_mean_us"`       // mean write + fdatasync per commit, µs
}

// The exchange's metrics a walWindow is made of (package metrics).
const (
	mAppendSum   = "ubs_journal_append_seconds_sum"
	mAppendCount = "ubs_journal_append_seconds_count"
	mBatchSum    = "ubs_journal_batch_commands_sum"
	mBatchCount  = "ubs_journal_batch_commands_count"
	mBatchOne    = `ubs_journal_batch_commands_bucket{le="1"}`
)

var walKeys = []string{mAppendSum, mAppendCount, mBatchSum, mBatchCount, mBatchOne}

// newWALWindow is the window between the samples before and after; nil if
// either lacks a metric or no commit happened in between.
func newWALWindow(before, after map[string]float64) *walWindow {
	for _, k := range walKeys {
		if _, ok := before[k]; !ok {
			return nil
		}
		if _, ok := after[k]; !ok {
			return nil
		}
	}
	d := func(k string) float64 { return after[k] - before[k] }
	n := d(mBatchCount)
	if n <= 0 || d(mAppendCount) <= 0 {
		return nil
	}
	return &walWindow{
		Commits:           n,
		CommandsPerCommit: d(mBatchSum) / n,
		SingleShare:       d(mBatchOne) / n,
		AppendMeanUs:      d(mAppendSum) / d(mAppendCount) * 1e6,
	}
}

func (w *walWindow) String() string {
	return fmt.Sprintf("%.0f group commits, %.1f commands each (%.0f%% of one), write+fdatasync %.0f us mean",
		w.Commits, w.CommandsPerCommit, w.SingleShare*100, w.AppendMeanUs)
}
