package publish

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// The publisher in the server: configuration, metrics and start. Off
// unless Config.NATSURL is set.

// Config is the server's publisher configuration (its flags).
type Config struct {
	NATSURL string // --nats-url: the NATS server; "" = publisher off
	Stream  string // --nats-stream: the stream's name
	Prefix  string // --nats-subject-prefix: its subjects' prefix
}

// Default is the default configuration (the publisher off).
func Default() Config { return Config{Stream: Stream, Prefix: SubjectPrefix} }

// NewFollower returns the publisher (nil when off), registered as a WAL
// follower of ret, with its metrics on reg (durable: the WAL's durable seq,
// 0 before the core is up). Call it before the pipeline starts, so the WAL
// it needs is kept from the start.
func NewFollower(f Config, ret *journal.Retention, reg prometheus.Registerer, durable func() core.Seq, log *slog.Logger) *Publisher {
	if f.NATSURL == "" {
		return nil
	}
	p := New(f.NATSURL, log)
	p.Stream, p.Prefix = f.Stream, f.Prefix
	ret.Register("publisher", p.Checkpoint)
	gaugeFunc := func(name, help string, fn func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
	}
	lag := func() float64 {
		d, c := durable(), p.Checkpoint()
		return float64(d - min(c, d))
	}
	gaugeFunc("ubs_publisher_published_seq", "Highest seq all of whose events are in the JetStream stream.", func() float64 { return float64(p.Checkpoint()) })
	gaugeFunc("ubs_publisher_lag_commands", "Durable commands not yet published (durable_seq - published_seq).", lag)
	gaugeFunc("ubs_publisher_lag_seconds", "Age of the oldest durable command not yet published (0 = caught up).", func() float64 {
		if lag() == 0 {
			return 0
		}
		if t := p.Stats().LastTime; t > 0 {
			return time.Since(time.Unix(0, t)).Seconds()
		}
		return 0
	})
	gaugeFunc("ubs_publisher_messages_total", "Messages stored in the stream by this process.", func() float64 { return float64(p.Stats().Messages) })
	gaugeFunc("ubs_publisher_errors_total", "Publish failures (each resumes from the stream's last message).", func() float64 { return float64(p.Stats().Errors) })
	gaugeFunc("ubs_publisher_gap_commands_total", "Commands never published: the WAL was released past the publisher's checkpoint.", func() float64 { return float64(p.Stats().Gaps) })
	return p
}

// Start runs p in wg until ctx ends (nil p: nothing).
func Start(ctx context.Context, p *Publisher, pl *journal.Pipeline, wg *sync.WaitGroup) {
	if p == nil {
		return
	}
	wg.Go(func() { p.Run(ctx, pl) })
}
