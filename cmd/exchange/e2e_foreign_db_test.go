package main

// e2e_foreign_db_test.go proves that the sink never writes into a database
// that the WAL of another data dir has advanced: its rows are another
// history, and following it from its checkpoint would upsert this WAL's
// orders and ledger rows over them.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ubscore/ubscore/persist/pgtest"
)

type sinkRows struct{ checkpoint, ledger, orders int64 }

func readSinkRows(t *testing.T, pg string) sinkRows {
	t.Helper()
	ctx := context.Background()
	conn := e2eConn(t, pg)
	var r sinkRows
	if err := conn.QueryRow(ctx, `SELECT (SELECT persisted_seq FROM core_checkpoint WHERE id = 1),
		(SELECT count(*) FROM spot_ledger), (SELECT count(*) FROM orders)`).Scan(&r.checkpoint, &r.ledger, &r.orders); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestE2ESinkRefusesForeignDatabase(t *testing.T) {
	t.Parallel() // waits on servers and Postgres more than it computes
	pg := pgtest.NewDB(t)
	s1 := e2eStart(t, t.TempDir(), pg)
	e2eFund(t, s1, 3)
	e2eWaitSink(t, s1, pg)
	s1.Stop()
	before := readSinkRows(t, pg)
	if before.checkpoint == 0 || before.ledger == 0 {
		t.Fatalf("first server wrote nothing: %+v", before)
	}

	// A second server on a fresh data dir, same database. Its WAL soon
	// passes the first one's checkpoint, from where an unguarded sink
	// would start writing.
	dir2 := t.TempDir()
	s2 := e2eStart(t, dir2, pg)
	e2eFund(t, s2, 12)
	if d := s2.metric("ubs_durable_seq"); d <= float64(before.checkpoint) {
		t.Fatalf("second server's durable seq %v never passed the database's checkpoint %d", d, before.checkpoint)
	}
	// Which guard refuses depends on when the sink first looks: while this
	// WAL is still behind the checkpoint it is the seq check, once past it
	// the WAL id (the sink's start-up, its pool's first connections, races
	// the funding).
	waitLog(t, s2, "the database is ahead of this WAL", "the database belongs to another data dir's WAL")
	// Nothing may be written, however long the server runs: give a sink
	// that would follow the WAL many batch lingers to do so.
	time.Sleep(1500 * time.Millisecond)
	if after := readSinkRows(t, pg); after != before {
		t.Fatalf("the sink wrote another WAL's history into the database: %+v -> %+v", before, after)
	}
	if lag := s2.metric("ubs_sink_lag_commands"); lag <= 0 {
		t.Fatalf("sink lag %v: the refusal must show as lag", lag)
	}
	s2.Stop()

	// Restarted, the second server's WAL is now past the checkpoint, so
	// seqs alone no longer tell the histories apart: the database's WAL id
	// does.
	s3 := e2eStart(t, dir2, pg)
	defer s3.Stop()
	waitLog(t, s3, "the database belongs to another data dir's WAL")
	e2eFund(t, s3, 14)
	time.Sleep(1500 * time.Millisecond)
	if after := readSinkRows(t, pg); after != before {
		t.Fatalf("after a restart the sink wrote another WAL's history into the database: %+v -> %+v", before, after)
	}
}

// waitLog waits (bounded) until s's log contains one of want.
func waitLog(t *testing.T, s *e2eServer, want ...string) {
	t.Helper()
	found := func() bool {
		logs := s.Logs()
		for _, w := range want {
			if strings.Contains(logs, w) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(20 * time.Second); !found(); {
		if time.Now().After(deadline) {
			t.Fatalf("none of %q in the log:\n%s", want, s.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2ECheckpointRefusesToMoveBack: spot_ledger has no unique key, so a
// checkpoint moved back without wiping the tables would make the sink
// append the same ledger rows again. core_checkpoint refuses such a move
// (UPDATE to a lower seq, DELETE, TRUNCATE: migration 0008) and changes
// nothing; the documented rebuild (wipe the four tables, then reset the
// checkpoint) is allowed, and the sink then derives the same rows again
// from the WAL.
func TestE2ECheckpointRefusesToMoveBack(t *testing.T) {
	t.Parallel() // waits on servers and Postgres more than it computes
	pg := pgtest.NewDB(t)
	dir := t.TempDir()
	s1 := e2eStart(t, dir, pg)
	e2eFund(t, s1, 3)
	e2eWaitSink(t, s1, pg)
	s1.Stop()
	ctx := context.Background()
	conn := e2eConn(t, pg)
	before := readSinkRows(t, pg)
	if before.checkpoint < 2 || before.ledger == 0 {
		t.Fatalf("the server wrote nothing: %+v", before)
	}
	for _, move := range []string{
		"UPDATE core_checkpoint SET persisted_seq = 0 WHERE id = 1",
		"UPDATE core_checkpoint SET persisted_seq = persisted_seq - 1 WHERE id = 1",
		"DELETE FROM core_checkpoint",
		"TRUNCATE core_checkpoint",
	} {
		_, err := conn.Exec(ctx, move)
		if err == nil || !strings.Contains(err.Error(), "spot_ledger holds rows past seq") {
			t.Fatalf("%s: err %v, want the checkpoint guard's refusal", move, err)
		}
		if after := readSinkRows(t, pg); after != before {
			t.Fatalf("%s changed the read model: %+v -> %+v", move, before, after)
		}
	}
	// Forward moves are the sink's own and stay free.
	if _, err := conn.Exec(ctx, "UPDATE core_checkpoint SET persisted_seq = persisted_seq WHERE id = 1"); err != nil {
		t.Fatal(err)
	}

	// The rebuild: wipe, reset, restart; the sink writes the same rows.
	if _, err := conn.Exec(ctx, "TRUNCATE orders, trades, spot_ledger, wal_events"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "UPDATE core_checkpoint SET persisted_seq = 0 WHERE id = 1"); err != nil {
		t.Fatalf("reset after a wipe: %v", err)
	}
	s2 := e2eStart(t, dir, pg)
	defer s2.Stop()
	e2eWaitSink(t, s2, pg)
	if after := readSinkRows(t, pg); after != before {
		t.Fatalf("rebuilt read model %+v, want %+v", after, before)
	}
}
