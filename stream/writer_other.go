//go:build !unix

package stream

import (
	"net"
	"syscall"
)

// write writes b with a short deadline (no non-blocking write here).
func (c *conn) write(b []byte) (int, error) { return c.deadlineWrite(b) }

// rawConn is nil: writes use deadlines.
func rawConn(net.Conn) syscall.RawConn { return nil }
