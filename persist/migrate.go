package persist

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateLockKey is the pg_advisory_xact_lock key that serializes migrations
// across processes ("ubsmigr" in ASCII).
const migrateLockKey int64 = 0x7562736d696772

// Migration is one embedded schema change. Files are named
// migrations/NNNN_description.sql; NNNN is the version, applied in order.
type Migration struct {
	Version int
	Name    string // file name, for logs
	SQL     string
}

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	ents, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("persist: read embedded migrations: %w", err)
	}
	out := make([]Migration, 0, len(ents))
	seen := map[int]string{}
	for _, e := range ents {
		name := e.Name()
		v, err := migrationVersion(name)
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("persist: migrations %s and %s share version %d", prev, name, v)
		}
		seen[v] = name
		data, err := migrationFS.ReadFile(path.Join("migrations", name))
		if err != nil {
			return nil, fmt.Errorf("persist: read migration %s: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(data)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// migrationVersion parses the leading digits of a migration file name.
func migrationVersion(name string) (int, error) {
	digits, _, ok := strings.Cut(name, "_")
	if !ok {
		return 0, fmt.Errorf("persist: migration %q: want NNNN_name.sql", name)
	}
	v, err := strconv.Atoi(digits)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("persist: migration %q: bad version %q", name, digits)
	}
	return v, nil
}

// Migrate applies every embedded migration that schema_migrations does not
// list yet, each in its own transaction that first takes a transaction-scoped
// advisory lock, so concurrent callers (two processes starting together)
// serialize and each migration runs exactly once. Re-running is a no-op.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := Migrations()
	if err != nil {
		return err
	}
	for _, m := range ms {
		if err := applyMigration(ctx, pool, m); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration runs m unless it is already recorded; the check and the
// change happen under the advisory lock in one transaction.
func applyMigration(ctx context.Context, pool *pgxpool.Pool, m Migration) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey); err != nil {
			return fmt.Errorf("persist: migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer     PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("persist: create schema_migrations: %w", err)
		}
		var done bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)",
			m.Version).Scan(&done); err != nil {
			return fmt.Errorf("persist: read schema_migrations: %w", err)
		}
		if done {
			return nil
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("persist: migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, now())",
			m.Version); err != nil {
			return fmt.Errorf("persist: record migration %s: %w", m.Name, err)
		}
		return nil
	})
}
