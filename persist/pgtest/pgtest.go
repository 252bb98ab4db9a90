// Package pgtest gives tests a throw-away Postgres database on the local
// test server (UBS_TEST_PG_URL, default the trust-auth server on
// 127.0.0.1:5432). Only tests import it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const defaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// AdminURL is the DSN databases are created and dropped through.
func AdminURL() string {
	if u := os.Getenv("UBS_TEST_PG_URL"); u != "" {
		return u
	}
	return defaultAdminURL
}

// NewDB creates database ubs_test_<random>, drops it when the test ends,
// and returns its URL. When Postgres is unreachable the test is skipped,
// unless CI is set, where it fails.
func NewDB(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("Postgres unreachable at %s (set UBS_TEST_PG_URL; CI=1 makes this fail): %v", AdminURL(), err)
		}
		t.Fatalf("Postgres unreachable at %s: %v", AdminURL(), err)
	}
	defer admin.Close(ctx)
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	name := "ubs_test_" + hex.EncodeToString(rnd[:])
	// Reaching the server is bounded tightly (an absent server skips the
	// test quickly); creating the database is not: CREATE DATABASE copies
	// the template and waits on its locks, and on a busy 2-core machine
	// (other suites creating and dropping databases, fsyncs queued) it
	// took over 5 s.
	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	if _, err := admin.Exec(cctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, AdminURL())
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return withDatabase(AdminURL(), name)
}

// withDatabase is dsn (a URL or keyword/value DSN) naming database db.
func withDatabase(dsn, db string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		return u.String()
	}
	return dsn + " dbname=" + db
}
