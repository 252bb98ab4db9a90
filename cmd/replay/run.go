package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/core"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `usage: replay <verify|dump|state|stats> --data DIR [flags]

  verify   replay everything, check invariants, print the state hash
  dump     one JSON line per command with its events
  state    a user's balances (--user U, 0 = the fee account [--asset A]) or a market's depth
           (--market M [--depth N]) as of --to; names and decimals (--raw: units)
  stats    counts per command kind, result code and event kind; seq range; WAL size

run "replay <subcommand> -h" for its flags
`

// env is the process environment run works in (tests substitute buffers).
type env struct {
	stdout, stderr io.Writer
	tty            bool // stderr is a terminal: draw a progress bar
}

// opts are the flags shared by every subcommand, plus theirs.
type opts struct {
	data    string
	to      uint64
	from    uint64
	asJSON  bool
	quiet   bool
	cpuprof string
	user    int64  // state: -1 = none; 0 = the fee account
	market  string // state: a symbol or an id
	asset   string // state: a symbol or an id
	depth   int
	raw     bool   // state: amounts in raw units
	config  string // state: names file (default <data>/instruments.json)
}

type subcommand func(o *opts, e env) error

func run(args []string, e env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return exitUsage
	}
	subs := map[string]subcommand{"verify": runVerify, "dump": runDump, "state": runState, "stats": runStats}
	name := args[0]
	sub, ok := subs[name]
	if !ok {
		if name == "-h" || name == "--help" || name == "help" {
			fmt.Fprint(e.stdout, usage)
			return exitOK
		}
		fmt.Fprintf(e.stderr, "replay: unknown subcommand %q\n%s", name, usage)
		return exitUsage
	}
	o, code := parseFlags(name, args[1:], e)
	if o == nil {
		return code
	}
	stop, err := bench.StartCPUProfile(o.cpuprof)
	if err == nil {
		err = sub(o, e)
		if perr := stop(); err == nil {
			err = perr
		}
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(e.stderr, "replay %s: %v\n", name, err)
			return exitUsage
		}
		fmt.Fprintf(e.stderr, "replay %s: %v\n", name, err)
		return exitFail
	}
	return exitOK
}

// usageError is a bad combination of flags.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func parseFlags(name string, args []string, e env) (*opts, int) {
	fs := flag.NewFlagSet("replay "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	o := &opts{}
	fs.StringVar(&o.data, "data", "", "data dir holding wal/ and snapshots/ (required)")
	fs.Uint64Var(&o.to, "to", 0, "stop after this seq (0 = the whole WAL)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress on stderr")
	fs.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile to this file")
	if name != "dump" {
		fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	}
	switch name {
	case "dump":
		fs.Uint64Var(&o.from, "from", 0, "print only commands from this seq on")
	case "state":
		fs.Int64Var(&o.user, "user", -1, "user id whose balances and open orders to print (0 = the fee account)")
		fs.StringVar(&o.market, "market", "", "market whose book to print: a symbol (BTC-USDT) or an id")
		fs.StringVar(&o.asset, "asset", "", "with --user: only this asset's balance (a symbol or an id)")
		fs.IntVar(&o.depth, "depth", 10, "price levels per side for --market")
		fs.BoolVar(&o.raw, "raw", false, "amounts in raw units (the core's integers) instead of decimals at each asset's scale")
		fs.StringVar(&o.config, "config", "", "names and scales of the instruments: the exchange's --config file "+
			"(default: <data>/instruments.json, written by the exchange at start)")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, exitOK
		}
		return nil, exitUsage
	}
	if fs.NArg() != 0 || o.data == "" {
		fmt.Fprintf(e.stderr, "replay %s: --data DIR is required and no positional arguments are allowed\n", name)
		fs.Usage()
		return nil, exitUsage
	}
	return o, exitOK
}

// warnLogger passes the journal's warnings (torn tail, damaged snapshot) to stderr.
func warnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func seqOf(v uint64) core.Seq { return core.Seq(v) }
