package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// machineInfo says what the numbers of a report were measured on.
type machineInfo struct {
	CPU       string `json:"cpu"` // model name from /proc/cpuinfo
	Cores     int    `json:"cores"`
	GoVersion string `json:"go_version"`
	Kernel    string `json:"kernel,omitempty"`
	GitCommit string `json:"git_commit,omitempty"` // with "-dirty" when the work tree has changes
	Time      string `json:"time"`                 // start of the run, RFC 3339
}

func currentMachine() machineInfo {
	m := machineInfo{CPU: cpuModel(), Cores: runtime.NumCPU(), GoVersion: runtime.Version(),
		Time: time.Now().UTC().Format(time.RFC3339)}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		m.GitCommit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.GitCommit += "-dirty"
		}
	}
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// loadAvg1 is the 1-minute load average, or -1 if unknown.
func loadAvg1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// loadWatch samples the load average every loadSampleEvery until stopped.
type loadWatch struct {
	start float64
	mu    sync.Mutex
	max   float64
	stop  chan struct{}
	done  chan struct{}
}

const loadSampleEvery = 500 * time.Millisecond

func watchLoad() *loadWatch {
	l := &loadWatch{start: loadAvg1(), stop: make(chan struct{}), done: make(chan struct{})}
	l.max = l.start
	go func() {
		defer close(l.done)
		t := time.NewTicker(loadSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				v := loadAvg1()
				l.mu.Lock()
				l.max = max(l.max, v)
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// finish stops the sampling and returns the load at the start and the
// highest load seen (both with a last sample taken now).
func (l *loadWatch) finish() (start, peak float64) {
	close(l.stop)
	<-l.done
	return l.start, max(l.max, loadAvg1())
}
