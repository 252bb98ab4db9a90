package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
)

// TempDatabase creates database ubs_bench_<random> on the server at
// adminURL for a scenario that hands a URL to another process (the
// exchange's sink), and returns that URL and the function that drops the
// database (forcing its connections closed), which the caller must call.
func TempDatabase(ctx context.Context, adminURL string) (string, func() error, error) {
	cc, err := pgx.ParseConfig(adminURL)
	if err != nil {
		return "", nil, err
	}
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("bench: %q is not a postgres:// URL", adminURL)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", nil, err
	}
	name := "ubs_bench_" + hex.EncodeToString(rnd[:])
	exec := func(ctx context.Context, sql string) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		conn, err := pgx.ConnectConfig(ctx, cc)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("bench: create database %s: %w", name, err)
	}
	drop := func() error {
		if err := exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("bench: drop database %s: %w", name, err)
		}
		return nil
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}
