//go:build linux

package bench

import (
	"os"
	"strconv"
)

// sampleCPU reads this process's, serverPID's and every postgres process's
// CPU time, and the machine's busy and idle time.
func sampleCPU(serverPID int) (*cpuSample, error) {
	s := &cpuSample{postgres: map[int]int64{}}
	var err error
	if s.busy, s.idle, err = readMachineStat(); err != nil {
		return nil, err
	}
	if _, s.self, err = readProcStat("self"); err != nil {
		return nil, err
	}
	if _, s.server, err = readProcStat(strconv.Itoa(serverPID)); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == serverPID {
			continue
		}
		if comm, t, err := readProcStat(e.Name()); err == nil && comm == "postgres" {
			s.postgres[pid] = t
		} // else not a process, or gone since ReadDir
	}
	return s, nil
}

func readProcStat(pid string) (string, int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", 0, err
	}
	return parseProcStat(b)
}

func readMachineStat() (busy, idle int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseMachineStat(b)
}

// procsCPU is the CPU ticks (user + system) the processes pids have used;
// a process gone counts 0.
func procsCPU(pids []int) int64 {
	var t int64
	for _, pid := range pids {
		if _, v, err := readProcStat(strconv.Itoa(pid)); err == nil {
			t += v
		}
	}
	return t
}
