// Command replay inspects a data dir (WAL + snapshots) by replaying it
// through the core, read-only: nothing on disk is changed, not even a torn
// tail.
//
//	replay verify --data DIR [--to SEQ] [--json]
//	replay dump   --data DIR [--from SEQ] [--to SEQ]
//	replay state  --data DIR [--to SEQ] [--json] [--raw] [--config F] (--user U [--asset A] | --market M [--depth N])
//	replay stats  --data DIR [--to SEQ] [--json]
//
// Every subcommand also takes --quiet (no progress) and --cpuprofile FILE.
//
// Where replay starts: verify, dump and stats replay from scratch when the
// WAL still starts at seq 1 (journal.RecoverConfig.IgnoreSnapshots), so every
// command is re-derived and seen; otherwise (the WAL front was truncated)
// from the newest snapshot at or below --to that the WAL continues. state
// always starts from that snapshot when there is one (it only needs the end
// state).
//
//   - verify replays up to --to (default: the whole WAL), runs the full
//     invariant check, and prints commands (replayed), last_seq, state_hash,
//     cmds_per_sec and invariants. With --json: exactly one JSON object with
//     those five keys, invariants being "ok". Any failure — a corrupt entry,
//     a gap, an undecodable command, an invariant violation event during
//     replay or a broken invariant at the end, a snapshot at the last seq whose
//     state differs from the replayed one — exits 1 with the error on stderr.
//     A torn tail (an interrupted last write) is not a failure: it is what a
//     crash leaves, and the journal truncates it at start; a warning names it.
//   - dump writes one JSON line per command: the command's fields, its
//     result code ("result") and its events in order ("events"), with kind,
//     code, side, type, tif and status as names (core's String forms). Zero
//     fields are omitted (in the core, absent == zero). --from limits the
//     output, not the replay.
//   - state prints a user's balances, open orders, binary positions and
//     transfers (its handle, the PENDING ones, the newest 10; user 0: the
//     fee account, its balances), or a market's book depth (best first), as of
//     --to. Markets and assets are given and shown by name, amounts as
//     decimals at the asset's scale (--raw: the core's integer units); the
//     names come from <data>/instruments.json, which the exchange writes at
//     every start, or from --config (the exchange's config file format).
//   - stats counts commands per kind, results per code and events per kind,
//     and reports the seq range and the WAL's size on disk.
//
// Progress goes to stderr: a progress bar when stderr is a terminal,
// otherwise a log line every second. Exit status: 0 ok, 1 failure, 2 usage.
package main

import (
	"os"

	"golang.org/x/term"
)

func main() {
	env := env{stdout: os.Stdout, stderr: os.Stderr, tty: term.IsTerminal(int(os.Stderr.Fd()))}
	os.Exit(run(os.Args[1:], env))
}
