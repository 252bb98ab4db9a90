package main

import (
	"math"
	"testing"
)

const metricsBefore = `# HELP ubs_journal_append_seconds WAL write + fsync time per group commit.
# TYPE ubs_journal_append_seconds histogram
ubs_journal_append_seconds_bucket{le="0.001"} 90
ubs_journal_append_seconds_bucket{le="+Inf"} 100
ubs_journal_append_seconds_sum 0.05
ubs_journal_append_seconds_count 100
ubs_journal_batch_commands_bucket{le="1"} 40
ubs_journal_batch_commands_bucket{le="4"} 70
ubs_journal_batch_commands_sum 1000
ubs_journal_batch_commands_count 100
ubs_sink_lag_commands 12
ubs_journal_batch_commands_sum_extra 5
`

const metricsAfter = `ubs_journal_append_seconds_sum 0.55
ubs_journal_append_seconds_count 350
ubs_journal_batch_commands_bucket{le="1"} 90
ubs_journal_batch_commands_sum 16000
ubs_journal_batch_commands_count 350
`

func TestParseSamples(t *testing.T) {
	got := parseSamples(metricsBefore, []string{"ubs_sink_lag_commands", mBatchOne, mBatchSum, "ubs_absent"})
	want := map[string]float64{"ubs_sink_lag_commands": 12, mBatchOne: 40, mBatchSum: 1000}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

func TestNewWALWindow(t *testing.T) {
	before, after := parseSamples(metricsBefore, walKeys), parseSamples(metricsAfter, walKeys)
	w := newWALWindow(before, after)
	if w == nil {
		t.Fatal("nil window")
	}
	// 250 commits of 15000 commands, 50 of them single, 0.5 s of appends.
	want := walWindow{Commits: 250, CommandsPerCommit: 60, SingleShare: 0.2, AppendMeanUs: 2000}
	if math.Abs(w.Commits-want.Commits) > 1e-9 || math.Abs(w.CommandsPerCommit-want.CommandsPerCommit) > 1e-9 ||
		math.Abs(w.SingleShare-want.SingleShare) > 1e-9 || math.Abs(w.AppendMeanUs-want.AppendMeanUs) > 1e-6 {
		t.Fatalf("got %+v, want %+v", *w, want)
	}
	if s := w.String(); s != "250 group commits, 60.0 commands each (20% of one), write+fdatasync 2000 us mean" {
		t.Errorf("String() = %q", s)
	}
	// No window: a missing scrape, a missing metric, no commit in between,
	// or the samples the wrong way round.
	missing := parseSamples(metricsAfter, []string{mAppendSum})
	for name, c := range map[string][2]map[string]float64{
		"no before": {nil, after}, "no after": {before, nil}, "metric missing": {before, missing},
		"no commit": {after, after}, "reversed": {after, before},
	} {
		if w := newWALWindow(c[0], c[1]); w != nil {
			t.Errorf("%s: %+v, want nil", name, *w)
		}
	}
}
