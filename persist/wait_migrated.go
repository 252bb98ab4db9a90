package persist

import (
	"context"
	"sync/atomic"
	"time"
)

// WaitMigrated waits until migrated is set (the server sets it once
// Migrate succeeded), looking every poll; it reports false if ctx ended
// first. The jobs that need the tables wait with it.
func WaitMigrated(ctx context.Context, migrated *atomic.Bool, poll time.Duration) bool {
	for !migrated.Load() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(poll):
		}
	}
	return true
}
