package main

// These tests prove the replay tool against data dirs written by the real
// pipeline: verify reproduces the pipeline's state hash (also end to end with
// the built binaries, the project's done-when check), it fails naming the seq
// on a corrupt middle entry and tolerates a torn tail, --to matches a direct
// core replay, and dump, state and stats agree with the WAL's content.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ubscore/ubscore/bench"
	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/journal"
)

// small keeps the workload's setup short, so a few thousand commands trade.
var small = bench.Options{Users: 300, SeedPerBook: 30}

// makeData runs the pipeline scenario into a fresh dir.
func makeData(t *testing.T, seed uint64, commands int) (string, bench.PipelineResult) {
	t.Helper()
	dir := t.TempDir()
	res, err := bench.RunPipeline(bench.PipelineConfig{Dir: dir, Commands: commands, Producers: 3, Batch: 50,
		Seed: seed, Workload: small})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return dir, res
}

func runReplay(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, env{stdout: &out, stderr: &errb})
	return code, out.String(), errb.String()
}

// directHash applies the workload's first n commands to a fresh processor.
func directHash(t *testing.T, seed uint64, n int) (string, *core.Processor) {
	t.Helper()
	w, err := bench.NewWorkload(seed, small)
	if err != nil {
		t.Fatal(err)
	}
	p := core.New(core.Config{})
	var c core.Command
	for s := core.Seq(1); s <= core.Seq(n); s++ {
		w.Fill(s, &c)
		c.Seq, c.Time = s, bench.DefaultTime
		p.Apply(&c)
	}
	return p.StateHash(), p
}

func verifyJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, errs := runReplay(t, append([]string{"verify", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("verify %v: exit %d: %s", args, code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("verify output is not one JSON line (%v): %q", err, out)
	}
	want := []string{"commands", "last_seq", "state_hash", "cmds_per_sec", "invariants"}
	if len(m) != len(want) {
		t.Fatalf("verify keys %v, want exactly %v", m, want)
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Fatalf("verify output lacks %q: %v", k, m)
		}
	}
	if m["invariants"] != "ok" {
		t.Fatalf("invariants %v", m["invariants"])
	}
	return m
}

func TestVerifyMatchesPipeline(t *testing.T) {
	const seed, n = 11, 4_000
	dir, res := makeData(t, seed, n)
	m := verifyJSON(t, "--data", dir)
	if m["state_hash"] != res.StateHash || m["last_seq"] != float64(n) || m["commands"] != float64(n) {
		t.Fatalf("seed %d: verify %v, pipeline %s@%d", seed, m, res.StateHash, res.LastSeq)
	}
	if want, _ := directHash(t, seed, n); want != res.StateHash {
		t.Fatalf("seed %d: pipeline hash %s, direct core replay %s", seed, res.StateHash, want)
	}
	code, out, errs := runReplay(t, "verify", "--data", dir)
	if code != exitOK || !strings.Contains(out, res.StateHash) || !strings.Contains(out, "matches the replay") {
		t.Fatalf("human verify: exit %d\n%s\n%s", code, out, errs)
	}
}

func TestVerifyTo(t *testing.T) {
	const seed, n, to = 12, 3_000, 2_345
	dir, _ := makeData(t, seed, n)
	want, _ := directHash(t, seed, to)
	m := verifyJSON(t, "--data", dir, "--to", strconv.Itoa(to))
	if m["state_hash"] != want || m["last_seq"] != float64(to) {
		t.Fatalf("seed %d --to %d: %v, want hash %s", seed, to, m, want)
	}
}

// entryOffset returns the byte offset of the frame of seq in the first
// segment (uvarint length, then a 16-byte envelope header, then the payload).
func entryOffset(t *testing.T, seg []byte, seq int) (frame, payload int) {
	t.Helper()
	off := 0
	for s := 1; ; s++ {
		n, k := binary.Uvarint(seg[off:])
		if k <= 0 {
			t.Fatalf("segment ends before seq %d", seq)
		}
		if s == seq {
			return off, off + k + journal.EnvelopeHeaderSize
		}
		off += k + int(n)
	}
}

func firstSegment(dir string) string {
	return filepath.Join(dir, journal.WALDir, fmt.Sprintf("%020d", 1))
}

func TestVerifyFailsOnCorruptMiddleEntry(t *testing.T) {
	const seed, n, bad = 13, 3_000, 1_500
	dir, _ := makeData(t, seed, n)
	path := firstSegment(dir)
	seg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, p := entryOffset(t, seg, bad)
	seg[p+2] ^= 0x40
	if err := os.WriteFile(path, seg, 0o640); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"verify", "stats", "dump"} {
		code, out, errs := runReplay(t, sub, "--data", dir)
		if code != exitFail || !strings.Contains(errs, "seq "+strconv.Itoa(bad)) {
			t.Fatalf("%s on a corrupt seq %d: exit %d, stderr %q", sub, bad, code, errs)
		}
		if sub == "verify" && out != "" {
			t.Fatalf("verify printed a result for a corrupt WAL: %q", out)
		}
	}
}

