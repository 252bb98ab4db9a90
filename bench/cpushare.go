package bench

import (
	"bytes"
	"errors"
	"strconv"
)

// CPUShare is where the machine's CPU time went during a load's measured
// window, in microseconds of CPU (summed over cores) per measured request.
// The five parts add up to the machine's whole time (cores x window) per
// request, so a ratio of two loads' request rates can be read off them:
// on a saturated machine it is the inverse ratio of their totals.
type CPUShare struct {
	Generator float64 `json:"generator_us"` // the load generator (this process)
	Server    float64 `json:"server_us"`    // the target's process (HTTPConfig.ServerPID)
	Postgres  float64 `json:"postgres_us"`  // every process named postgres: the sink's backends and the server's own writers
	Other     float64 `json:"other_us"`     // the rest of the machine's busy time: kernel threads, interrupts, other tenants
	Idle      float64 `json:"idle_us"`      // idle and iowait
}

// Total is the machine's time per request: cores x window / requests.
func (s CPUShare) Total() float64 { return s.Generator + s.Server + s.Postgres + s.Other + s.Idle }

// userHZ is the tick of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture Go runs on (the kernel converts its own HZ for /proc).
const userHZ = 100

// cpuSample is one reading of the clocks CPUShare is computed from, in
// clock ticks (USER_HZ).
type cpuSample struct {
	self, server int64         // utime+stime of this process and of the server
	postgres     map[int]int64 // utime+stime of each process named postgres, by pid
	busy, idle   int64         // the machine: user+nice+system+irq+softirq+steal, idle+iowait
}

// share turns the difference of two samples over requests into a CPUShare.
// A postgres process that began within the window
// counts whole; one that ended within it is lost to Other.
func share(a, b *cpuSample, requests int64) *CPUShare {
	if requests <= 0 {
		return nil
	}
	var pg int64
	for pid, t := range b.postgres {
		pg += t - a.postgres[pid] // a missing pid reads 0: started in the window
	}
	gen, srv := b.self-a.self, b.server-a.server
	other := (b.busy - a.busy) - gen - srv - pg
	us := func(ticks int64) float64 { return float64(max(ticks, 0)) / userHZ * 1e6 / float64(requests) }
	return &CPUShare{Generator: us(gen), Server: us(srv), Postgres: us(pg), Other: us(other), Idle: us(b.idle - a.idle)}
}

var errProcFormat = errors.New("bench: unexpected /proc format")

// parseProcStat reads a /proc/PID/stat line: the command name (comm) and
// utime+stime in ticks. comm is in parentheses and may itself hold spaces
// and parentheses, so the fields are counted from the last ')'.
func parseProcStat(b []byte) (comm string, ticks int64, err error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, errProcFormat
	}
	f := bytes.Fields(b[end+1:])
	// After comm: state(3) ppid ... utime(14) stime(15), so f[0] is field 3.
	if len(f) < 13 {
		return "", 0, errProcFormat
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, errProcFormat
	}
	return string(b[open+1 : end]), ut + st, nil
}

// parseMachineStat reads the aggregate "cpu" line of /proc/stat: busy
// (user nice system irq softirq steal; guest time is already in user) and
// idle (idle iowait) ticks.
func parseMachineStat(b []byte) (busy, idle int64, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0, 0, errProcFormat
	}
	var v [8]int64 // user nice system idle iowait irq softirq steal
	for i := range v {
		n, err := strconv.ParseInt(string(f[i+1]), 10, 64)
		if err != nil {
			return 0, 0, errProcFormat
		}
		v[i] = n
	}
	return v[0] + v[1] + v[2] + v[5] + v[6] + v[7], v[3] + v[4], nil
}
