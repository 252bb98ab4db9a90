package replication

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/ubscore/ubscore/journal"
)

// TestRetryable: a promotion is tried again on what the log's state may
// mend (no answer, a leader being elected) and never on what trying again
// cannot (this node's files, WAL, venue, lease or pipeline; a record it
// cannot read; its connection or itself closed).
func TestRetryable(t *testing.T) {
	for _, err := range []error{
		context.DeadlineExceeded,
		fmt.Errorf("replication: stream info: %w", context.DeadlineExceeded),
		nats.ErrTimeout,
		nats.ErrNoResponders,
		errors.New("nats: API error: code=503 err_code=10008 description=JetStream system temporarily unavailable"),
	} {
		if !retryable(err) {
			t.Errorf("%v: not retried", err)
		}
	}
	for _, err := range []error{
		ErrDiverged, ErrDivergedState, ErrOtherVenue, ErrForeignLog, ErrLeaseLost, ErrFenced, ErrAlreadyPrimary,
		errSwitched, ErrNodeClosed, ErrRecord, nats.ErrConnectionClosed,
		journal.ErrStopped, journal.ErrSequence, journal.ErrFailed, journal.ErrClosed, journal.ErrCorrupt,
		fmt.Errorf("replication: the venue's id: %w", &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrPermission}),
		fmt.Errorf("%w: the log skips from command 3 to 9", ErrRecord),
	} {
		if retryable(err) {
			t.Errorf("%v: retried", err)
		}
	}
}
