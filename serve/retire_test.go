package serve

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRetiredGenerationClosesOffTheRequestsPath: the last request to hold
// a generation a reload had retired closed it in its own deferred release,
// its pipeline and then its MCP upstream sessions (each waiting for its
// server to answer the session's DELETE), before its handler returned: its
// client waited for the close to end its response. The close now runs
// apart, and the shutdown still waits for it: Serve returns once every
// generation a reload replaced is closed.
func TestRetiredGenerationClosesOffTheRequestsPath(t *testing.T) {
	deleting, letGo := make(chan struct{}, 4), make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "a", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "t"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	holding := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deleting <- struct{}{}
			<-letGo
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(holding.Close)
	var released bool
	release := func() {
		if !released {
			released = true
			close(letGo)
		}
	}
	t.Cleanup(release)
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)

	dir := writePolicy(t, fmt.Sprintf("package gw\n\nmcp: servers: up: url: %q\n", holding.URL))
	s := startServer(t, Options{Source: cueSource(dir), ShutdownTimeout: 5 * time.Second, WatchInterval: -1})
	gen1 := s.srv.cur.Load()

	// A POST whose body stalls after its first bytes: its handler holds gen1.
	host := strings.TrimPrefix(s.url, "http://")
	conn, err := net.Dial("tcp", host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	body := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	_, err = fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
		host, len(body), body[:11])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return gen1.active.Load() == 1 }, 5*time.Second, time.Millisecond)

	// A reload to another upstream retires gen1, still held by the POST.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), fmt.Appendf(nil, "package gw\n\nmcp: servers: up: url: %q\n", plain.URL), 0o644))
	require.NoError(t, s.srv.Reload(context.Background()))
	require.True(t, gen1.retired.Load())

	// The rest of the body: the POST is answered, and its response ends
	// (the connection closes) while gen1's session is still closing (its
	// DELETE held), well before the session's close would give up on it.
	_, err = io.WriteString(conn, body[11:])
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(3*time.Second)))
	resp, err := io.ReadAll(conn)
	require.NoError(t, err, "the response ended only once the retired generation was closed")
	assert.Contains(t, string(resp), "HTTP/1.1 ")
	<-deleting
	assert.False(t, gen1.closed(), "the DELETE is held: gen1 is still closing")

	// The shutdown waits for gen1's close: Serve does not return while its
	// DELETE is held, and returns once it is answered, gen1 closed.
	stopped := make(chan error, 1)
	go func() { stopped <- s.stop() }()
	require.Eventually(t, func() bool { return !s.srv.ready.Load() && s.srv.closed.Load() }, 5*time.Second, time.Millisecond)
	require.Never(t, func() bool { return len(stopped) > 0 }, 300*time.Millisecond, 10*time.Millisecond,
		"Serve returned while a generation a reload replaced was still closing")
	release()
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return once the retired generation could close")
	}
	assert.True(t, gen1.closed(), "Serve returned before the retired generation was closed")
	assert.NotContains(t, s.logs.String(), "still closing")
}
