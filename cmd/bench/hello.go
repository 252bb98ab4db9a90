package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ubscore/ubscore/bench"
)

// childEnv is set (to "1") in the environment of the bench processes the
// harness starts by re-running its own executable; a test binary's TestMain
// sees it and runs the bench command in os.Args instead of the tests.
const childEnv = "UBS_BENCH_CHILD"

// runHelloServer is `bench hello-server`: it serves the hello-world target
// on a free 127.0.0.1 port, prints "listening ADDR" on stdout and serves
// until SIGTERM/SIGINT or until its stdin reaches EOF (so it dies with the
// process that started it).
func runHelloServer(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench hello-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts bench.HelloOptions
	fs.DurationVar(&opts.Stall, "stall", 0, "answer nothing for this long at the start of every --stall-every (checks of the load generator's tail)")
	fs.DurationVar(&opts.StallEvery, "stall-every", 0, "the period of --stall")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	addr, stop, err := bench.StartHelloServerWith(opts)
	if err != nil {
		fmt.Fprintln(stderr, "bench hello-server:", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "listening %s\n", addr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(eof) }()
	select {
	case <-sig:
	case <-eof:
	}
	signal.Stop(sig)
	_ = stop()
	return exitOK
}

// helloProcess is the hello-world target in a child process of its own, so
// the load generator and the server compete for the cores as separate
// processes, as they do against the exchange (and as wrk does).
type helloProcess struct {
	addr  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startHelloProcess re-runs this executable as `bench hello-server`.
func startHelloProcess(args ...string) (*helloProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append([]string{"hello-server"}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &helloProcess{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-line:
		if a, found := strings.CutPrefix(l, "listening "); ok && found {
			h.addr = a
			return h, nil
		}
		h.stop()
		return nil, fmt.Errorf("hello-server printed %q", l)
	case <-time.After(10 * time.Second):
		h.stop()
		return nil, fmt.Errorf("hello-server did not start within 10 s")
	}
}

func (h *helloProcess) stop() {
	_ = h.stdin.Close()
	done := make(chan struct{})
	go func() { _ = h.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = h.cmd.Process.Kill()
		<-done
	}
}
