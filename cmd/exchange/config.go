package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/instruments"
	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist/chainside"
	"github.com/ubscore/ubscore/protection"
	"github.com/ubscore/ubscore/publish"
	"github.com/ubscore/ubscore/replication"
	"github.com/ubscore/ubscore/stream"
)

// Config is the server's resolved configuration. Every setting is a flag
// with an environment fallback; a flag given on the command line wins over
// the environment, which wins over the default. An environment variable set
// to "" counts as unset.
type Config struct {
	// HTTPAddr is the listen address of the HTTP API (--http, UBS_HTTP).
	HTTPAddr string
	// DataDir holds the WAL, snapshots, jwt.secret and the private Postgres
	// cluster (pg/) (--data-dir, UBS_DATA_DIR).
	DataDir string
	// PGURL is the Postgres URL (--pg-url, UBS_PG_URL, then DATABASE_URL).
	// As parsed: "" = a private cluster under DataDir/pg (localpg), or no
	// Postgres if the host has no PostgreSQL binaries; "none" = no Postgres.
	// serve gets the final value: the URL to use, "" = run without Postgres.
	PGURL string
	// JWTSecret is the HS256 secret (--jwt-secret, UBS_JWT_SECRET, else the
	// content of DataDir/jwt.secret, generated on first run). It never prints.
	JWTSecret Secret
	// ConfigFile is the --config (UBS_CONFIG) JSON file, "" = built-in config.
	ConfigFile string
	// Instruments are the assets and markets (with their transfer settings):
	// the built-in defaults or those of ConfigFile (package instruments).
	Instruments instruments.Config

	// Internal transfers (need Postgres).
	// FaultInjection serves /admin/v1/faults (--enable-fault-injection; tests
	// only) and accepts the core's fault commands (core.Config.AllowFaults).
	FaultInjection bool
	// TransferStaleAfter is the recovery worker's threshold: non-terminal
	// transfers not updated for this long are resumed (--transfer-stale-after).
	TransferStaleAfter time.Duration
	// TransferRateLimits enables the spec's per-user limits (1.5.6):
	// TransferPerSecond requests per second, TransferPerDay transfers per
	// UTC day; 0 disables one (--transfer-rate-per-second, --transfer-per-day).
	TransferPerSecond int
	TransferPerDay    int
	// InvariantInterval is the period of the conservation check (MON-003)
	// (--invariant-interval; 0 = only on GET /admin/v1/invariants).
	InvariantInterval time.Duration

	// Chain is the chain side: withdrawals and managed txs (persist/chainside; off without --chain-rpc).
	Chain chainside.Config
	// Protection is the runtime protection (spec 004; package protection).
	Protection protection.Config
	// FollowerMaxRetained bounds the WAL kept for a follower that does not
	// advance, in commands behind the durable seq (--follower-max-retained).
	FollowerMaxRetained uint64
	// HistoryWindow is how many finished orders and trades the server keeps
	// in memory for GET /order/{id}, the order history and my-trades; older
	// ones are read from Postgres (--history-window, 1..gateway.MaxFinishedOrders).
	HistoryWindow int
	// P2P is the user-to-user transfer service (spec 003; gateway/p2p_service.go).
	P2P gateway.P2PServiceConfig
	// Publish is the event publisher (NATS JetStream; package publish).
	Publish publish.Config
	// Replication is this node's place in a replicated venue (package
	// replication; Mode "off": a single node, the default).
	Replication replication.NodeConfig
	// Stream is the WebSocket fan-out, GET /ws (package stream).
	Stream stream.Flags
	// P2PRetention is how long finished spec 003 transfers stay in the core
	// (--p2p-retention; only with Postgres: docs/p2p-retention.md).
	P2PRetention time.Duration
	// SnapshotEvery is how many commands apart the journal writes periodic
	// snapshots (--snapshot-every; journal.DefaultSnapshotEvery).
	SnapshotEvery uint64
	// RealtimeProcessor runs the core's processor on a real-time thread
	// (--realtime-processor; journal.Config.RealtimeProcessor).
	RealtimeProcessor bool
}

