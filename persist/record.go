package persist

import (
	"context"

	"github.com/ubscore/ubscore/core"
)

// Record is one durable command and the events it produced (the last is EvResult).
// Every event carries the command's Seq and Time.
type Record struct {
	Cmd    core.Command
	Events []core.Event
}

// Seq is the record's sequence number (its command's).
func (r *Record) Seq() core.Seq { return r.Cmd.Seq }

// Source yields durable records in seq order starting after a given seq.
type Source interface {
	// Next blocks until at least one record is available (or ctx is done) and returns up to max records, contiguous in seq, starting right after the previous call's last record. The slice and its contents are valid until the next call.
	Next(ctx context.Context, max int) ([]Record, error)
}
