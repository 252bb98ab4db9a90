package main

import (
	"context"
	"flag"
	"log/slog"
	"sync"
	"time"

	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/publish"
)

// The event publisher (NATS JetStream, package publish): flag, metrics and
// wiring. Off unless --nats-url is set.

// publishFlags are the publisher's flags.
type publishFlags struct {
	NATSURL string // --nats-url: the NATS server; "" = publisher off
	Stream  string // --nats-stream: the stream's name
	Prefix  string // --nats-subject-prefix: its subjects' prefix
}

func (f *publishFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.Stream, "nats-stream", publish.Stream, "the JetStream stream the event publisher writes (one writer per stream)")
	fs.StringVar(&f.Prefix, "nats-subject-prefix", publish.SubjectPrefix, "the prefix of the stream's subjects (ubs. gives ubs.transfer.created, ubs.trade, ...)")
	fs.StringVar(&f.NATSURL, "nats-url", "", "NATS server (JetStream) the event publisher writes stream "+publish.Stream+" to, e.g. nats://127.0.0.1:4222; empty = publisher off; env UBS_NATS_URL")
}

var publishEnv = []envFlag{{"nats-url", []string{"UBS_NATS_URL"}}}

// newPublisher returns the publisher (nil when off), registered as a WAL
// follower under --follower-max-retained, with its metrics. Call it
// before the pipeline starts, so the WAL it needs is kept from the start.
func newPublisher(f publishFlags, ret *journal.Retention, m *metrics, log *slog.Logger) *publish.Publisher {
	if f.NATSURL == "" {
		return nil
	}
	p := publish.New(f.NATSURL, log)
	p.Stream, p.Prefix = f.Stream, f.Prefix
	ret.Register("publisher", p.Checkpoint)
	fac := promFactory{m.reg}
	lag := func() float64 {
		pl := m.pl.Load()
		if pl == nil {
			return 0
		}
		d, c := pl.DurableSeq(), p.Checkpoint()
		return float64(d - min(c, d))
	}
	fac.gaugeFunc("ubs_publisher_published_seq", "Highest seq all of whose events are in the JetStream stream.", func() float64 { return float64(p.Checkpoint()) })
	fac.gaugeFunc("ubs_publisher_lag_commands", "Durable commands not yet published (durable_seq - published_seq).", lag)
	fac.gaugeFunc("ubs_publisher_lag_seconds", "Age of the oldest durable command not yet published (0 = caught up).", func() float64 {
		if lag() == 0 {
			return 0
		}
		if t := p.Stats().LastTime; t > 0 {
			return time.Since(time.Unix(0, t)).Seconds()
		}
		return 0
	})
	fac.gaugeFunc("ubs_publisher_messages_total", "Messages stored in the stream by this process.", func() float64 { return float64(p.Stats().Messages) })
	fac.gaugeFunc("ubs_publisher_errors_total", "Publish failures (each resumes from the stream's last message).", func() float64 { return float64(p.Stats().Errors) })
	fac.gaugeFunc("ubs_publisher_gap_commands_total", "Commands never published: the WAL was released past the publisher's checkpoint.", func() float64 { return float64(p.Stats().Gaps) })
	return p
}

// runPublisher runs p until ctx ends (nil p: nothing).
func runPublisher(ctx context.Context, p *publish.Publisher, pl *journal.Pipeline, wg *sync.WaitGroup) {
	if p == nil {
		return
	}
	wg.Go(func() { p.Run(ctx, pl) })
}
