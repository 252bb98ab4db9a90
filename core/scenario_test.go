package core

// This file proves the processor's observable behaviour against readable
// scripts in testdata/scenarios: every command's events are rendered as text
// and compared with the expected section, and after every command the full
// invariant check must pass. `go test ./core -run TestScenarios -rewrite`
// regenerates the expected sections; a rewritten file must be read by hand
// before it is committed (a rewritten wrong answer is a defect). Files named
// bug_*.txt hold hand-written expectations of the correct behaviour for a
// known core bug; -rewrite never touches them.
//
// Script format (raft testdata style). Blocks are separated by blank lines;
// lines starting with # are comments and are kept by -rewrite.
//
//	<command> [key=value | WORD]...
//	----
//	<one line per event, or per line of a directive's output>
//
// Commands (each applies one core Command, seq and time assigned by the runner):
//
//	asset <id> scale=N
//	market <id> base= quote= scale= tick= lot= min= max= maker= taker=
//	deposit|withdraw|refund user= asset= amount= req=
//	adjust user= asset= amount= ref=
//	status user= st=ACTIVE|FROZEN|DISABLED|<n>
//	place user= market= BUY|SELL LIMIT|MARKET [GTC|IOC|FOK|POST_ONLY]
//	      [price=] [qty=] [quote=] [cid=] [stp=cancel|expire|<n>] [side=<n>] [type=<n>] [tif=<n>]
//	cancel user= (id= | cid=) [market=]
//	modify user= id= [price=] [qty=]
//	halt market= | resume market= | tick [full]
//	binary markets (binary_scenario_test.go): binary, activate, suspend, resolve, void,
//	settle, bplace; directives bstate, positions, bdepth, bfault, restart
//
// Directives (read state, apply nothing):
//
//	balances [user=N]     every non-zero balance, by user then asset
//	depth market=N        the book: asks high to low, then bids high to low, FIFO within a level
//	invariants            the full check's violations, or "ok"
//	allow-violations      from here on, do not fail when the full check finds violations
//	                      (only for scripts that break state on purpose)
//	corrupt market=N delta=D  add D to the quantity of the best ask level (or best bid
//	                      level if there are no asks), breaking the book index on purpose
//
// Events print their kind and then every non-zero field (RESULT and TRANSFER
// always print code). Seq and Time are not printed; the runner checks that
// every event carries the command's.

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var scnRewrite = flag.Bool("rewrite", false, "rewrite the expected sections of testdata/scenarios/*.txt")

// scnBlock is one command of a script and the text around it.
type scnBlock struct {
	prefix   []string // comments and blank lines before the command, kept verbatim
	cmd      string
	line     int // 1-based line of cmd
	expected []string
}

func scnParseFile(t *testing.T, path string) (blocks []scnBlock, trailer []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var pending []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") {
			pending = append(pending, l)
			continue
		}
		b := scnBlock{prefix: pending, cmd: strings.TrimSpace(l), line: i + 1}
		pending = nil
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "----" {
			t.Fatalf("%s:%d: command not followed by ----", path, i+1)
		}
		i += 2
		for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			b.expected = append(b.expected, strings.TrimRight(lines[i], " \t"))
		}
		blocks = append(blocks, b)
	}
	return blocks, pending
}

func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no scenario files")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".txt")
		t.Run(name, func(t *testing.T) { scnRunFile(t, f) })
	}
}

