package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ubscore/ubscore/gateway"
)

// runToken is `exchange token --user N [--admin] [--ttl 1h] [--data-dir D]
// [--jwt-secret S]`: it prints a bearer token for user N on stdout (and
// nothing else there, so TOKEN=$(exchange token --user 42) works). The
// secret is resolved exactly as the server does (flag, UBS_JWT_SECRET, then
// <data-dir>/jwt.secret, generated if missing), so a token minted here is
// accepted by `make run` on the same data dir. Notes go to stderr.
func runToken(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("exchange token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	user := fs.Uint64("user", 0, "user id (the token's sub), > 0; required")
	admin := fs.Bool("admin", false, "grant the admin role (for /admin/v1)")
	ttl := fs.Duration("ttl", time.Hour, "token lifetime (at most "+gateway.MaxTokenTTL.String()+")")
	dataDir := fs.String("data-dir", "./data", "data directory whose jwt.secret signs the token; env UBS_DATA_DIR")
	secret := fs.String("jwt-secret", "", "HS256 secret (overrides <data-dir>/jwt.secret); env UBS_JWT_SECRET")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: exchange token --user N [--admin] [--ttl 1h] [--data-dir D] [--jwt-secret S]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("token: unexpected argument %q", fs.Arg(0))}
	}
	if err := applyEnv(fs, serverFlags, getenv); err != nil {
		return err
	}
	if *user == 0 {
		return usageError{errors.New("token: --user is required (> 0; 0 is the fee account)")}
	}
	var s Secret
	if *secret != "" {
		if err := checkSecret([]byte(*secret), "--jwt-secret (or UBS_JWT_SECRET)"); err != nil {
			return usageError{err}
		}
		s = Secret(*secret)
	} else {
		var err error
		if s, err = loadOrCreateSecret(*dataDir, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
			return err
		}
	}
	a, err := gateway.NewAuthenticator(s)
	if err != nil {
		return err
	}
	tok, err := a.Mint(*user, *admin, *ttl, time.Now())
	if err != nil {
		return usageError{err}
	}
	_, err = fmt.Fprintln(stdout, tok)
	return err
}
