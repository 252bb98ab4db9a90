package chaintx

import "time"

// Lease is the right to act for one submitter (spec §3.1): the node that
// holds it with the highest fencing token. Its writes are accepted by the
// database only while owner, token and expiry match (see doc.go).
type Lease struct {
	Submitter Address
	Node      string
	Token     int64     // fencing token; +1 at each take-over
	ExpiresAt time.Time // database time
	Leader    bool      // this node holds it
}

// LeaseConfig are the tunables of §3.1.
type LeaseConfig struct {
	Duration      time.Duration // a lease lasts this long after each renewal (default 10s)
	RenewInterval time.Duration // renewed this often (default Duration/3)
	// SkewAllowance: the node stops acting this long before the lease's
	// expiry as its own clock sees it, so that clock drift between node and
	// database never lets it act on a lease the database considers expired
	// (the database refuses such writes anyway: this only avoids FENCED
	// noise). Default Duration/5.
	SkewAllowance time.Duration
}

func (c *LeaseConfig) defaults() {
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.RenewInterval <= 0 {
		c.RenewInterval = c.Duration / 3
	}
	if c.SkewAllowance <= 0 {
		c.SkewAllowance = c.Duration / 5
	}
}
