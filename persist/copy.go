package persist

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// copyBuf builds a COPY ... FROM STDIN (FORMAT binary) stream by hand: the
// sink's columns have five fixed types (bigint, integer, text, timestamptz,
// json), and encoding them directly costs a fraction of pgx.CopyFrom's
// generic []any path (type planning per value, boxing). The format:
// https://www.postgresql.org/docs/15/sql-copy.html#id-1.9.3.55.9.4
type copyBuf struct {
	b    []byte
	rows int
	rd   *bytes.Reader // handed to pgconn by send; replaced, never reused, after a failed send
}

// copyHeader is the signature, the flags field and the header extension length.
const copyHeader = "PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00"

// pgEpochMicros is 2000-01-01 UTC in microseconds since the Unix epoch.
const pgEpochMicros = 946_684_800 * 1_000_000

func (c *copyBuf) reset() {
	c.b = append(c.b[:0], copyHeader...)
	c.rows = 0
}

// row starts a tuple of n fields.
func (c *copyBuf) row(n int) {
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(n))
	c.rows++
}

func (c *copyBuf) int8(v int64) {
	c.b = binary.BigEndian.AppendUint32(c.b, 8)
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(v))
}

func (c *copyBuf) int4(v int32) {
	c.b = binary.BigEndian.AppendUint32(c.b, 4)
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(v))
}

func (c *copyBuf) text(s string) {
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(s)))
	c.b = append(c.b, s...)
}

func (c *copyBuf) null() { c.b = binary.BigEndian.AppendUint32(c.b, 0xffffffff) }

// timestamptz encodes unix nanoseconds as microseconds since 2000-01-01,
// truncated toward the past (as pgx does for a time.Time).
func (c *copyBuf) timestamptz(ns int64) {
	us := ns / 1000
	if ns%1000 < 0 {
		us--
	}
	c.int8(us - pgEpochMicros)
}

// json encodes a JSON text (json's binary form is the text).
func (c *copyBuf) json(p []byte) {
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(len(p)))
	c.b = append(c.b, p...)
}

// send runs sql (COPY table ... FROM STDIN (FORMAT binary)) with the tuples
// built since reset.
func (c *copyBuf) send(ctx context.Context, tx pgx.Tx, table, sql string) error {
	if c.rows == 0 {
		return nil
	}
	c.b = binary.BigEndian.AppendUint16(c.b, 0xffff) // trailer
	if c.rd == nil {
		c.rd = new(bytes.Reader)
	}
	c.rd.Reset(c.b)
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, c.rd, sql)
	if err != nil {
		// pgconn can return from some errors before its goroutine that
		// reads c.rd has stopped: leave that goroutine the old reader and
		// buffer for good; the next batch starts on fresh ones.
		c.rd, c.b = nil, nil
		return fmt.Errorf("persist: copy %d %s rows: %w", c.rows, table, err)
	}
	if got := tag.RowsAffected(); got != int64(c.rows) {
		return fmt.Errorf("persist: copy %s: %d of %d rows", table, got, c.rows)
	}
	return nil
}