// pgNone is the --pg-url value that disables Postgres.
const pgNone = "none"

// secretFileName is the generated secret's file in the data dir.
const secretFileName = "jwt.secret"

// Secret is a secret byte string that never prints: fmt (every verb),
// log/slog and encoding/json all render it as "[redacted]". It converts to
// []byte implicitly (gateway.NewAuthenticator(cfg.JWTSecret)).
type Secret []byte

const redacted = "[redacted]"

func (Secret) String() string               { return redacted }
func (Secret) GoString() string             { return redacted }
func (Secret) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, redacted) }
func (Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// privatePostgresDir is where the private cluster lives (--pg-url "").
func (c Config) privatePostgresDir() string { return filepath.Join(c.DataDir, "pg") }

// usageError is a command-line mistake (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// envFlag binds a flag to its environment fallbacks (first non-empty wins).
type envFlag struct {
	name string
	envs []string
}

// serverFlags are the flags of the server and their environment variables.
var serverFlags = []envFlag{
	{"http", []string{"UBS_HTTP"}},
	{"data-dir", []string{"UBS_DATA_DIR"}},
	{"pg-url", []string{"UBS_PG_URL", "DATABASE_URL"}},
	{"jwt-secret", []string{"UBS_JWT_SECRET"}},
	{"config", []string{"UBS_CONFIG"}},
}

// applyEnv sets every flag of fs that was not given on the command line from
// its environment variables. Defaults shown by -h stay the static ones, so
// usage output never echoes the environment (UBS_JWT_SECRET).
func applyEnv(fs *flag.FlagSet, bindings []envFlag, getenv func(string) string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, b := range bindings {
		if set[b.name] || fs.Lookup(b.name) == nil {
			continue
		}
		for _, e := range b.envs {
			if v := getenv(e); v != "" {
				if err := fs.Set(b.name, v); err != nil {
					return usageError{fmt.Errorf("%s: %w", e, err)}
				}
				break
			}
		}
	}
	return nil
}

// parseConfig parses the server's command line and environment and loads the
// instruments. It does not touch the data dir (see resolveSecret).
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("exchange", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var secret string
	fs.StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:8080", "HTTP listen address; env UBS_HTTP")
	fs.StringVar(&cfg.DataDir, "data-dir", "./data", "data directory (WAL, snapshots, jwt.secret, private Postgres in pg/); env UBS_DATA_DIR")
	fs.StringVar(&cfg.PGURL, "pg-url", "", "Postgres URL; empty = a private cluster under <data-dir>/pg (none if the host has no PostgreSQL binaries); \"none\" = no Postgres; env UBS_PG_URL, then DATABASE_URL")
	fs.StringVar(&secret, "jwt-secret", "", "HS256 secret for bearer tokens, at least 32 bytes (a flag is visible in ps: prefer the env or the file); empty = <data-dir>/jwt.secret, generated on first run; env UBS_JWT_SECRET")
	fs.StringVar(&cfg.ConfigFile, "config", "", "JSON file with assets and markets; empty = the built-in config; env UBS_CONFIG")
	fs.BoolVar(&cfg.FaultInjection, "enable-fault-injection", false, "serve POST/DELETE /admin/v1/faults (tests only: makes adapters misbehave or kill the process)")
	fs.DurationVar(&cfg.TransferStaleAfter, "transfer-stale-after", time.Minute, "the recovery worker resumes non-terminal transfers not updated for this long")
	fs.IntVar(&cfg.TransferPerSecond, "transfer-rate-per-second", 10, "internal-transfer requests per user per second (0 = no limit)")
	fs.IntVar(&cfg.TransferPerDay, "transfer-per-day", 100, "internal transfers per user per UTC day (0 = no limit)")
	fs.DurationVar(&cfg.InvariantInterval, "invariant-interval", 10*time.Second, "period of the FUNDING+SPOT conservation check (0 = on request only)")
	registerChain(fs, &cfg.Chain)
	prot := protection.Default()
	fs.DurationVar(&cfg.Protection.CoreCheckInterval, "core-check-interval", prot.CoreCheckInterval, "period of the core's full invariant check on the state follower's replica (off the acknowledgement path); a violation halts its market or the core (0 = off)")
	fs.Uint64Var(&cfg.FollowerMaxRetained, "follower-max-retained", uint64(journal.DefaultMaxRetained), "WAL commands kept for a follower (the Postgres sink) that does not advance; past it the follower is released with a CRITICAL alert and its gap recorded")
	fs.DurationVar(&cfg.Protection.AuditRetention, "audit-retention", prot.AuditRetention, "how long the wal_events audit rows are kept in Postgres (0 = forever)")
	fs.IntVar(&cfg.HistoryWindow, "history-window", gateway.MaxFinishedOrders, "finished orders and trades kept in memory for the order history; older ones come from Postgres")
	p2p := gateway.DefaultP2PService()
	fs.StringVar(&cfg.P2P.Asset, "p2p-asset", p2p.Asset, "the asset of the user-to-user transfer service (spec 003: /balance-service, /transfers); empty = service off")
	fs.DurationVar(&cfg.P2P.Hold, "p2p-hold", p2p.Hold, "how long a user-to-user transfer stays PENDING (cancellable) before it executes")
	fs.DurationVar(&cfg.P2P.Tick, "p2p-tick", p2p.Tick, "how often the timer executes the due user-to-user transfers")
	pub := publish.Default()
	fs.StringVar(&cfg.Publish.Stream, "nats-stream", pub.Stream, "the JetStream stream the event publisher writes (one writer per stream)")
	fs.StringVar(&cfg.Publish.Prefix, "nats-subject-prefix", pub.Prefix, "the prefix of the stream's subjects (ubs. gives ubs.transfer.created, ubs.trade, ...)")
	fs.StringVar(&cfg.Publish.NATSURL, "nats-url", pub.NATSURL, "NATS server (JetStream) the event publisher writes stream "+publish.Stream+" to, e.g. nats://127.0.0.1:4222; empty = publisher off; env UBS_NATS_URL")
	registerReplication(fs, &cfg.Replication)
	cfg.Stream.Register(fs)
	fs.DurationVar(&cfg.P2PRetention, "p2p-retention", gateway.DefaultP2PRetention, "how long a finished user-to-user transfer stays in the core before only Postgres holds it (with Postgres only; without it nothing is forgotten)")
	fs.BoolVar(&cfg.RealtimeProcessor, "realtime-processor", false, "run the core's processor on a real-time thread (SCHED_FIFO 1, Linux; needs CAP_SYS_NICE, else a warning and normal priority): its longest pause per run fell from a median of 3.6 ms to 0.6 ms over the same 13 runs on 2 cores (0.2 ms over 23; not bounded), and the other stages' acks got slower: for machines with a core to spare per busy pipeline thread (docs/operations.md)")
	fs.Uint64Var(&cfg.SnapshotEvery, "snapshot-every", journal.DefaultSnapshotEvery, "commands between the journal's periodic snapshots (written off the acknowledgement path; with --failover auto the primary also puts each in the NATS snapshot bucket for bootstrapping nodes)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage:\n  exchange [flags]            run the exchange\n  exchange token --user N     print a bearer token (exchange token -h)\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, usageError{err}
	}
	if fs.NArg() > 0 {
		return Config{}, usageError{fmt.Errorf("unexpected argument %q (subcommands: token)", fs.Arg(0))}
	}
	if err := applyEnv(fs, append(append(serverFlags, chainEnv...), publishEnv...), getenv); err != nil {
		return Config{}, err
	}
	if err := cfg.Chain.Validate(); err != nil {
		return Config{}, usageError{err}
	}
	if err := cfg.P2P.Validate(); err != nil {
		return Config{}, usageError{err}
	}
	if cfg.SnapshotEvery == 0 {
		return Config{}, usageError{errors.New("--snapshot-every must be > 0")}
	}
	if cfg.Replication.Mode == replication.ModeOff && cfg.Replication.Failover == replication.FailoverAuto {
		return Config{}, usageError{errors.New("--failover auto needs --replication sync")}
	}
	if cfg.Replication.Mode != replication.ModeOff {
		if cfg.Replication.Failover == replication.FailoverAuto {
			cfg.Replication.Role = replication.RoleStandby // the lease decides who becomes the primary
		}
		if cfg.Replication.Advertise == "" {
			cfg.Replication.Advertise = cfg.HTTPAddr
		}
		if err := cfg.Replication.Validate(); err != nil {
			return Config{}, usageError{err}
		}
		if err := subjectsApart(cfg.Publish, cfg.Replication.Log); err != nil {
			return Config{}, usageError{err}
		}
	}
	if _, _, err := net.SplitHostPort(cfg.HTTPAddr); err != nil {
		return Config{}, usageError{fmt.Errorf("--http %q: %w", cfg.HTTPAddr, err)}
	}
	if cfg.DataDir == "" {
		return Config{}, usageError{errors.New("--data-dir must not be empty")}
	}
	if cfg.Protection.CoreCheckInterval < 0 || cfg.Protection.AuditRetention < 0 || cfg.FollowerMaxRetained == 0 || cfg.P2PRetention <= 0 {
		return Config{}, usageError{errors.New("--core-check-interval and --audit-retention must be >= 0, --follower-max-retained and --p2p-retention > 0")}
	}
	if cfg.HistoryWindow < 1 || cfg.HistoryWindow > gateway.MaxFinishedOrders {
		return Config{}, usageError{fmt.Errorf("--history-window must be in 1..%d", gateway.MaxFinishedOrders)}
	}
	if cfg.TransferStaleAfter <= 0 || cfg.TransferPerSecond < 0 || cfg.TransferPerDay < 0 || cfg.InvariantInterval < 0 {
		return Config{}, usageError{errors.New("--transfer-stale-after must be > 0; --transfer-rate-per-second, --transfer-per-day and --invariant-interval must be >= 0")}
	}
	if secret != "" {
		if err := checkSecret([]byte(secret), "--jwt-secret (or UBS_JWT_SECRET)"); err != nil {
			return Config{}, usageError{err}
		}
		cfg.JWTSecret = Secret(secret)
	}
	var err error
	if cfg.ConfigFile == "" {
		cfg.Instruments = instruments.Default()
	} else if cfg.Instruments, err = instruments.Load(cfg.ConfigFile); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// registerChain binds the --chain-* flags to c (defaults: chainside.Default).
func registerChain(fs *flag.FlagSet, c *chainside.Config) {
	d := chainside.Default()
	fs.StringVar(&c.RPC, "chain-rpc", d.RPC, "EVM JSON-RPC URL for withdrawals and managed transactions; empty = chain side off; env UBS_CHAIN_RPC")
	fs.StringVar(&c.KeyFile, "chain-key-file", d.KeyFile, "file holding the hot wallet's hex private key (needed with --chain-rpc); env UBS_CHAIN_KEY_FILE")
	fs.Uint64Var(&c.Finality, "chain-finality", d.Finality, "blocks (the receipt's included) before a tx is CONFIRMED / FAILED_FINAL")
	fs.StringVar(&c.NodeID, "chain-node-id", d.NodeID, "this node's name in the submitter lease, unique per process; empty = host name + random, new at every start (logged)")
	fs.DurationVar(&c.Lease, "chain-lease", d.Lease, "submitter lease duration (renewed every third of it)")
	fs.DurationVar(&c.StuckAfter, "chain-stuck-after", d.StuckAfter, "no receipt this long after allocation: STUCK (CRITICAL log, hook)")
	fs.DurationVar(&c.Resubmit, "chain-resubmit-interval", d.Resubmit, "a pending tx without receipt is broadcast again this often (same nonce and bytes)")
	fs.DurationVar(&c.ResubmitMax, "chain-resubmit-max-interval", d.ResubmitMax, "a STUCK tx is resent with a delay doubling from --chain-resubmit-interval up to this (one WARN per doubling)")
	fs.StringVar(&c.StuckAction, "chain-stuck-action", d.StuckAction, "what the hook does with a STUCK tx: NOOP, CANCEL, REPLACE or PLACEHOLDER")
	fs.StringVar(&c.Assets, "chain-assets", d.Assets, "withdrawable assets: SYMBOL:CHAIN_DECIMALS[:MIN[:MAX]],... (MIN/MAX in the asset's decimals)")
	fs.IntVar(&c.Workers, "chain-workers", d.Workers, "writer workers (hash(submitter) % N)")
	fs.DurationVar(&c.RPCTimeout, "chain-rpc-timeout", d.RPCTimeout, "deadline of every chain RPC call; a call without an answer by then fails (ubs_chain_rpc_failures_total) and is retried later")
	fs.DurationVar(&c.Create, "chain-create-timeout", d.Create, "POST /admin/v1/tx waits this long for the writer, then answers 202 UNKNOWN with the request_id")
	fs.DurationVar(&c.Guard.BalanceInterval, "chain-balance-interval", d.Guard.BalanceInterval,
		"the hot wallet's balance is read this often in the background (no RPC per request)")
	fs.StringVar(&c.Guard.BalanceMargin, "chain-balance-margin", d.Guard.BalanceMargin,
		"native coin (ETH, 18 decimals) the hot wallet keeps above its unpaid txs' value and gas; below it: CRITICAL alert, new withdrawals refused (HOT_WALLET_INSUFFICIENT)")
	fs.StringVar(&c.Guard.Limits, "chain-withdraw-limits", d.Guard.Limits,
		"default daily withdrawal limits per user: SYMBOL:DAILY_AMOUNT:DAILY_COUNT,... (UTC day; 0 = no limit; admin endpoints override per user)")
}

// registerReplication binds the --replication* flags to c.
func registerReplication(fs *flag.FlagSet, c *replication.NodeConfig) {
	fs.StringVar((*string)(&c.Mode), "replication", string(replication.ModeOff), "replicated log: off, sync (acknowledged once a NATS quorum holds it too) or async (acknowledged after the local fsync; a take-over loses the lag)")
	fs.StringVar(&c.Log.URL, "replication-url", "", "NATS server(s) of the replicated log, comma separated")
	fs.StringVar(&c.Log.Stream, "replication-stream", replication.DefaultStream, "the JetStream stream of the replicated log")
	fs.StringVar(&c.Log.Subject, "replication-subject", replication.DefaultSubject, "the subject prefix of the log's records")
	fs.IntVar(&c.Log.Replicas, "replication-replicas", 1, "the stream's replicas (3 on a 3-node NATS cluster)")
	fs.StringVar((*string)(&c.Role), "role", string(replication.RolePrimary), "with --replication: primary (takes commands) or standby (applies the primary's, serves reads)")
	fs.StringVar(&c.Log.Node, "node-id", replication.DefaultNodeID(), "this node's name in the log's epoch markers")
	fs.StringVar(&c.Advertise, "advertise", "", "the HTTP address a standby gives clients for this node as the primary; empty = --http")
	fs.StringVar(&c.Failover, "failover", replication.FailoverManual, "with --replication sync: manual (POST /admin/v1/replication/promote) or auto (every node starts as a standby; the holder of a lease in the NATS cluster takes over as the primary)")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", replication.DefaultFailoverLeaseTTL, "with --failover auto: the lease's TTL (the same on every node): a dead primary is replaced about this long after its last renewal")
	fs.Uint64Var(&c.HashEvery, "replication-hash-every", replication.DefaultHashEvery, "every node hashes its state at each multiple of this seq; a standby whose hash differs from the primary's stops (CRITICAL)")
}

var (
	chainEnv   = []envFlag{{"chain-rpc", []string{"UBS_CHAIN_RPC"}}, {"chain-key-file", []string{"UBS_CHAIN_KEY_FILE"}}}
	publishEnv = []envFlag{{"nats-url", []string{"UBS_NATS_URL"}}}
)

// loadConfig is parseConfig plus the secret: the configured one, or the
// data dir's jwt.secret (generated, and logged as generated, on first run).
func loadConfig(args []string, getenv func(string) string, stderr io.Writer, log *slog.Logger) (Config, error) {
	cfg, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return Config{}, err
	}
	if len(cfg.JWTSecret) == 0 {
		if cfg.JWTSecret, err = loadOrCreateSecret(cfg.DataDir, log); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

func checkSecret(s []byte, what string) error {
	if len(s) < gateway.MinSecretLen {
		return fmt.Errorf("%s must be at least %d bytes (got %d)", what, gateway.MinSecretLen, len(s))
	}
	return nil
}

// loadOrCreateSecret returns the secret in <dataDir>/jwt.secret (its
// content, surrounding whitespace trimmed, is the HS256 key as is). If the
// file does not exist it is created: 32 random bytes, hex-encoded (64
// characters), mode 0600. Creation is atomic and exclusive (a temp file
// linked into place), so two processes starting at once agree on one secret.
func loadOrCreateSecret(dataDir string, log *slog.Logger) (Secret, error) {
	path := filepath.Join(dataDir, secretFileName)
	s, err := readSecretFile(path, log)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	// journal.CreateOnce's file is 0600 (CreateTemp); the content is the hex text plus "\n".
	if created, err := journal.CreateOnce(dataDir, secretFileName, hex.EncodeToString(raw[:])+"\n"); err != nil {
		return nil, err
	} else if created {
		log.Info("exchange: generated a new JWT secret", "file", path)
	}
	return readSecretFile(path, log) // ours, or the one a concurrent process linked first
}

func readSecretFile(path string, log *slog.Logger) (Secret, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := bytes.TrimSpace(b)
	if err := checkSecret(s, path); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("exchange: the JWT secret file is readable by other users; chmod 600 it", "file", path, "mode", fi.Mode().Perm().String())
	}
	return Secret(s), nil
}

// subjectsApart refuses an event publisher and a replicated log on the same
// NATS server whose subjects overlap (the defaults do: ubs.> holds
// ubs.log.*): JetStream refuses the second stream, and the publisher would
// retry it for ever, publishing nothing.
func subjectsApart(pub publish.Config, log replication.Config) error {
	if pub.NATSURL == "" {
		return nil
	}
	shared := false
	for _, a := range strings.Split(pub.NATSURL, ",") {
		for _, b := range strings.Split(log.URL, ",") {
			shared = shared || strings.TrimSpace(a) == strings.TrimSpace(b)
		}
	}
	prefix, subj := pub.Prefix, log.Subject
	if prefix == "" {
		prefix = publish.SubjectPrefix
	}
	if subj == "" {
		subj = replication.DefaultSubject
	}
	if shared && (strings.HasPrefix(subj+".", prefix) || strings.HasPrefix(prefix, subj+".")) {
		return fmt.Errorf("--nats-subject-prefix %q holds the replicated log's subjects %s.* on the same NATS server: "+
			"give one of them another prefix (e.g. --nats-subject-prefix events.)", prefix, subj)
	}
	return nil
}
