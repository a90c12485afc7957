package serve

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeaderLimitIsExact: the request line and headers are bounded at
// MaxHeaderBytes (64 KiB) to the byte: a head of exactly 64 KiB is served,
// one byte more is a 431, and so is one within the 4 KiB net/http adds to
// its own bound.
func TestHeaderLimitIsExact(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, "package gw\nmodels: m: {}\n")), WatchInterval: -1})
	headerLimitIsExact(t, strings.TrimPrefix(s.url, "http://"))
}

// TestOpsHeaderLimitIsExact: the operations listener (-metrics) bounds
// request heads as the main one does, not at net/http's 1 MiB.
func TestOpsHeaderLimitIsExact(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, "package gw\nmodels: m: {}\n")), WatchInterval: -1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ops := s.srv.OpsHTTPServer()
	go func() { _ = ops.Serve(ln) }()
	t.Cleanup(func() { _ = ops.Close() })
	headerLimitIsExact(t, ln.Addr().String())
}

func headerLimitIsExact(t *testing.T, addr string) {
	status := func(size int) int {
		t.Helper()
		head := "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Pad: "
		pad := size - len(head) - len("\r\n\r\n")
		require.Positive(t, pad)
		req := head + strings.Repeat("a", pad) + "\r\n\r\n"
		require.Len(t, req, size)
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = conn.Write([]byte(req))
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, status(MaxHeaderBytes))
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, status(MaxHeaderBytes+1))
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, status(MaxHeaderBytes+4000))
	assert.Equal(t, http.StatusOK, status(MaxHeaderBytes-1))
}
