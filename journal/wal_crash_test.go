package journal

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

const walCrashEnv = "JOURNAL_WAL_CRASH_DIR"

// TestWALCrashChild is the child process of TestWALKill9: it appends random
// batches forever and prints each acknowledged LastSeq.
func TestWALCrashChild(t *testing.T) {
	dir := os.Getenv(walCrashEnv)
	if dir == "" {
		t.Skip("child process of TestWALKill9")
	}
	w, err := Open(dir, Options{SegmentSize: 64 << 10, Logger: walQuietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	seed, _ := strconv.ParseUint(os.Getenv(walCrashEnv+"_SEED"), 10, 64)
	x := seed | 1
	var es []Entry
	for {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		es = es[:0]
		for i := uint64(0); i < 1+x%200; i++ {
			seq := w.LastSeq() + 1 + i
			es = append(es, Entry{Seq: seq, Payload: walTestPayload(seq)})
		}
		if err := w.AppendBatch(es); err != nil {
			fmt.Fprintln(os.Stderr, "append:", err)
			os.Exit(4)
		}
		fmt.Fprintf(os.Stdout, "%d\n", w.LastSeq()) // unbuffered: one write per ack
	}
}

// TestWALKill9 kills a process that is appending at random instants; every
// acknowledged entry must survive and the WAL must reopen cleanly.
func TestWALKill9(t *testing.T) {
	r := walTestRand(t)
	dir := t.TempDir()
	rounds := 10
	if testing.Short() {
		rounds = 4
	}
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWALCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), walCrashEnv+"="+dir,
			walCrashEnv+"_SEED="+strconv.FormatUint(r.Uint64(), 10))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var acked atomic.Uint64
		started := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(out)
			first := true
			for sc.Scan() {
				if v, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
					acked.Store(v)
				}
				if first {
					close(started)
					first = false
				}
			}
		}()
		select {
		case <-started:
		case <-done:
			t.Fatalf("round %d: child exited early: %v", round, cmd.Wait())
		case <-time.After(60 * time.Second):
			t.Fatal("child did not start")
		}
		time.Sleep(time.Duration(5+r.IntN(150)) * time.Millisecond)
		cmd.Process.Kill() // SIGKILL
		<-done
		cmd.Wait()
		w := walTestOpen(t, dir, Options{SegmentSize: 64 << 10})
		if w.LastSeq() < acked.Load() {
			t.Fatalf("round %d: acknowledged seq %d lost (LastSeq %d)", round, acked.Load(), w.LastSeq())
		}
		walTestCheck(t, w, 1, w.LastSeq())
		t.Logf("round %d: acked %d, recovered %d, torn tail: %v", round, acked.Load(), w.LastSeq(), w.TornTail())
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
