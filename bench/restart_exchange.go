package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The whole exchange's restart (issue 39 item 4): the real binary on the
// data dir RunRestart built, timed from process start to /health/ready 200.

// restartReadyTimeout bounds the wait for /health/ready.
const restartReadyTimeout = 5 * time.Minute

// restartInstruments is the --config file of the state RunRestart builds:
// USD (id 1, scale 2), BASE (id 2, scale 0) and markets spot markets
// B1-USD.. (ids 1..markets: tick 0.01, lot 1, fees 1000/2000 ppm). The
// binary markets are not in it (they never are: made through the API).
func restartInstruments(markets int) []byte {
	type asset struct {
		Symbol string `json:"symbol"`
		ID     int    `json:"id"`
		Scale  int    `json:"scale"`
	}
	type market struct {
		Symbol string `json:"symbol"`
		ID     int    `json:"id"`
		Base   string `json:"base"`
		Quote  string `json:"quote"`
		Tick   string `json:"tick"`
		Lot    string `json:"lot"`
		MinQty string `json:"min_qty"`
		MaxQty string `json:"max_qty"`
		Maker  int    `json:"maker_fee_ppm"`
		Taker  int    `json:"taker_fee_ppm"`
	}
	f := struct {
		Assets  []asset  `json:"assets"`
		Markets []market `json:"markets"`
	}{Assets: []asset{{"USD", 1, 2}, {"BASE", 2, 0}}}
	for m := 1; m <= markets; m++ {
		f.Markets = append(f.Markets, market{Symbol: fmt.Sprintf("B%d-USD", m), ID: m, Base: "BASE", Quote: "USD",
			Tick: "0.01", Lot: "1", MinQty: "1", MaxQty: "1000000", Maker: 1_000, Taker: 2_000})
	}
	b, _ := json.Marshal(f)
	return b
}

// readyMsgs are the start-up log lines reported as the restart's parts.
var readyMsgs = []string{
	"journal: recovered",
	"journal: start: state follower's replica copied",
	"journal: start: read view's replica copied",
	"exchange: core recovered",
	"exchange: history rebuilt from the WAL",
	"exchange: history seeded with the resting orders",
	"exchange: serving",
}

// startExchange starts cfg.Exchange on cfg.Dir, waits for /health/ready
// 200, stops it (SIGTERM) and returns the time to ready and the parts.
func startExchange(cfg RestartConfig, markets int) (ready, cpu time.Duration, parts []ReadyPart, err error) {
	confPath := filepath.Join(cfg.Dir, "bench-instruments.json")
	if err := os.WriteFile(confPath, restartInstruments(markets), 0o600); err != nil {
		return 0, 0, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	args := []string{"--data-dir", cfg.Dir, "--http", addr, "--config", confPath}
	if !slices.Contains(cfg.ExchangeArgs, "--pg-url") {
		args = append(args, "--pg-url", "none")
	}
	args = append(args, cfg.ExchangeArgs...)
	cmd := exec.Command(cfg.Exchange, args...)
	cmd.Env = append(os.Environ(), "UBS_NATS_URL=", "UBS_CHAIN_RPC=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, nil, err
	}
	cmd.Stderr = cmd.Stdout
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, nil, err
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			at := time.Since(t0)
			line := sc.Text()
			if cfg.Progress != nil {
				fmt.Fprintln(cfg.Progress, line)
			}
			var rec struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
				Took any       `json:"took"`
			}
			msg := line
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg != "" {
				msg = rec.Msg
				if !rec.Time.IsZero() { // the line's own time: the exchange batches its log writes
					at = rec.Time.Sub(t0)
				}
			}
			for _, m := range readyMsgs {
				if strings.Contains(msg, m) && !seen[m] {
					seen[m] = true
					p := ReadyPart{Msg: m, At: at}
					if rec.Took != nil {
						p.Took = fmt.Sprint(rec.Took)
					}
					mu.Lock()
					parts = append(parts, p)
					mu.Unlock()
				}
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { <-scanned; exited <- cmd.Wait() }()
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			return err
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			return errors.New("bench: restart: the exchange did not stop within a minute of SIGTERM (killed)")
		}
	}
	client := &http.Client{Timeout: time.Second}
	deadline := t0.Add(restartReadyTimeout)
	for ready == 0 {
		select {
		case err := <-exited:
			return 0, 0, nil, fmt.Errorf("bench: restart: the exchange exited before ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			_ = stop()
			return 0, 0, nil, fmt.Errorf("bench: restart: the exchange not ready within %v", restartReadyTimeout)
		}
		if resp, err := client.Get("http://" + addr + "/health/ready"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ready = time.Since(t0)
				cpu = procCPU(cmd.Process.Pid)
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := stop(); err != nil {
		return ready, cpu, nil, fmt.Errorf("bench: restart: the exchange's stop: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return ready, cpu, parts, nil
}

// procCPU is the CPU time (user + system) process pid has used so far
// (Linux /proc; 0 elsewhere or on error).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// fields after the command name (which may hold spaces) in parentheses
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // utime: field 14 of stat
	st, err2 := strconv.ParseInt(f[12], 10, 64) // stime: field 15
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * time.Second / 100 // clock ticks: USER_HZ is 100 on Linux
}
