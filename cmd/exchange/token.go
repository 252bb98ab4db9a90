package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/ubscore/ubscore/gateway"
)

// runToken is `exchange token --user N [--admin] [--ttl 1h] [--data-dir D]
// [--jwt-secret S]`: it prints a bearer token for user N on stdout (and
// nothing else there, so TOKEN=$(exchange token --user 42) works). The
// secret is resolved as the server does (flag, UBS_JWT_SECRET, then
// <data-dir>/jwt.secret), so a token minted here is accepted by `make run`
// on the same data dir. Unlike the server it never creates a secret: a token
// signed with a fresh secret that no server uses would only ever answer 401
// "bad token signature". No secret found is an error naming where it looked.
// Notes go to stderr.
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
		path := filepath.Join(*dataDir, secretFileName)
		var err error
		s, err = readSecretFile(path, slog.New(slog.NewTextHandler(stderr, nil)))
		if errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("token: no JWT secret: %s does not exist and neither --jwt-secret nor UBS_JWT_SECRET is set "+
				"(start the server on that data dir once to generate it, or pass --data-dir of the server)", path)
		}
		if err != nil {
			return fmt.Errorf("token: %w", err)
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
