package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
)

// spareName is the file spareMaker prepares the next segment in. It is not
// a segment name (fewer than 20 characters), so both our listing and
// tidwall's ignore it; Open removes a leftover one.
const spareName = "segment.spare"

// spareMaker prepares the next segment file on its own goroutine, so that
// the journaler never waits for a preallocation: a file of the segment size
// written with zeros and fdatasynced (unless noSync), under spareName. At a
// rotation, take renames the ready spare to the new segment's name and asks
// for the next one. At most one spare exists at a time.
//
// A failure to prepare a spare is logged and ends preparation: rotations
// then create empty files, which the writer appends to (slower fsyncs, not
// a WAL failure). The nil *spareMaker is valid and never has a spare.
type spareMaker struct {
	path   string // dir/spareName
	size   int64  // bytes of zeros per spare: the segment size
	noSync bool
	log    *slog.Logger

	want  chan struct{} // cap 1: prepare one spare
	ready chan *os.File // cap 1: a prepared spare, open for writing, at path
	quit  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

func newSpareMaker(dir string, size int64, noSync bool, log *slog.Logger) *spareMaker {
	m := &spareMaker{path: filepath.Join(dir, spareName), size: size, noSync: noSync, log: log,
		want: make(chan struct{}, 1), ready: make(chan *os.File, 1), quit: make(chan struct{})}
	m.want <- struct{}{}
	m.wg.Add(1)
	go m.run()
	return m
}

func (m *spareMaker) run() {
	defer m.wg.Done()
	for {
		select {
		case <-m.quit:
			return
		case <-m.want:
		}
		f, err := m.make()
		if err != nil {
			m.log.Warn("journal: cannot preallocate the next WAL segment; new segments will be appended to (slower fsyncs)",
				"path", m.path, "err", err)
			return
		}
		m.ready <- f // never blocks: one spare is asked for at a time, and take empties ready before asking
	}
}

// make creates the spare file and fills it with zeros. O_EXCL: the path is
// never truncated, whatever it might be.
func (m *spareMaker) make() (*os.File, error) {
	f, err := os.OpenFile(m.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, err
	}
	if err := zeroFill(f, 0, m.size, m.noSync); err != nil {
		f.Close()
		os.Remove(m.path)
		return nil, err
	}
	return f, nil
}

// take creates the segment file at path for the writer, returning it open
// for writing with the bytes it already holds as zeros: the prepared spare
// renamed to path (m.size), or a new empty file (0). It fails if path
// exists: no file can legitimately carry a seq above the last one.
func (m *spareMaker) take(path string) (*os.File, int64, error) {
	if _, err := os.Lstat(path); err == nil {
		return nil, 0, fmt.Errorf("journal: create segment %s: %w", path, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("journal: create segment: %w", err)
	}
	if m != nil {
		select {
		case f := <-m.ready:
			f.Close()
			if err := os.Rename(m.path, path); err != nil {
				os.Remove(m.path)
				return nil, 0, fmt.Errorf("journal: create segment from spare: %w", err)
			}
			m.want <- struct{}{}
			// Reopened under its name, which error messages then carry.
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return nil, 0, fmt.Errorf("journal: open segment: %w", err)
			}
			return f, m.size, nil
		default: // still being prepared (or preparation failed)
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, 0, err
	}
	return f, 0, nil
}

// stop ends preparation and removes an unused spare. Idempotent.
func (m *spareMaker) stop() {
	if m == nil {
		return
	}
	m.once.Do(func() {
		close(m.quit)
		m.wg.Wait()
		select {
		case f := <-m.ready:
			f.Close()
			os.Remove(m.path)
		default:
		}
	})
}
