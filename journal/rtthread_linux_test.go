package journal

import (
	"bytes"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal/rttest"
)

// TestRealtimeProcessor: with Config.RealtimeProcessor the processor runs on
// a thread of its own at SCHED_FIFO 1, the only such thread of the process;
// commands complete on it, a poison command too (its rebuild runs there);
// the thread is put back in the normal class before Close returns, and no
// SCHED_FIFO thread is left. (TestRealtimeProcessorRefused: the fallback.)
func TestRealtimeProcessor(t *testing.T) {
	if len(rttest.FIFOThreads(t, 0)) != 0 {
		t.Fatal("a SCHED_FIFO thread before the pipeline started")
	}
	if !rttest.Permitted() {
		t.Skip("SCHED_FIFO refused here (no CAP_SYS_NICE); TestRealtimeProcessorRefused covers the fallback")
	}
	resetOn := make(chan int, 1)
	setNormal = func() error { resetOn <- unix.Gettid(); return normalThread() }
	t.Cleanup(func() { setNormal = normalThread })
	pl, logs := runRealtime(t)
	tid := int(pl.rtTID.Load())
	if fifo := rttest.FIFOThreads(t, 0); len(fifo) != 1 || fifo[0] != tid {
		t.Fatalf("SCHED_FIFO threads %v, the processor's thread %d; logs %s", fifo, tid, logs)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-resetOn:
		if got != tid {
			t.Fatalf("the reset ran on thread %d, the processor's is %d", got, tid)
		}
	default:
		t.Fatal("the processor's thread was not put back in the normal class before Close returned")
	}
	if pl.rtTID.Load() != 0 {
		t.Fatal("the processor's real-time thread is still reported after Close")
	}
	if fifo := rttest.FIFOThreads(t, 0); len(fifo) != 0 { // normal ran before the processor's wg.Done
		t.Fatalf("SCHED_FIFO threads %v remain after Close", fifo)
	}
}

// runRealtime starts a pipeline with Config.RealtimeProcessor and runs the
// setup commands through it with a poison command in the middle; it
// returns the running pipeline and its logs.
func runRealtime(t *testing.T) (*Pipeline, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	pl, err := Start(Config{Dir: t.TempDir(), Core: core.Config{AllowDebugPanic: true}, RealtimeProcessor: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), TruncateLimit: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	cmds := setupCmds()
	runAll(t, pl, cmds[:20])
	r := NewReply()
	if _, err := pl.Submit(&core.Command{Kind: core.KindDebugPanic, User: 1}, r); err != nil {
		t.Fatal(err)
	}
	if err := pl.Wait(r); err != nil {
		t.Fatal(err)
	}
	if res := r.Result(); res.Code != core.CodePoisonCommand {
		t.Fatalf("poison result %+v", res)
	}
	runAll(t, pl, cmds[20:])
	return pl, &logs
}

// TestRealtimeThreadAndBack: realtimeThread makes the calling thread
// SCHED_FIFO 1 and keeps the goroutine on it while other goroutines run
// and the goroutine yields; normalThread puts it back in the normal class
// at the nice level it had.
func TestRealtimeThreadAndBack(t *testing.T) {
	if !rttest.Permitted() {
		t.Skip("SCHED_FIFO refused here (no CAP_SYS_NICE); TestRealtimeProcessorRefused covers the fallback")
	}
	stop := make(chan struct{})
	defer close(stop)
	for range 4 { // goroutines that want the Ps
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
		}()
	}
	errc := make(chan error)
	go func() {
		errc <- func() error {
			tid, err := realtimeThread()
			if err != nil || tid != unix.Gettid() {
				return fmt.Errorf("realtimeThread: tid %d (this thread: %d), %v", tid, unix.Gettid(), err)
			}
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, 3); err != nil { // raising nice needs no privilege
				return err
			}
			if a, err := unix.SchedGetAttr(0, 0); err != nil || a.Policy != unix.SCHED_FIFO || a.Priority != 1 {
				return fmt.Errorf("after realtimeThread: %+v %v", a, err)
			}
			for i := range 2000 {
				runtime.Gosched()
				if i%500 == 0 {
					runtime.GC()
				}
				if now := unix.Gettid(); now != tid {
					return fmt.Errorf("the goroutine moved from thread %d to %d", tid, now)
				}
			}
			if err := normalThread(); err != nil {
				return err
			}
			if a, err := unix.SchedGetAttr(0, 0); err != nil || a.Policy != unix.SCHED_NORMAL || a.Nice != 3 {
				return fmt.Errorf("after normalThread: %+v %v (want SCHED_NORMAL at nice 3)", a, err)
			}
			return nil
		}() // the goroutine ends locked: its thread exits, or is parked (the main thread)
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestRealtimeProcessorRefused: where the policy is refused, the pipeline
// warns, runs every command (a poison command's rebuild too) and leaves no
// thread real-time or locked.
func TestRealtimeProcessorRefused(t *testing.T) {
	setRealtime = func() (int, error) { return 0, unix.EPERM }
	t.Cleanup(func() { setRealtime = realtimeThread })
	pl, logs := runRealtime(t)
	if fifo := rttest.FIFOThreads(t, 0); len(fifo) != 0 || pl.rtTID.Load() != 0 ||
		!strings.Contains(logs.String(), "could not get real-time priority") {
		t.Fatalf("refused: FIFO threads %v, tid %d, logs %s", fifo, pl.rtTID.Load(), logs)
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
}
