package stream

import (
	"flag"
	"log/slog"
	"time"

	"github.com/ubscore/ubscore/gateway"
)

// Flags are the WebSocket flags of the exchange (cmd/exchange registers them).
type Flags struct {
	MaxConns int
	MaxSubs  int
	Buffer   int
	Frame    time.Duration
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.IntVar(&f.MaxConns, "ws-max-connections", DefaultMaxConns, "GET /ws: open WebSocket connections at most (beyond: 503 TOO_MANY_CONNECTIONS)")
	fs.IntVar(&f.MaxSubs, "ws-max-subscriptions", DefaultMaxSubs, "GET /ws: subscriptions per connection at most")
	fs.IntVar(&f.Buffer, "ws-buffer", DefaultBuffer, "GET /ws: messages queued per connection; a connection whose buffer fills is closed with 4008 (slow consumer)")
	fs.DurationVar(&f.Frame, "ws-frame", DefaultFrame, "GET /ws: depth, trades and ticker are conflated into frames this long (at most 100ms)")
}

// Config returns the hub's Config for these flags.
func (f *Flags) Config(reg *gateway.Registry, auth *gateway.Authenticator, wal WAL, log *slog.Logger) Config {
	return Config{Registry: reg, Auth: auth, WAL: wal, Logger: log, MaxConns: f.MaxConns, MaxSubs: f.MaxSubs,
		Buffer: f.Buffer, Frame: f.Frame}
}
