//go:build unix

package postgres

import (
	"errors"
	"net"
	"syscall"
)

// idleEnded reports whether the idle connection conn has data or its end
// waiting to be read, peeked at without blocking or consuming it: the
// server sends nothing unasked to an idle session of this store but the
// error it ends it with.
func idleEnded(conn net.Conn) bool {
	sc, ok := transport(conn).(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ended := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ended = n > 0 || n == 0 && err == nil || err != nil && !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EWOULDBLOCK)
		return true
	})
	return ended || err != nil
}
