package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ubscore/ubscore/core"
	"github.com/ubscore/ubscore/journal"
)

// The disk-ceiling scenario measures what the data dir's disk can do for
// the journal with no journal logic at all: append a batch of records of
// the WAL's mean frame size to a file, fdatasync, repeat. Segments rotate
// at journal.DefaultSegmentSize as the WAL's do (new file + directory
// fsync), and a finished segment is deleted so the run needs little space.
// records/s at batch B is the most any group-committing WAL on this disk
// could ack with batches of B.

// DiskBatches are the batch sizes measured by default: from one record per
// fsync up to the journal's group-commit limit (the ring bounds a real
// batch to journal.DefaultRingSize).
var DiskBatches = []int{1, 16, 64, 256, 1024, journal.DefaultRingSize, journal.DefaultMaxBatch}

// diskSampleCmds is how many steady workload commands give the mean frame size.
const diskSampleCmds = 4_096

// DiskConfig configures the disk-ceiling scenario.
type DiskConfig struct {
	Dir        string        // a directory on the disk to measure; files are created and removed in it
	Batches    []int         // records per fdatasync; DiskBatches if empty
	PerBatch   time.Duration // measured time per batch size, > 0
	RecordSize int           // bytes per record; the workload's mean WAL frame (WALRecordSize) if 0
}

// DiskPoint is the measurement at one batch size.
type DiskPoint struct {
	Batch       int     `json:"batch"`
	RecordsPerS float64 `json:"records_per_sec"`
	FsyncsPerS  float64 `json:"fsyncs_per_sec"`
	MBPerS      float64 `json:"mb_per_sec"`
	FsyncP50us  float64 `json:"fsync_p50_us"` // write + fdatasync of one batch
	FsyncP99us  float64 `json:"fsync_p99_us"`
}

// DiskResult is the scenario's outcome; its JSON form is the report.
type DiskResult struct {
	RecordSize int         `json:"record_size"`
	Points     []DiskPoint `json:"points"`
}

// WALRecordSize is the mean size of a WAL frame (uvarint length, envelope
// header, encoded command) over the steady part of the default workload.
func WALRecordSize(seed uint64) int {
	w, err := NewWorkload(seed, Options{})
	if err != nil {
		panic(err) // default options are valid
	}
	var c core.Command
	var buf []byte
	total := 0
	for i := range diskSampleCmds {
		seq := core.Seq(w.SetupLen() + 1 + i)
		w.Fill(seq, &c)
		c.Seq, c.Time = seq, DefaultTime
		buf = core.EncodeCommand(buf[:0], &c)
		n := journal.EnvelopeSize(len(buf))
		total += n + binary.PutUvarint(make([]byte, binary.MaxVarintLen64), uint64(n))
	}
	return (total + diskSampleCmds/2) / diskSampleCmds
}

// RunDisk measures every batch size in turn.
func RunDisk(cfg DiskConfig) (DiskResult, error) {
	if cfg.Dir == "" || cfg.PerBatch <= 0 {
		return DiskResult{}, errors.New("bench: disk-ceiling needs a dir and a duration per batch")
	}
	if len(cfg.Batches) == 0 {
		cfg.Batches = DiskBatches
	}
	if cfg.RecordSize == 0 {
		cfg.RecordSize = WALRecordSize(1)
	}
	if cfg.RecordSize < 1 || cfg.RecordSize > journal.MaxPayloadSize {
		return DiskResult{}, fmt.Errorf("bench: record size %d", cfg.RecordSize)
	}
	res := DiskResult{RecordSize: cfg.RecordSize}
	for _, b := range cfg.Batches {
		if b < 1 || b > MaxBatch {
			return DiskResult{}, fmt.Errorf("bench: disk batch %d outside 1..%d", b, MaxBatch)
		}
		p, err := diskPoint(cfg.Dir, b, cfg.RecordSize, cfg.PerBatch)
		if err != nil {
			return DiskResult{}, err
		}
		res.Points = append(res.Points, p)
	}
	return res, nil
}

func diskPoint(dir string, batch, recSize int, dur time.Duration) (DiskPoint, error) {
	buf := make([]byte, batch*recSize)
	for i := range buf {
		buf[i] = byte(i * 31) // not zeros: some devices compress
	}
	seg := &diskSegment{dir: dir}
	defer seg.close()
	hist := newLatencyHist()
	fsyncs := 0
	start := time.Now()
	for time.Since(start) < dur {
		if seg.f == nil || seg.size >= journal.DefaultSegmentSize {
			if err := seg.rotate(); err != nil {
				return DiskPoint{}, err
			}
		}
		t0 := time.Now()
		n, err := seg.f.Write(buf)
		seg.size += n
		if err != nil {
			return DiskPoint{}, err
		}
		if err := journal.Fdatasync(seg.f); err != nil {
			return DiskPoint{}, err
		}
		_ = hist.RecordValue(min(time.Since(t0).Nanoseconds(), latencyMax))
		fsyncs++
	}
	el := time.Since(start).Seconds()
	return DiskPoint{Batch: batch, RecordsPerS: round1(float64(fsyncs*batch) / el),
		FsyncsPerS: round1(float64(fsyncs) / el), MBPerS: round1(float64(fsyncs*len(buf)) / el / 1e6),
		FsyncP50us: round1(float64(hist.ValueAtQuantile(50)) / 1e3),
		FsyncP99us: round1(float64(hist.ValueAtQuantile(99)) / 1e3)}, nil
}

// diskSegment is the file being appended to; rotate starts the next one
// (and removes the previous: only the write pattern matters here).
type diskSegment struct {
	dir  string
	f    *os.File
	n    int
	size int
}

func (s *diskSegment) rotate() error {
	if err := s.close(); err != nil {
		return err
	}
	s.n++
	f, err := os.OpenFile(filepath.Join(s.dir, fmt.Sprintf("disk-ceiling-%06d.seg", s.n)),
		os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	s.f, s.size = f, 0
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *diskSegment) close() error {
	if s.f == nil {
		return nil
	}
	err := errors.Join(s.f.Close(), os.Remove(s.f.Name()))
	s.f = nil
	return err
}
