//go:build !unix

package stream

import (
	"net"
	"syscall"
	"time"
)

// write writes b with a short deadline (no non-blocking write here): it
// returns how much the socket took (a timeout is not an error).
func (c *conn) write(b []byte) (int, error) {
	_ = c.nc.SetWriteDeadline(time.Now().Add(time.Millisecond))
	n, err := c.nc.Write(b)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		err = nil
	}
	return n, err
}

// rawConn is nil: writes use deadlines.
func rawConn(net.Conn) syscall.RawConn { return nil }
