package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/ubscore/ubscore/core"
)

// statsReport is stats' output. Map keys are the core's names.
type statsReport struct {
	FirstSeq     core.Seq          `json:"first_seq"` // first seq replayed (0 if none)
	LastSeq      core.Seq          `json:"last_seq"`
	Commands     uint64            `json:"commands"`     // replayed
	SnapshotSeq  core.Seq          `json:"snapshot_seq"` // replay started from this snapshot (0 = from scratch)
	WALFirstSeq  uint64            `json:"wal_first_seq"`
	WALBytes     int64             `json:"wal_bytes"`
	WALSegments  int               `json:"wal_segments"`
	CommandKinds map[string]uint64 `json:"command_kinds"`
	ResultCodes  map[string]uint64 `json:"result_codes"`
	EventKinds   map[string]uint64 `json:"event_kinds"`
	Events       uint64            `json:"events"`
}

// tally counts in arrays indexed by the core's small integer types, so the
// replay loop does no map work.
type tally struct {
	kinds  [256]uint64
	codes  [1 << 16]uint64
	events [256]uint64
}

func runStats(o *opts, e env) error {
	t := new(tally)
	r, err := replayData(o, e, true, func(c *core.Command, evs []core.Event) {
		t.kinds[c.Kind]++
		t.codes[evs[len(evs)-1].Code]++
		for i := range evs {
			t.events[evs[i].Kind]++
		}
	})
	if err != nil {
		return err
	}
	r.rec.WAL.Close()
	rep := statsReport{LastSeq: r.rec.Proc.LastSeq(), Commands: r.rec.Replayed, SnapshotSeq: r.rec.SnapshotSeq,
		WALFirstSeq: r.wal.firstSeq, WALBytes: r.wal.bytes, WALSegments: r.wal.segments,
		CommandKinds: map[string]uint64{}, ResultCodes: map[string]uint64{}, EventKinds: map[string]uint64{}}
	if rep.Commands != 0 {
		rep.FirstSeq = r.fromSeq
	}
	for k, n := range t.kinds {
		if n != 0 {
			rep.CommandKinds[core.Kind(k).String()] += n
		}
	}
	for c, n := range t.codes {
		if n != 0 {
			rep.ResultCodes[core.Code(c).String()] += n
		}
	}
	for k, n := range t.events {
		if n != 0 {
			rep.EventKinds[core.EventKind(k).String()] += n
			rep.Events += n
		}
	}
	if o.asJSON {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
		return nil
	}
	printStats(e.stdout, &rep)
	return nil
}

func printStats(w io.Writer, r *statsReport) {
	fmt.Fprintf(w, "seqs replayed   %d..%d (%d commands", r.FirstSeq, r.LastSeq, r.Commands)
	if r.SnapshotSeq != 0 {
		fmt.Fprintf(w, ", from the snapshot at seq %d", r.SnapshotSeq)
	}
	fmt.Fprintf(w, ")\nWAL             %d bytes in %d segments, first seq %d\nevents          %d\n",
		r.WALBytes, r.WALSegments, r.WALFirstSeq, r.Events)
	for _, sec := range []struct {
		title string
		m     map[string]uint64
	}{{"command kinds", r.CommandKinds}, {"result codes", r.ResultCodes}, {"event kinds", r.EventKinds}} {
		fmt.Fprintf(w, "%s:\n", sec.title)
		for _, k := range sortedByCount(sec.m) {
			fmt.Fprintf(w, "  %-28s %12d\n", k, sec.m[k])
		}
	}
}

// sortedByCount returns m's keys, largest count first (ties by name).
func sortedByCount(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}
