package persist

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// OpenPool returns the exchange's pool for rawURL (ConfigurePool; TLS off
// when the server is on this machine and no sslmode was chosen, see
// plainOnLoopback, which getenv's PGSSLMODE also chooses). It connects
// lazily: Postgres may be down now. Errors show the URL redacted.
func OpenPool(ctx context.Context, rawURL string, getenv func(string) string, log *slog.Logger) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", RedactURL(rawURL), err)
	}
	// synchronous_commit stays on: the WAL retention pin is the sink's
	// persisted seq, which must be durable in Postgres (with it off, a
	// Postgres crash could lose commits whose WAL was already released;
	// measured: it did not raise the sink's throughput here anyway).
	if plainOnLoopback(rawURL, &pcfg.ConnConfig.Config, getenv) {
		log.Info("postgres: server on this machine, TLS off (set sslmode to choose)")
	}
	ConfigurePool(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", RedactURL(rawURL), err)
	}
	return pool, nil
}

// plainOnLoopback turns TLS off in c when every host it would try is on
// this machine (loopback address, localhost, unix socket) and the operator
// did not choose an sslmode (in the URL or PGSSLMODE): pgx's default,
// sslmode=prefer, encrypts the loopback traffic of the sink (about 7 rows
// per order) for no protection, at a measurable CPU cost on both ends. It
// reports whether it changed c.
func plainOnLoopback(rawURL string, c *pgconn.Config, getenv func(string) string) bool {
	if c.TLSConfig == nil || strings.Contains(rawURL, "sslmode") || getenv("PGSSLMODE") != "" {
		return false
	}
	if !isLocalHost(c.Host) {
		return false
	}
	for _, f := range c.Fallbacks {
		if f.Host != c.Host || f.Port != c.Port {
			return false
		}
	}
	c.TLSConfig, c.Fallbacks = nil, nil
	return true
}

func isLocalHost(h string) bool {
	if h == "localhost" || strings.HasPrefix(h, "/") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// RedactURL is a Postgres URL fit for logs: the password (user info or
// ?password=) replaced, a key/value DSN not shown at all.
func RedactURL(s string) string {
	if !strings.HasPrefix(s, "postgres://") && !strings.HasPrefix(s, "postgresql://") {
		return "(DSN not shown)"
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL not shown)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
