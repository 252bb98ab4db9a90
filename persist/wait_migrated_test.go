package persist

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitMigrated(t *testing.T) {
	var m atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if WaitMigrated(ctx, &m, time.Millisecond) {
		t.Fatal("returned true before the migration, with its context ended")
	}
	time.AfterFunc(20*time.Millisecond, func() { m.Store(true) })
	start := time.Now()
	if !WaitMigrated(context.Background(), &m, time.Millisecond) || time.Since(start) < 15*time.Millisecond {
		t.Fatal("did not wait for the migration")
	}
}