func scnRunFile(t *testing.T, path string) {
	blocks, trailer := scnParseFile(t, path)
	r := &scnRunner{p: New(Config{})}
	var out bytes.Buffer
	for i := range blocks {
		b := &blocks[i]
		got := r.exec(t, path, b)
		if (!*scnRewrite || strings.HasPrefix(filepath.Base(path), "bug_")) &&
			strings.Join(got, "\n") != strings.Join(b.expected, "\n") {
			t.Errorf("%s:%d: %s\n--- expected\n%s\n--- got\n%s", path, b.line, b.cmd,
				strings.Join(b.expected, "\n"), strings.Join(got, "\n"))
		}
		for _, l := range b.prefix {
			out.WriteString(l + "\n")
		}
		out.WriteString(b.cmd + "\n----\n")
		for _, l := range got {
			out.WriteString(l + "\n")
		}
		out.WriteString("\n")
	}
	for _, l := range trailer {
		out.WriteString(l + "\n")
	}
	if *scnRewrite && strings.HasPrefix(filepath.Base(path), "bug_") {
		t.Logf("%s: hand-written expectations of a known bug, not rewritten", path)
	} else if *scnRewrite {
		res := bytes.TrimRight(out.Bytes(), "\n")
		if err := os.WriteFile(path, append(res, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scnRunner applies script commands to one processor.
type scnRunner struct {
	p         *Processor
	seq       Seq
	allowViol bool // set by the allow-violations directive
}

// scnArgs is a parsed command line: positional words and key=value pairs.
type scnArgs struct {
	t     *testing.T
	where string
	words []string
	kv    map[string]string
	used  map[string]bool
}

func (a *scnArgs) has(k string) bool { _, ok := a.kv[k]; return ok }

func (a *scnArgs) str(k string) string {
	a.used[k] = true
	return a.kv[k]
}

func (a *scnArgs) int(k string) int64 {
	a.t.Helper()
	s, ok := a.kv[k]
	if !ok {
		return 0
	}
	a.used[k] = true
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		a.t.Fatalf("%s: %s=%q is not an integer", a.where, k, s)
	}
	return v
}

func (a *scnArgs) need(k string) int64 {
	a.t.Helper()
	if !a.has(k) {
		a.t.Fatalf("%s: missing %s=", a.where, k)
	}
	return a.int(k)
}

func (a *scnArgs) key(k string) Key {
	a.t.Helper()
	s, ok := a.kv[k]
	if !ok {
		return Key{}
	}
	a.used[k] = true
	key, ok := KeyFrom(s)
	if !ok {
		a.t.Fatalf("%s: bad key %q", a.where, s)
	}
	return key
}

// done fails on arguments that no handler read (typos must not pass silently).
func (a *scnArgs) done(words int) {
	a.t.Helper()
	for k := range a.kv {
		if !a.used[k] {
			a.t.Fatalf("%s: unknown argument %s=", a.where, k)
		}
	}
	if len(a.words) > words {
		a.t.Fatalf("%s: unexpected words %v", a.where, a.words[words:])
	}
}

func (r *scnRunner) exec(t *testing.T, path string, b *scnBlock) []string {
	t.Helper()
	fields := strings.Fields(b.cmd)
	a := &scnArgs{t: t, where: fmt.Sprintf("%s:%d", path, b.line), kv: map[string]string{}, used: map[string]bool{}}
	for _, f := range fields[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			a.kv[k] = v
		} else {
			a.words = append(a.words, f)
		}
	}
	var c Command
	switch fields[0] {
	case "balances":
		u, all := UserID(a.int("user")), !a.has("user")
		a.done(0)
		return scnBalances(r.p, u, all)
	case "depth":
		m := MarketID(a.need("market"))
		a.done(0)
		return scnDepth(r.p, m)
	case "invariants":
		a.done(0)
		var out []string
		for _, v := range r.p.CheckInvariants() {
			out = append(out, fmt.Sprintf("violation market=%d asset=%d detail=%d", v.Market, v.Asset, v.Detail))
		}
		if len(out) == 0 {
			out = []string{"ok"}
		}
		return out
	case "allow-violations":
		a.done(0)
		r.allowViol = true
		return []string{"ok"}
	case "corrupt":
		m := r.p.marketOf(MarketID(a.need("market")))
		d := Units(a.need("delta"))
		a.done(0)
		if m == nil {
			t.Fatalf("%s: no such market", a.where)
		}
		s := &m.asks
		if len(s.levels) == 0 {
			s = &m.bids
		}
		if len(s.levels) == 0 {
			t.Fatalf("%s: empty book", a.where)
		}
		lv := &s.levels[s.best()]
		lv.qty += d
		return []string{fmt.Sprintf("level price=%d qty=%d", lv.price, lv.qty)}
	case "asset":
		if len(a.words) < 1 {
			t.Fatalf("%s: asset <id>", a.where)
		}
		id, _ := strconv.Atoi(a.words[0])
		c = Command{Kind: KindConfigAsset, Asset: AssetID(id), BaseScale: uint8(a.need("scale"))}
		a.done(1)
	case "market":
		if len(a.words) < 1 {
			t.Fatalf("%s: market <id>", a.where)
		}
		id, _ := strconv.Atoi(a.words[0])
		c = Command{Kind: KindConfigMarket, Market: MarketID(id), Cfg: MarketCfg{
			Base: AssetID(a.need("base")), Quote: AssetID(a.need("quote")), BaseScale: uint8(a.need("scale")),
			Tick: Price(a.need("tick")), Lot: Units(a.need("lot")), MinQty: Units(a.need("min")),
			MaxQty: Units(a.need("max")), MakerFee: Rate(a.need("maker")), TakerFee: Rate(a.need("taker"))}}
		a.done(1)
	case "deposit", "withdraw", "refund", "adjust":
		kind := map[string]Kind{"deposit": KindSpotDeposit, "withdraw": KindSpotWithdraw,
			"refund": KindSpotRefund, "adjust": KindAdjust}[fields[0]]
		k := a.key("req")
		if kind == KindAdjust {
			k = a.key("ref")
		}
		c = Command{Kind: kind, User: UserID(a.need("user")), Asset: AssetID(a.need("asset")),
			Amount: Units(a.int("amount")), Key: k}
		a.done(0)
	case "status":
		c = Command{Kind: KindSetAccountStatus, User: UserID(a.need("user"))}
		switch s := a.str("st"); s {
		case "ACTIVE":
			c.Status = Active
		case "FROZEN":
			c.Status = Frozen
		case "DISABLED":
			c.Status = Disabled
		default:
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%s: bad st=%q", a.where, s)
			}
			c.Status = AccountStatus(n)
		}
		a.done(0)
	case "place":
		c = scnPlace(a)
	case "cancel":
		c = Command{Kind: KindCancelOrder, User: UserID(a.need("user")), OrderID: OrderID(a.int("id")),
			Key: a.key("cid"), Market: MarketID(a.int("market"))}
		a.done(0)
	case "modify":
		c = Command{Kind: KindModifyOrder, User: UserID(a.need("user")), OrderID: OrderID(a.int("id")),
			Key: a.key("cid"), Price: Price(a.int("price")), Qty: Units(a.int("qty"))}
		a.done(0)
	case "halt", "resume":
		c = Command{Kind: KindHaltMarket, Market: MarketID(a.need("market"))}
		if fields[0] == "resume" {
			c.Kind = KindResumeMarket
		}
		a.done(0)
	case "tick":
		c = Command{Kind: KindTick}
		if len(a.words) == 1 && a.words[0] == "full" {
			c.Flags = TickFullCheck
		}
		a.done(len(a.words))
	default:
		var out []string
		var directive bool
		if c, out, directive = r.execBinary(a, fields[0]); directive {
			return out
		}
		if c.Kind == 0 {
			t.Fatalf("%s: unknown command %q", a.where, fields[0])
		}
	}
	r.seq++
	c.Seq, c.Time = r.seq, int64(r.seq)*1000
	evs := r.p.Apply(&c)
	out := make([]string, 0, len(evs))
	for i, e := range evs {
		if e.Seq != c.Seq || e.Time != c.Time {
			t.Errorf("%s: event %d carries seq %d time %d, want %d %d", a.where, i, e.Seq, e.Time, c.Seq, c.Time)
		}
		out = append(out, scnRenderEvent(&e))
	}
	if len(evs) == 0 || evs[len(evs)-1].Kind != EvResult {
		t.Errorf("%s: last event is not RESULT", a.where)
	}
	if v := r.p.CheckInvariants(); len(v) != 0 && !r.allowViol {
		t.Errorf("%s: %s: invariants broken after command: %+v", a.where, b.cmd, v)
	}
	return out
}

func scnPlace(a *scnArgs) Command {
	c := Command{Kind: KindPlaceOrder, User: UserID(a.need("user")), Market: MarketID(a.int("market")),
		Price: Price(a.int("price")), Qty: Units(a.int("qty")), QuoteQty: Units(a.int("quote")), Key: a.key("cid")}
	for _, w := range a.words {
		switch w {
		case "BUY":
			c.Side = Buy
		case "SELL":
			c.Side = Sell
		case "LIMIT":
			c.Type = Limit
		case "MARKET":
			c.Type = Market
		case "GTC":
			c.TIF = GTC
		case "IOC":
			c.TIF = IOC
		case "FOK":
			c.TIF = FOK
		case "POST_ONLY":
			c.TIF = PostOnly
		default:
			a.t.Fatalf("%s: unknown word %q", a.where, w)
		}
	}
	if a.has("side") {
		c.Side = Side(a.int("side"))
	}
	if a.has("type") {
		c.Type = OrderType(a.int("type"))
	}
	if a.has("tif") {
		c.TIF = TimeInForce(a.int("tif"))
	}
	switch s := a.str("stp"); s {
	case "", "cancel":
		c.STP = STPCancelResting
	case "expire":
		c.STP = STPExpireTaker
	default:
		n, err := strconv.Atoi(s)
		if err != nil {
			a.t.Fatalf("%s: bad stp=%q", a.where, s)
		}
		c.STP = STP(n)
	}
	a.done(len(a.words))
	return c
}

var scnSideNames = [...]string{"", "BUY", "SELL"}
var scnAcctNames = [...]string{"ACTIVE", "FROZEN", "DISABLED"}

// scnRenderEvent prints an event's kind and every non-zero field except Seq and
// Time, in declaration order. RESULT and TRANSFER always print their code.
func scnRenderEvent(e *Event) string {
	if e.Kind == EvPosition {
		return scnRenderPosition(e) // binary_scenario_test.go
	}
	var sb strings.Builder
	sb.WriteString(e.Kind.String())
	f := func(name string, v string) { sb.WriteString(" " + name + "=" + v) }
	n := func(name string, v int64) {
		if v != 0 {
			f(name, strconv.FormatInt(v, 10))
		}
	}
	u := func(name string, v uint64) {
		if v != 0 {
			f(name, strconv.FormatUint(v, 10))
		}
	}
	if e.CmdKind != 0 {
		f("cmd", e.CmdKind.String())
	}
	if e.Code != OK || e.Kind == EvResult || e.Kind == EvTransfer {
		f("code", e.Code.String())
	}
	if e.Side != 0 {
		if int(e.Side) < len(scnSideNames) {
			f("side", scnSideNames[e.Side])
		} else {
			n("side", int64(e.Side))
		}
	}
	if e.Status != 0 {
		f("status", e.Status.String())
	}
	u("flags", uint64(e.Flags))
	switch e.Kind {
	case EvMarketHalted, EvCoreHalted:
		f("reason", BreakerReason(e.Detail).String())
	case EvMarketResumed, EvMarketStatus, EvMarketSettled:
		f("to", MarketStatus(e.Detail).String())
	default:
		u("detail", uint64(e.Detail))
	}
	if e.AcctSt != 0 {
		if int(e.AcctSt) < len(scnAcctNames) {
			f("acct", scnAcctNames[e.AcctSt])
		} else {
			n("acct", int64(e.AcctSt))
		}
	}
	u("market", uint64(e.Market))
	u("asset", uint64(e.Asset))
	u("user", uint64(e.User))
	u("other_user", uint64(e.OtherUser))
	u("order", uint64(e.OrderID))
	u("other_order", uint64(e.OtherOrderID))
	u("trade", e.TradeID)
	n("price", int64(e.Price))
	n("qty", int64(e.Qty))
	n("amount", int64(e.Amount))
	n("fee", int64(e.Fee))
	n("fee2", int64(e.Fee2))
	n("d_avail", int64(e.DAvail))
	n("d_frozen", int64(e.DFrozen))
	n("frozen", int64(e.Frozen)) // binary order events (payout is the market's: not repeated here)
	if !e.Key.IsZero() {
		f("key", e.Key.String())
	}
	return sb.String()
}

// scnBalances lists non-zero balances of one user (or of all, by user id).
func scnBalances(p *Processor, user UserID, all bool) []string {
	var users []UserID
	for i := range p.accounts {
		if all || p.accounts[i].id == user {
			users = append(users, p.accounts[i].id)
		}
	}
	sort.Slice(users, func(i, j int) bool { return users[i] < users[j] })
	var out []string
	for _, u := range users {
		a := p.accountIdx(u)
		for asset := AssetID(1); asset < p.balanceSlots(a); asset++ {
			if b := p.balance(a, asset); b != (Balance{}) {
				out = append(out, fmt.Sprintf("user=%d asset=%d avail=%d frozen=%d", u, asset, b.Avail, b.Frozen))
			}
		}
	}
	if len(out) == 0 {
		if all {
			return []string{"none"}
		}
		return []string{fmt.Sprintf("user=%d none", user)}
	}
	return out
}

// scnDepth prints a market's book as a ladder: asks from the highest price
// down, then bids from the highest price down; orders of one level in FIFO order.
func scnDepth(p *Processor, id MarketID) []string {
	m := p.marketOf(id)
	if m == nil {
		return []string{fmt.Sprintf("market=%d unknown", id)}
	}
	out := []string{fmt.Sprintf("market=%d %s orders=%d", id, m.status, m.orders)}
	level := func(tag string, lv *level) {
		for oi := lv.head; oi >= 0; oi = p.pool.slots[oi].next {
			o := &p.pool.slots[oi]
			out = append(out, fmt.Sprintf("%s price=%d id=%d user=%d rem=%d frozen=%d", tag, o.price, o.id, o.user,
				o.remaining(), o.frozen))
		}
	}
	for i := 0; i < len(m.asks.levels); i++ { // asks are stored descending
		level("ASK", &m.asks.levels[i])
	}
	for i := len(m.bids.levels) - 1; i >= 0; i-- { // bids are stored ascending
		level("BID", &m.bids.levels[i])
	}
	return out
}
