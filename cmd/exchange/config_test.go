package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ubscore/ubscore/gateway"
	"github.com/ubscore/ubscore/instruments"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

const testSecret = "test-secret-0123456789abcdef0123456789abcdef"

func TestConfigPrecedence(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want Config
	}{
		{"defaults", nil, nil,
			Config{HTTPAddr: "127.0.0.1:8080", DataDir: "./data"}},
		{"env", nil, map[string]string{"UBS_HTTP": "0.0.0.0:9000", "UBS_DATA_DIR": "/d", "UBS_PG_URL": "postgres://a/b",
			"DATABASE_URL": "postgres://ignored/x", "UBS_CONFIG": "../../instruments/testdata/default-config.json"},
			Config{HTTPAddr: "0.0.0.0:9000", DataDir: "/d", PGURL: "postgres://a/b", ConfigFile: "../../instruments/testdata/default-config.json"}},
		{"DATABASE_URL fallback", nil, map[string]string{"DATABASE_URL": "postgres://db/x"},
			Config{HTTPAddr: "127.0.0.1:8080", DataDir: "./data", PGURL: "postgres://db/x"}},
		{"empty env is unset", nil, map[string]string{"UBS_HTTP": "", "UBS_PG_URL": "", "DATABASE_URL": "postgres://db/x"},
			Config{HTTPAddr: "127.0.0.1:8080", DataDir: "./data", PGURL: "postgres://db/x"}},
		{"flags win", []string{"--http", "[::1]:7000", "--data-dir", "/f", "--pg-url", "none"},
			map[string]string{"UBS_HTTP": "0.0.0.0:9000", "UBS_DATA_DIR": "/d", "UBS_PG_URL": "postgres://a/b"},
			Config{HTTPAddr: "[::1]:7000", DataDir: "/f", PGURL: "none"}},
		{"explicit empty flag beats env", []string{"--pg-url="}, map[string]string{"DATABASE_URL": "postgres://db/x"},
			Config{HTTPAddr: "127.0.0.1:8080", DataDir: "./data"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseConfig(c.args, envOf(c.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got.HTTPAddr != c.want.HTTPAddr || got.DataDir != c.want.DataDir || got.PGURL != c.want.PGURL ||
				got.ConfigFile != c.want.ConfigFile {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
			if !reflect.DeepEqual(got.Instruments, instruments.Default()) {
				t.Fatal("instruments differ from the built-in config")
			}
		})
	}
}

func TestConfigSecretPrecedence(t *testing.T) {
	other := strings.Repeat("e", 40)
	cfg, err := parseConfig([]string{"--jwt-secret", testSecret}, envOf(map[string]string{"UBS_JWT_SECRET": other}), io.Discard)
	if err != nil || string(cfg.JWTSecret) != testSecret {
		t.Fatalf("flag secret not used (%v)", err)
	}
	cfg, err = parseConfig(nil, envOf(map[string]string{"UBS_JWT_SECRET": other}), io.Discard)
	if err != nil || string(cfg.JWTSecret) != other {
		t.Fatalf("env secret not used (%v)", err)
	}
	// No secret configured: loadConfig reads (or makes) the data dir's file.
	dir := t.TempDir()
	cfg, err = loadConfig([]string{"--data-dir", dir}, envOf(nil), io.Discard, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	file, _ := os.ReadFile(filepath.Join(dir, secretFileName))
	if string(cfg.JWTSecret) != strings.TrimSpace(string(file)) {
		t.Fatal("secret is not the file's content")
	}
}

func TestConfigRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--jwt-secret", "short"},
		{"--http", "no-port"},
		{"--data-dir", ""},
		{"--config", "testdata/does-not-exist.json"},
		{"--bogus"},
		{"extra-arg"},
		{"--snapshot-every", "0"},
		{"--failover", "auto"}, // without --replication sync
		{"--replication", "async", "--replication-url", "nats://n:4222", "--failover", "auto"},
		{"--replication", "sync", "--replication-url", "nats://n:4222", "--failover", "sometimes"},
		// the publisher's default subjects (ubs.>) hold the log's (ubs.log.*) on the same server
		{"--replication", "sync", "--replication-url", "nats://n:4222", "--nats-url", "nats://n:4222"},
	} {
		if _, err := parseConfig(args, envOf(nil), io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	if _, err := parseConfig(nil, envOf(map[string]string{"UBS_JWT_SECRET": "short"}), io.Discard); err == nil {
		t.Error("short UBS_JWT_SECRET accepted")
	}
	for _, args := range [][]string{ // the same, set apart
		{"--replication", "sync", "--replication-url", "nats://n:4222", "--nats-url", "nats://n:4222", "--nats-subject-prefix", "events."},
		{"--replication", "sync", "--replication-url", "nats://n:4222", "--nats-url", "nats://other:4222"},
		{"--replication", "sync", "--replication-url", "nats://n:4222", "--failover", "auto", "--lease-ttl", "1s", "--snapshot-every", "500"},
	} {
		if _, err := parseConfig(append(args, "--jwt-secret", testSecret), envOf(nil), io.Discard); err != nil {
			t.Errorf("%q refused: %v", args, err)
		}
	}
	if _, err := parseConfig([]string{"-h"}, envOf(map[string]string{"UBS_JWT_SECRET": testSecret}), io.Discard); err == nil {
		t.Error("-h did not return ErrHelp")
	}
}

// Usage output shows static defaults: never the environment's secret.
func TestUsageDoesNotEchoEnv(t *testing.T) {
	var out bytes.Buffer
	_, _ = parseConfig([]string{"-h"}, envOf(map[string]string{"UBS_JWT_SECRET": testSecret}), &out)
	if !strings.Contains(out.String(), "-jwt-secret") || strings.Contains(out.String(), testSecret) {
		t.Fatalf("usage:\n%s", out.String())
	}
}

func TestSecretFileGeneratedOnceAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fresh") // does not exist yet
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	s1, err := loadOrCreateSecret(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, secretFileName)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode %v, want 0600", fi.Mode().Perm())
	}
	if raw, err := hex.DecodeString(string(s1)); err != nil || len(raw) != 32 {
		t.Fatalf("secret is not 32 hex-encoded bytes: %v", err)
	}
	s2, err := loadOrCreateSecret(dir, log)
	if err != nil || !bytes.Equal(s1, s2) {
		t.Fatalf("second load differs (%v)", err)
	}
	if n := strings.Count(logs.String(), "generated a new JWT secret"); n != 1 {
		t.Fatalf("generation logged %d times:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), string(s1)) {
		t.Fatal("the secret was logged")
	}
	// An edited file (trailing newline or not) is read as its trimmed content.
	if err := os.WriteFile(path, []byte("  "+testSecret+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s3, err := loadOrCreateSecret(dir, log); err != nil || string(s3) != testSecret {
		t.Fatalf("edited secret: %v", err)
	}
	// Too short a file is an error, not silently replaced.
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadOrCreateSecret(dir, log); err == nil {
		t.Fatal("short secret file accepted")
	}
}

// Processes starting at once on a fresh data dir agree on one secret.
func TestSecretFileConcurrentCreation(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	got := make([]Secret, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = loadOrCreateSecret(dir, slog.New(slog.DiscardHandler)) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("creator %d: %v (secrets differ: %v)", i, errs[i], !bytes.Equal(got[i], got[0]))
		}
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 1 {
		t.Fatalf("temp files left: %v", des)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	s := Secret(testSecret)
	cfg := Config{JWTSecret: s, DataDir: "d"}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("cfg", "cfg", cfg, "secret", s)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("cfg", "cfg", cfg, "secret", s)
	j, _ := json.Marshal(cfg)
	out := fmt.Sprintf("%v %+v %#v %s %q %x %X %d", s, cfg, cfg, s, s, s, s, s) + logs.String() + string(j)
	if strings.Contains(out, testSecret) || strings.Contains(out, hex.EncodeToString([]byte(testSecret))[:16]) ||
		strings.Contains(out, "116 101 115 116") { // %d of "test"
		t.Fatalf("secret printed:\n%s", out)
	}
	if a, err := gateway.NewAuthenticator(cfg.JWTSecret); err != nil || a == nil {
		t.Fatalf("Secret is not usable as []byte: %v", err)
	}
}

func TestTokenSubcommand(t *testing.T) {
	dir := t.TempDir()
	mint := func(env map[string]string, args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := runToken(args, envOf(env), &out, &errOut)
		if strings.Count(out.String(), "\n") > 1 {
			t.Fatalf("stdout is more than the token: %q", out.String())
		}
		return strings.TrimSpace(out.String()), err
	}
	check := func(tok string, secret []byte, user uint64, admin bool) {
		t.Helper()
		a, err := gateway.NewAuthenticator(secret)
		if err != nil {
			t.Fatal(err)
		}
		c, err := a.Authenticate([]byte("Bearer " + tok))
		if err != nil {
			t.Fatalf("token rejected: %v", err)
		}
		if c.UserID != user || c.Admin != admin {
			t.Fatalf("claims %+v, want user %d admin %v", c, user, admin)
		}
		if d := time.Until(c.ExpiresAt); d <= 0 || d > time.Hour+time.Second {
			t.Fatalf("expires in %v", d)
		}
	}

	// The token subcommand never creates a secret (issue 20): with none in
	// the data dir it fails, naming where it looked, and leaves no file.
	if _, err := mint(nil, "--user", "42", "--data-dir", dir); err == nil ||
		!strings.Contains(err.Error(), filepath.Join(dir, "jwt.secret")) || !strings.Contains(err.Error(), "no JWT secret") {
		t.Fatalf("token without a secret: %v, want an error naming %s", err, filepath.Join(dir, "jwt.secret"))
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Fatalf("the token command wrote into the data dir: %v", des)
	}

	// The token subcommand and the server resolve the same secret file
	// (the server generates it).
	cfg, err := loadConfig([]string{"--data-dir", dir}, envOf(nil), io.Discard, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := mint(nil, "--user", "42", "--admin", "--data-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	check(tok, cfg.JWTSecret, 42, true)

	tok, err = mint(map[string]string{"UBS_DATA_DIR": dir}, "--user", "7")
	if err != nil {
		t.Fatal(err)
	}
	check(tok, cfg.JWTSecret, 7, false)

	tok, err = mint(map[string]string{"UBS_JWT_SECRET": testSecret}, "--user", "9", "--data-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	check(tok, []byte(testSecret), 9, false)
	other := strings.Repeat("o", 32)
	tok, err = mint(map[string]string{"UBS_JWT_SECRET": testSecret}, "--user", "9", "--jwt-secret", other, "--ttl", "30m")
	if err != nil {
		t.Fatal(err)
	}
	check(tok, []byte(other), 9, false)

	for _, args := range [][]string{
		{},                             // no --user
		{"--user", "0"},                // the fee account
		{"--user", "-1"},               // not a uint
		{"--user", "1", "--ttl", "0s"}, // ttl out of range
		{"--user", "1", "--ttl", "9000h"},
		{"--user", "1", "--jwt-secret", "short"},
		{"--user", "1", "extra"},
	} {
		if tok, err := mint(nil, append(args, "--data-dir", dir)...); err == nil || tok != "" {
			t.Errorf("%q: token %q, err %v", args, tok, err)
		}
	}
}

// TestSetupPostgresRedacts: a configured URL is used as is and logged
// without its password (persist.RedactURL); "none" is no Postgres.
func TestSetupPostgresRedacts(t *testing.T) {
	var logs bytes.Buffer
	url, stop, err := setupPostgres(context.Background(), Config{PGURL: "postgres://u:hunter2@h/db"}, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil || url != "postgres://u:hunter2@h/db" || stop() != nil {
		t.Fatalf("setupPostgres: %q %v", url, err)
	}
	if strings.Contains(logs.String(), "hunter2") {
		t.Fatalf("password logged: %s", logs.String())
	}
	if url, _, err := setupPostgres(context.Background(), Config{PGURL: pgNone}, slog.New(slog.DiscardHandler)); err != nil || url != "" {
		t.Fatalf("none: %q %v", url, err)
	}
}
