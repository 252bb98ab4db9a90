package bench

import (
	"testing"

	"github.com/ubscore/ubscore/persist/pgtest"
)

// The sink scenario commits every command of a short run to a throw-away
// database, reports rates and a per-record lag; bad sizes are refused.
func TestRunSink(t *testing.T) {
	databaseExists(t, "postgres") // skips when Postgres is unreachable (outside CI)
	res, err := RunSink(SinkConfig{AdminURL: pgtest.AdminURL(), Dir: t.TempDir(), Commands: 5_000, Producers: 2,
		Seed: 3, Workload: smallWorkload})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commands != 5_000 || res.PipelineRate <= 0 || res.RecordsPerSec <= 0 || res.Ratio <= 0 ||
		res.Events < 5_000 || res.Rows == 0 || res.Batches == 0 {
		t.Fatalf("result %+v", res)
	}
	if res.LagMaxms <= 0 || res.LagP50ms > res.LagP99ms || res.LagP99ms > res.LagMaxms || res.Early > 5_000 {
		t.Fatalf("lag %+v", res)
	}
	if _, err := RunSink(SinkConfig{AdminURL: pgtest.AdminURL(), Dir: t.TempDir(), Commands: 0, Producers: 1}); err == nil {
		t.Fatal("0 commands accepted")
	}
}
