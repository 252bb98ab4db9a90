package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ubscore/ubscore/journal"
	"github.com/ubscore/ubscore/persist/spotops"
)

// opsForgetter is spotops.Forgetter under the names transfers.go uses (it
// goes with transfers.go when that moves into persist/transfer).
type opsForgetter struct{ *spotops.Forgetter }

const spotOpsForgetEvery = spotops.Every

func newOpsForgetter(pool *pgxpool.Pool, pl *journal.Pipeline, log *slog.Logger) *opsForgetter {
	return &opsForgetter{spotops.NewForgetter(pool, pl, log)}
}

func (f *opsForgetter) run(ctx context.Context, every time.Duration) { f.Run(ctx, every) }
