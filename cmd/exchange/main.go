// Command exchange runs the UBSCore exchange core.
//
// This first version recovers the core from --data-dir (snapshot + WAL +
// invariant check), installs the built-in default config on a fresh data
// dir, and runs the sequenced pipeline until SIGINT/SIGTERM, when it drains,
// fsyncs, snapshots and exits. The HTTP API, auth and the Postgres sink come
// with the server issue.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "exchange:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("exchange", flag.ContinueOnError)
	dataDir := fs.String("data-dir", envOr("UBS_DATA_DIR", "./data"), "data directory (WAL + snapshots); env UBS_DATA_DIR")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := newLogger()
	// Register before anything is logged, so a signal sent as soon as the
	// process speaks is a graceful shutdown, never a kill.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	pl, err := journal.Start(journal.Config{Dir: *dataDir, Logger: log})
	if err != nil {
		return err
	}
	log.Info("exchange: core recovered", "durable_seq", pl.DurableSeq(), "data_dir", *dataDir)
	if pl.DurableSeq() == 0 {
		r := journal.NewReply()
		for _, c := range configCommands() {
			if _, err := pl.Submit(&c, r); err != nil {
				return err
			}
			if err := pl.Wait(r); err != nil {
				return err
			}
			if res := r.Result(); res.Code != core.OK {
				return fmt.Errorf("default config: %v: %v", c.Kind, res.Code)
			}
		}
		log.Info("exchange: default config installed", "assets", len(defaultAssets), "markets", len(defaultMarkets))
	}
	select {
	case s := <-sig:
		log.Info("exchange: shutting down", "signal", s.String())
	case <-pl.Dead():
	}
	err = pl.Close()
	log.Info("exchange: stopped", "seq", pl.Processor().LastSeq(), "state_hash", pl.Processor().StateHash())
	return err
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

// newLogger logs JSON when stdout is not a terminal, text otherwise.
func newLogger() *slog.Logger {
	if fi, err := os.Stdout.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return slog.New(slog.NewTextHandler(os.Stdout, nil))
	}
	return slog.New(slog.NewJSONHandler(os.Stdout, nil))
}
