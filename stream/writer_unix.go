//go:build unix

package stream

import (
	"net"
	"syscall"
)

// write writes b to the socket without blocking: it returns how much the
// kernel took (a full send buffer is not an error).
func (c *conn) write(b []byte) (int, error) {
	if c.raw == nil { // no raw socket (not a TCP connection)
		return c.deadlineWrite(b)
	}
	var n int
	var werr error
	err := c.raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, e := syscall.Write(int(fd), b[n:])
			switch {
			case e == syscall.EINTR:
				continue
			case e == syscall.EAGAIN:
				return true // full: the rest waits for the next pass
			case e != nil:
				werr = e
				return true
			}
			n += m
		}
		return true
	})
	if werr == nil {
		werr = err
	}
	return n, werr
}

// rawConn is nc's descriptor for non-blocking writes (nil: not available).
func rawConn(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}
