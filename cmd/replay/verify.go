package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"

	"github.com/ubscore/ubscore/core"
)

// verifyReport is verify's --json output: exactly these keys.
type verifyReport struct {
	Commands   uint64   `json:"commands"` // commands replayed
	LastSeq    core.Seq `json:"last_seq"`
	StateHash  string   `json:"state_hash"`
	CmdsPerSec float64  `json:"cmds_per_sec"`
	Invariants string   `json:"invariants"` // "ok": anything else is an error exit instead
}

func runVerify(o *opts, e env) error {
	r, err := replayData(o, e, true, nil)
	if err != nil {
		return err
	}
	defer r.rec.WAL.Close()
	// journal.Recover already failed on a corrupt entry, a gap and an
	// undecodable command; a broken invariant at the end is reported in
	// Open (the server would start that market or the core halted).
	if n := len(r.rec.Open) + len(r.rec.Contained); n != 0 {
		return fmt.Errorf("%d invariant violations in the state at seq %d (open %v, under halts %v)", n,
			r.rec.Proc.LastSeq(), r.rec.Open, r.rec.Contained)
	}
	if r.violations != 0 {
		return fmt.Errorf("%d invariant violation events during replay (seqs %d..%d)", r.violations, r.fromSeq,
			r.rec.Proc.LastSeq())
	}
	if r.rec.Proc.Halted() {
		return errors.New("the core is halted at the end of the replay")
	}
	snap, err := checkSnapshotAtEnd(r, e.stderr)
	if err != nil {
		return err
	}
	rep := verifyReport{
		Commands:   r.rec.Replayed,
		LastSeq:    r.rec.Proc.LastSeq(),
		StateHash:  r.rec.StateHash,
		CmdsPerSec: math.Round(float64(r.rec.Replayed) / r.elapsed.Seconds()),
		Invariants: "ok",
	}
	if o.asJSON {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
		return nil
	}
	from := "seq 1 (whole WAL)"
	if r.rec.SnapshotSeq != 0 {
		from = fmt.Sprintf("the snapshot at seq %d", r.rec.SnapshotSeq)
	}
	fmt.Fprintf(e.stdout, "replayed from  %s\ncommands       %d\nlast_seq       %d\nstate_hash     %s\n"+
		"cmds_per_sec   %.0f\nelapsed        %v\ninvariants     ok\nsnapshot       %s\n",
		from, rep.Commands, rep.LastSeq, rep.StateHash, rep.CmdsPerSec, r.elapsed.Round(1e6), snap)
	return nil
}

// checkSnapshotAtEnd compares the replayed state with a stored snapshot at
// the same seq, if there is one that replay did not start from: they must be
// byte-identical.
func checkSnapshotAtEnd(r *replayed, stderr io.Writer) (string, error) {
	last := r.rec.Proc.LastSeq()
	if last == 0 || r.rec.SnapshotSeq == last {
		return "none to compare", nil
	}
	data, err := r.rec.Snapshots.Load(uint64(last))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("none at seq %d", last), nil
	}
	if err != nil { // the WAL is fine; the journal skips a damaged snapshot too
		fmt.Fprintf(stderr, "replay: warning: snapshot at seq %d: %v\n", last, err)
		return fmt.Sprintf("seq %d unreadable: %v", last, err), nil
	}
	snap, err := core.Restore(core.Config{}, data)
	if err != nil {
		return "", fmt.Errorf("snapshot at seq %d does not restore: %w", last, err)
	}
	if h := snap.StateHash(); h != r.rec.StateHash {
		return "", fmt.Errorf("snapshot at seq %d has state hash %s, replay reached %s", last, h, r.rec.StateHash)
	}
	return fmt.Sprintf("seq %d matches the replay", last), nil
}
