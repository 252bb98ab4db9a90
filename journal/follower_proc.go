package journal

import "github.com/ubscore/ubscore/core"

// Processor is the follower's replica, at the seq of the last record Next
// returned. Read it only between calls of Next, on the follower's
// goroutine, and only through its query methods (the event publisher reads
// the transfer service's handles from it).
func (f *Follower) Processor() *core.Processor { return f.proc }
