package bench

import (
	"errors"
	"math"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	// comm may hold spaces and parentheses: fields count from the last ')'.
	line := []byte("4242 (post gres) (x)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 1234 567 0 0 20 0 1 0 100 0 0\n")
	comm, ticks, err := parseProcStat(line)
	if err != nil || comm != "post gres) (x)" || ticks != 1234+567 {
		t.Fatalf("got %q %d %v", comm, ticks, err)
	}
	for _, bad := range []string{"", "4242 postgres S 1", "4242 (postgres) S 1 2 3", "4242 (postgres) S 1 4242 4242 0 -1 4194560 1000 0 0 0 x 567 0"} {
		if _, _, err := parseProcStat([]byte(bad)); !errors.Is(err, errProcFormat) {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func TestParseMachineStat(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	b := []byte("cpu  100 2 30 400 5 6 7 8 9 10\ncpu0 50 1 15 200 2 3 3 4 4 5\n")
	busy, idle, err := parseMachineStat(b)
	if err != nil || busy != 100+2+30+6+7+8 || idle != 400+5 {
		t.Fatalf("busy %d idle %d err %v", busy, idle, err)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3 4 5 6 7", "cpu 1 2 3 x 5 6 7 8"} {
		if _, _, err := parseMachineStat([]byte(bad)); !errors.Is(err, errProcFormat) {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func TestShare(t *testing.T) {
	a := &cpuSample{self: 100, server: 200, postgres: map[int]int64{7: 50, 8: 10}, busy: 1000, idle: 3000}
	// 100 requests over 2 s of 2 cores at userHZ (100 ticks/s): 400 ticks.
	// generator 80, server 150, postgres 40 (pid 7) + 0 (8) + 20 (9, new),
	// other 350-80-150-60 = 60, idle 50.
	b := &cpuSample{self: 180, server: 350, postgres: map[int]int64{7: 90, 8: 10, 9: 20}, busy: 1350, idle: 3050}
	s := share(a, b, 100)
	want := CPUShare{Generator: 8000, Server: 15000, Postgres: 6000, Other: 6000, Idle: 5000} // µs per request
	if s == nil || *s != want || math.Abs(s.Total()-40000) > 1e-9 {
		t.Fatalf("share %+v, want %+v", s, want)
	}
	// Tick rounding can make the processes' sum exceed the machine's busy time: Other is then 0, not negative.
	b.busy = 1250
	if s := share(a, b, 100); s.Other != 0 {
		t.Fatalf("other %v", s.Other)
	}
	if share(a, b, 0) != nil {
		t.Fatal("a share of no requests")
	}
}
