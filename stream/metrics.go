package stream

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the hub's counters (Register exports them).
type metrics struct {
	conns       atomic.Int64  // open sockets
	refused     atomic.Uint64 // upgrades refused at MaxConns
	messages    atomic.Uint64 // messages queued to sockets
	slow        atomic.Uint64 // sockets closed as slow consumers (a message dropped)
	expired     atomic.Uint64 // private channels closed by an expired token
	badRequests atomic.Uint64 // client messages answered with an error
	replays     atomic.Uint64 // `since` replays started
	errors      atomic.Uint64 // follower failures (every socket closed, 1011)
}

// Stats is a snapshot of the hub's counters.
type Stats struct {
	Conns, Subscriptions, PrivateSubscriptions int
	Messages, Slow, Expired, Refused           uint64
	FlushedSeq                                 uint64
}

// Stats returns the hub's counters.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	pub, priv := 0, 0
	for _, s := range h.streams {
		pub += len(s.waiting) + len(s.subs[0]) + len(s.subs[1]) + len(s.subs[2])
	}
	for _, l := range h.users {
		priv += len(l)
	}
	h.mu.Unlock()
	return Stats{Conns: int(h.met.conns.Load()), Subscriptions: pub + priv, PrivateSubscriptions: priv,
		Messages: h.met.messages.Load(), Slow: h.met.slow.Load(), Expired: h.met.expired.Load(),
		Refused: h.met.refused.Load(), FlushedSeq: h.flushed.Load()}
}

// Register exports the hub's metrics (ubs_ws_*) to reg; lag is measured
// against durable (the pipeline's durable seq).
func (h *Hub) Register(reg prometheus.Registerer) error {
	g := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	c := func(name, help string, v *atomic.Uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	cs := []prometheus.Collector{
		g("ubs_ws_connections", "Open WebSocket connections (GET /ws).", func() float64 { return float64(h.met.conns.Load()) }),
		g("ubs_ws_subscriptions", "Subscriptions over all WebSocket connections (public and private).", func() float64 { return float64(h.Stats().Subscriptions) }),
		g("ubs_ws_flushed_seq", "Highest seq whose stream messages are all queued to the sockets.", func() float64 { return float64(h.flushed.Load()) }),
		g("ubs_ws_lag_commands", "Durable commands not yet streamed (durable_seq - ubs_ws_flushed_seq).", func() float64 {
			d, f := uint64(h.cfg.WAL.DurableSeq()), h.flushed.Load()
			return float64(d - min(d, f))
		}),
		c("ubs_ws_messages_total", "Messages queued to WebSocket connections.", &h.met.messages),
		c("ubs_ws_dropped_total", "Connections closed as slow consumers (4008): their buffer was full, the message dropped.", &h.met.slow),
		c("ubs_ws_refused_total", "WebSocket upgrades refused: the connection limit was reached.", &h.met.refused),
		c("ubs_ws_token_expired_total", "Private channels closed because the token expired.", &h.met.expired),
		c("ubs_ws_bad_requests_total", "Client messages answered with an error.", &h.met.badRequests),
		c("ubs_ws_replays_total", "Private-channel replays from the WAL (subscribe with since).", &h.met.replays),
		c("ubs_ws_errors_total", "Stream follower failures (every socket closed with 1011).", &h.met.errors),
	}
	for _, col := range cs {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	return nil
}
