#!/usr/bin/env bash
# Instructions per message of the full processor and of the bare FIFO book
# on the book-shape flow (issue 25; core's BenchmarkProcessorBookShape),
# counted by valgrind's callgrind. Unlike seconds, the count does not move
# with a neighbour's load on a shared machine: the same commit gives the
# same numbers, so two commits compare exactly (seconds still decide; the
# count says how much work there is, not how fast it runs).
#
# usage: bench/shape_instructions.sh [scenario] [accounts]
#   scenario: normal (default), wide-swing or flash-crash
#   accounts: 8k (default) or 1000k (one per order; the setup of a million
#             accounts under valgrind takes several minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
scenario="${1:-normal}"
accounts="${2:-8k}"
case "$scenario/$accounts" in
normal/8k | normal/1000k | wide-swing/8k | wide-swing/1000k | flash-crash/8k | flash-crash/1000k) ;;
*) echo "usage: $0 [normal|wide-swing|flash-crash] [8k|1000k]" >&2; exit 2 ;;
esac
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/core.test" ./core
# callgrind trips over the Go runtime's preemption signals: turn them off,
# and one P keeps the run on one thread.
(cd core && GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind \
	--callgrind-out-file="$tmp/cg.out" "$tmp/core.test" -test.run '^$' \
	-test.bench "^BenchmarkProcessorBookShape\$/^${scenario}\$/^accounts=${accounts}\$" -test.benchtime 1x \
	>"$tmp/log" 2>&1) || { cat "$tmp/log" >&2; exit 1; }
# The calls made by the timed loops: core.(*Processor).Apply from the
# adapter's loop and bookshape.(*Book).Apply from RunShape's, each once per
# message, with the instructions of everything they call. callgrind may
# split a Go function into several names (Apply, Apply'2: stack switches):
# the sums take every caller line of each. In the caller tree a function's "<"
# lines (its callers) come before its "*" line.
callgrind_annotate --tree=caller --inclusive=yes --threshold=100 "$tmp/cg.out" 2>/dev/null | awk '
function num(s) { gsub(/[^0-9]/, "", s); return s + 0 }
/^ *[0-9,]+ .*< / { n++; cost[n] = num($1); from[n] = $0; match($0, /\([0-9,]+x\)/); calls[n] = num(substr($0, RSTART, RLENGTH)); next }
/\*  / {
	proc = $0 ~ /core\.\(\*Processor\)\.Apply([^A-Za-z]|$)/
	book = $0 ~ /bookshape\.\(\*Book\)\.Apply([^A-Za-z]|$)/
	for (i = 1; i <= n; i++) {
		if (proc && from[i] ~ /bench\.\(\*ShapeWorkload\)\.Apply/) { pi += cost[i]; pn += calls[i] }
		if (book && from[i] ~ /bench\.RunShape/) { bi += cost[i]; bn += calls[i] }
	}
}
!/< / { n = 0 }
END {
	if (pn == 0 || pn != bn) { print "shape_instructions: calls not found (processor " pn ", book " bn ")" > "/dev/stderr"; exit 1 }
	printf "messages %d\nprocessor %.0f instructions/msg\nbare book %.0f instructions/msg\nprocessor/book %.2f\n", pn, pi/pn, bi/bn, pi/bi
}'
