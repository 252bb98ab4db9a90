package journal

import (
	"context"
	"log/slog"
)

// LevelCritical is the slog level of alerts that need an operator now
// (spec 004 §7.2 CRITICAL): a violation, a halt, a failed recovery, a
// follower released past its retention. Above slog.LevelError.
const LevelCritical = slog.Level(12)

// Critical logs msg at LevelCritical. It is the one place the exchange's
// runtime-protection alerts go through: when the project's named CRITICAL
// level lands (issue 20), only this function changes.
func Critical(log *slog.Logger, msg string, args ...any) {
	log.Log(context.Background(), LevelCritical, "CRITICAL "+msg, args...)
}
