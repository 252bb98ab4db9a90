package persist

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestPlainOnLoopback(t *testing.T) {
	noEnv := func(string) string { return "" }
	cases := []struct {
		url   string
		env   string // PGSSLMODE
		plain bool
	}{
		{"postgres://postgres@127.0.0.1:5432/db", "", true},
		{"postgres://u:p@localhost/db", "", true},
		{"postgres://u@[::1]:5433/db", "", true},
		{"host=127.0.0.1 user=postgres dbname=db", "", true},
		{"postgres://u@127.0.0.1/db?sslmode=prefer", "", false}, // chosen: kept
		{"postgres://u@127.0.0.1/db?sslmode=require", "", false},
		{"host=127.0.0.1 sslmode=require user=u", "", false},
		{"postgres://u@127.0.0.1/db", "require", false},
		{"postgres://u@db.example.com/db", "", false},
		{"postgres://u@10.0.0.7/db", "", false},
		{"postgres://u@127.0.0.1,db.example.com/db", "", false}, // one remote host
	}
	for _, c := range cases {
		cfg, err := pgconn.ParseConfig(c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		hadTLS := cfg.TLSConfig != nil
		env := noEnv
		if c.env != "" {
			env = func(k string) string {
				if k == "PGSSLMODE" {
					return c.env
				}
				return ""
			}
		}
		got := plainOnLoopback(c.url, cfg, env)
		if got != c.plain {
			t.Errorf("%s (PGSSLMODE=%q): changed %v, want %v", c.url, c.env, got, c.plain)
		}
		if got && (cfg.TLSConfig != nil || len(cfg.Fallbacks) != 0) {
			t.Errorf("%s: TLS left on: %v %d fallbacks", c.url, cfg.TLSConfig != nil, len(cfg.Fallbacks))
		}
		if !got && hadTLS && cfg.TLSConfig == nil {
			t.Errorf("%s: TLS turned off without saying so", c.url)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:hunter2@h:5432/db?sslmode=disable":             "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgresql://u@h/db?password=hunter2&sslmode=disable":       "postgresql://u@h/db?password=xxxxx&sslmode=disable",
		"postgres://postgres@127.0.0.1:5432/ubscore?sslmode=disable": "postgres://postgres@127.0.0.1:5432/ubscore?sslmode=disable",
		"host=h user=u password=hunter2":                             "(DSN not shown)",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
