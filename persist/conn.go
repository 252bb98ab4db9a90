package persist

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// heapWarmBytes is the size of the one large value a new connection's
// backend allocates and frees (see ConfigurePool): at most glibc's
// DEFAULT_MMAP_THRESHOLD_MAX (32 MiB on 64-bit), above which the threshold
// would not move.
const heapWarmBytes = 16 << 20

// ConfigurePool sets up every connection of the exchange's pool (the sink's,
// the transfer FSM's and the read fallbacks' share it).
//
// Its one job today is the backend's C heap. A sink batch makes the
// backend allocate a few MB (COPY buffers, executor memory) and free them
// at the end of each statement; glibc malloc then gives the top of the
// heap back to the kernel (brk down) as soon as more than M_TRIM_THRESHOLD
// (128 KiB) is free there, and the next statement faults it in again page
// by page. Measured on the http benchmark's sink backend (perf stat, 5 s):
// 8,100-10,200 brk calls and 31-35k page faults; in a perf profile the brk
// calls, mostly the kernel's TLB flush under them, were ~15% of the
// backend's CPU (2-vCPU VM).
//
// glibc raises both thresholds by itself once a process frees a large
// mmap-ed block (mallopt(3), "dynamic mmap threshold"): the threshold
// becomes that block's size and M_TRIM_THRESHOLD twice it. So each new
// connection has its backend build and drop one 16 MiB value: afterwards
// the backend keeps up to 32 MiB of freed heap instead of returning it
// (measured: 0 brk calls, 14-16k page faults in 5 s, the rest being the
// new backend's first touch of shared buffers). It costs one query per
// connection and up to 32 MiB per backend; with another malloc, or a
// server whose environment already sets MALLOC_TRIM_THRESHOLD_, it is
// merely useless.
func ConfigurePool(cfg *pgxpool.Config) {
	prev := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if prev != nil {
			if err := prev(ctx, c); err != nil {
				return err
			}
		}
		return warmBackendHeap(ctx, c)
	}
}

func warmBackendHeap(ctx context.Context, c *pgx.Conn) error {
	if _, err := c.Exec(ctx, "SELECT length(repeat('x', $1::int))", heapWarmBytes); err != nil {
		return fmt.Errorf("persist: connection set-up: %w", err)
	}
	return nil
}