func TestVerifyToleratesTornTail(t *testing.T) {
	const seed, n = 14, 1_000
	dir, _ := makeData(t, seed, n)
	path := firstSegment(dir)
	seg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	frame, _ := entryOffset(t, seg, n)
	if err := os.WriteFile(path, seg[:frame+5], 0o640); err != nil { // half of the last entry
		t.Fatal(err)
	}
	want, _ := directHash(t, seed, n-1)
	code, out, errs := runReplay(t, "verify", "--json", "--data", dir)
	if code != exitOK || !strings.Contains(out, want) || !strings.Contains(errs, "torn tail") {
		t.Fatalf("torn tail: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	if after, _ := os.ReadFile(path); len(after) != frame+5 {
		t.Fatal("verify modified the WAL")
	}
}

// TestVerifyFromSnapshotAfterFrontTruncation: once the WAL no longer starts
// at seq 1, verify starts from the snapshot that covers the front, and
// fails naming the WAL's first seq when there is none.
func TestVerifyFromSnapshotAfterFrontTruncation(t *testing.T) {
	const seed, n = 15, 2_000
	dir := t.TempDir()
	_, err := bench.RunPipeline(bench.PipelineConfig{Dir: dir, Commands: n, Producers: 2, Seed: seed, Workload: small,
		Journal: journal.Config{SnapshotEvery: 700, SegmentSize: 8 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	walDir := filepath.Join(dir, journal.WALDir)
	w, err := journal.Open(walDir, journal.Options{SegmentSize: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.TruncateFront(1_000); err != nil {
		t.Fatal(err)
	}
	w.Close()
	wi, err := statWAL(walDir)
	if err != nil || wi.firstSeq <= 1 || wi.firstSeq > 1_000 {
		t.Fatalf("after TruncateFront(1000) the WAL starts at %d (%v)", wi.firstSeq, err)
	}
	want, _ := directHash(t, seed, 1_800)
	m := verifyJSON(t, "--data", dir, "--to", "1800")
	// The pipeline snapshots every 700 commands (later if its writer is
	// busy); replay starts from the newest one the WAL continues.
	if c := m["commands"].(float64); m["state_hash"] != want || m["last_seq"] != 1_800.0 || c == 0 ||
		c > float64(1_800-wi.firstSeq+1) {
		t.Fatalf("WAL from %d, --to 1800: %v, want hash %s from a snapshot", wi.firstSeq, m, want)
	}
	if err := os.RemoveAll(filepath.Join(dir, journal.SnapshotDir)); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runReplay(t, "verify", "--data", dir)
	if code != exitFail || !strings.Contains(errs, fmt.Sprintf("seq %d", wi.firstSeq)) {
		t.Fatalf("no snapshot covers the gap before %d: exit %d, %q", wi.firstSeq, code, errs)
	}
}

func TestDump(t *testing.T) {
	const seed, n = 16, 2_500
	dir, _ := makeData(t, seed, n)
	code, out, errs := runReplay(t, "dump", "--data", dir, "--from", "1001", "--to", "2000")
	if code != exitOK {
		t.Fatalf("dump: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 1_000 {
		t.Fatalf("dump --from 1001 --to 2000 printed %d lines", len(lines))
	}
	w, _ := bench.NewWorkload(seed, small)
	for i, l := range lines {
		var rec struct {
			Seq    uint64 `json:"seq"`
			Kind   string `json:"kind"`
			Result string `json:"result"`
			Events []struct {
				Kind string `json:"kind"`
				Code string `json:"code"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", i, err, l)
		}
		var c core.Command
		w.Fill(core.Seq(rec.Seq), &c)
		last := rec.Events[len(rec.Events)-1]
		if rec.Seq != uint64(1_001+i) || rec.Kind != c.Kind.String() || last.Kind != "RESULT" || last.Code != rec.Result {
			t.Fatalf("line %d: %s", i, l)
		}
	}
}

func TestState(t *testing.T) {
	const seed, n, at = 17, 3_000, 2_222
	dir, _ := makeData(t, seed, n)
	_, p := directHash(t, seed, at)
	var user core.UserID
	for _, m := range p.Markets() {
		if os := p.OpenOrders(m.ID, 0, nil); len(os) > 0 {
			user = os[0].User
		}
	}
	// Without names: ids, raw units (and a note on stderr).
	raw := &names{assets: map[core.AssetID]gateway.NamedAsset{}, markets: map[core.MarketID]gateway.NamedMarket{}}
	code, out, errs := runReplay(t, "state", "--json", "--data", dir, "--to", strconv.Itoa(at), "--user", strconv.Itoa(int(user)))
	if code != exitOK || !strings.Contains(errs, "instruments.json") {
		t.Fatalf("state --user: exit %d: %s", code, errs)
	}
	var us userState
	if err := json.Unmarshal([]byte(out), &us); err != nil {
		t.Fatal(err)
	}
	if want := userView(p, user, 0, raw, true); fmt.Sprint(us) != fmt.Sprint(want) || len(us.OpenOrders) == 0 {
		t.Fatalf("user %d at %d:\n got %+v\nwant %+v", user, at, us, want)
	}
	code, out, errs = runReplay(t, "state", "--json", "--data", dir, "--to", strconv.Itoa(at), "--market", "2", "--depth", "3")
	if code != exitOK {
		t.Fatalf("state --market: exit %d: %s", code, errs)
	}
	var ms marketState
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		t.Fatal(err)
	}
	if want, _ := marketView(p, 2, 3, raw, true); fmt.Sprint(ms) != fmt.Sprint(want) || len(ms.Bids) != 3 || len(ms.Asks) != 3 {
		t.Fatalf("market 2 at %d:\n got %+v\nwant %+v", at, ms, want)
	}

	// With the data dir's instruments.json (as the exchange writes it):
	// names in and out, decimals at each asset's scale, --raw for units.
	if err := os.WriteFile(filepath.Join(dir, "instruments.json"), []byte(`{"assets":[{"symbol":"USDT","id":1,"scale":6},
		{"symbol":"BTC","id":2,"scale":8},{"symbol":"ETH","id":3,"scale":8}],"markets":[{"symbol":"BTC-USDT","id":1,
		"base":"BTC","quote":"USDT"},{"symbol":"ETH-USDT","id":2,"base":"ETH","quote":"USDT"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runReplay(t, "state", "--json", "--quiet", "--data", dir, "--to", strconv.Itoa(at), "--market", "ETH-USDT", "--depth", "3")
	if code != exitOK || errs != "" { // no note about missing names (and no progress: --quiet)
		t.Fatalf("state --market ETH-USDT: exit %d: %s", code, errs)
	}
	var named marketState
	if err := json.Unmarshal([]byte(out), &named); err != nil {
		t.Fatal(err)
	}
	bids, _, _ := p.Depth(2, 3, nil, nil)
	if named.Market != "ETH-USDT" || named.ID != 2 || named.Bids[0].Price != gateway.FormatUnits(int64(bids[0].Price), 6) ||
		named.Bids[0].Qty != gateway.FormatUnits(int64(bids[0].Qty), 8) {
		t.Fatalf("named market: %+v (best bid %+v)", named, bids[0])
	}
	// The fee account (user 0): its balances, by name, as decimals.
	code, out, errs = runReplay(t, "state", "--data", dir, "--to", strconv.Itoa(at), "--user", "0", "--asset", "USDT")
	fee := p.BalanceOf(0, 1)
	if code != exitOK || fee.Avail == 0 || !strings.Contains(out, "fee account") ||
		!strings.Contains(out, "USDT") || !strings.Contains(out, gateway.FormatUnits(int64(fee.Avail), 6)) || strings.Contains(out, "BTC ") {
		t.Fatalf("fee account: exit %d: %s %s (want %d USDT units)", code, out, errs, fee.Avail)
	}
	code, out, _ = runReplay(t, "state", "--json", "--raw", "--data", dir, "--to", strconv.Itoa(at), "--user", "0", "--asset", "1")
	if code != exitOK || !strings.Contains(out, fmt.Sprintf(`"available":"%d"`, fee.Avail)) || !strings.Contains(out, `"asset":"USDT"`) {
		t.Fatalf("fee account --raw: exit %d: %s", code, out)
	}
	for _, args := range [][]string{{"--user", "1", "--market", "1"}, {}, {"--market", "1", "--depth", "0"},
		{"--market", "DOGE-USDT"}, {"--user", "1", "--asset", "DOGE"}} {
		if code, _, _ := runReplay(t, append([]string{"state", "--data", dir}, args...)...); code != exitUsage {
			t.Errorf("state %v: exit %d, want usage", args, code)
		}
	}
	if code, out, _ := runReplay(t, "state", "--data", dir, "--market", "1"); code != exitOK || !strings.Contains(out, "resting orders") {
		t.Errorf("human state --market: exit %d: %s", code, out)
	}
}

func TestStats(t *testing.T) {
	const seed, n = 18, 2_000
	dir, _ := makeData(t, seed, n)
	code, out, errs := runReplay(t, "stats", "--json", "--data", dir)
	if code != exitOK {
		t.Fatalf("stats: exit %d: %s", code, errs)
	}
	var r statsReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	sum := func(m map[string]uint64) (s uint64) {
		for _, v := range m {
			s += v
		}
		return s
	}
	if r.FirstSeq != 1 || r.LastSeq != n || r.Commands != n || sum(r.CommandKinds) != n || sum(r.ResultCodes) != n ||
		r.EventKinds["RESULT"] != n || sum(r.EventKinds) != r.Events || r.WALBytes <= 0 || r.WALSegments != 1 {
		t.Fatalf("stats: %+v", r)
	}
	if r.CommandKinds["PLACE_ORDER"] == 0 || r.CommandKinds["CANCEL_ORDER"] == 0 || r.EventKinds["TRADE"] == 0 {
		t.Fatalf("stats saw no trading: %+v", r)
	}
	if code, out, _ := runReplay(t, "stats", "--data", dir); code != exitOK || !strings.Contains(out, "PLACE_ORDER") {
		t.Fatalf("human stats: exit %d: %s", code, out)
	}
}

func TestProgressBarOnTerminal(t *testing.T) {
	dir, res := makeData(t, 19, 500)
	var out, errb bytes.Buffer
	if code := run([]string{"verify", "--json", "--data", dir}, env{stdout: &out, stderr: &errb, tty: true}); code != exitOK ||
		!strings.Contains(out.String(), res.StateHash) {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}

func TestUsageAndMissingData(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"verify"}, {"verify", "--data", "x", "y"}, {"dump", "--json", "--data", "x"}} {
		if code, _, _ := runReplay(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
	missing := filepath.Join(t.TempDir(), "nothing")
	if code, _, errs := runReplay(t, "verify", "--data", missing); code != exitFail || !strings.Contains(errs, "no WAL") {
		t.Errorf("missing dir: exit %d: %q", code, errs)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Error("verify created the data dir")
	}
}
