package withdraw

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A commit of unknown outcome that cannot be settled because the database
// does not answer within SettleWait is *UnconfirmedError with the id to poll
// (the gateway answers it 202 UNKNOWN) — never nil, never ErrNotRecorded:
// neither "it happened" nor "nothing happened" is known.
func TestSettleDatabaseGoneIsUnconfirmed(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := New(Config{Pool: pool, SettleWait: 300 * time.Millisecond})
	cause := errors.New("connection lost around COMMIT")
	start := time.Now()
	err = s.settle(context.Background(), 99, cause)
	var ue *UnconfirmedError
	if !errors.As(err, &ue) || ue.ID != 99 || !errors.Is(err, cause) {
		t.Fatalf("settle with the database gone: %v; want *UnconfirmedError for id 99 wrapping the cause", err)
	}
	if errors.Is(err, ErrNotRecorded) {
		t.Fatal("an unsettled outcome must not claim nothing happened")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("settle gave up after %v; SettleWait is 300ms", d)
	}
}
