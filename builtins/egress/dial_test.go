package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// loopbackServer starts an HTTP server on 127.0.0.1 that counts its connections.
func loopbackServer(t *testing.T, h http.Handler) (*httptest.Server, *countingListener, string) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	require.NoError(t, err)
	cl := &countingListener{Listener: ln}
	srv := httptest.NewUnstartedServer(h)
	require.NoError(t, srv.Listener.Close())
	srv.Listener = cl
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	return srv, cl, port
}

// assertNoConnections proves that no earlier connection is still waiting to be accepted: it
// dials once itself and waits until that sentinel (queued behind any earlier one) is counted.
func assertNoConnections(t *testing.T, l *countingListener) {
	t.Helper()
	before := l.accepted.Load()
	conn, err := net.Dial("tcp4", l.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	require.Eventually(t, func() bool { return l.accepted.Load() > before }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int64(1), l.accepted.Load(), "the guarded client reached the server")
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, "ok")
})

func loopbackSpellings(port string) []string {
	return []string{
		"http://127.0.0.1:" + port + "/",
		"http://2130706433:" + port + "/",
		"http://0x7f000001:" + port + "/",
		"http://0x7f.0.0.1:" + port + "/",
		"http://0177.0.0.1:" + port + "/",
		"http://127.1:" + port + "/",
		"http://127.0.1:" + port + "/",
		"http://0:" + port + "/",
		"http://localhost:" + port + "/",
		"http://localhost.:" + port + "/",
		"http://[::1]:" + port + "/",
		"http://[::ffff:127.0.0.1]:" + port + "/",
		"http://[::ffff:7f00:1]:" + port + "/",
		"http://１２７.０.０.１:" + port + "/",
		"http://rebind.test:" + port + "/",
		"http://127.0.0.1.nip.io:" + port + "/",
		"http://mapped-loopback.test:" + port + "/",
		"http://user@127.0.0.1:" + port + "/",
	}
}

func TestHTTPClientNeverReachesLoopback(t *testing.T) {
	_, target, port := loopbackServer(t, okHandler)
	client := HTTPClient(newChecker(t, Config{Allow: []string{"*"}}))
	for _, raw := range loopbackSpellings(port) {
		t.Run(raw, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			var denied *DeniedError
			require.ErrorAs(t, err, &denied)
		})
	}
	assertNoConnections(t, target)
}

func TestHTTPClientStopsDNSRebinding(t *testing.T) {
	_, target, port := loopbackServer(t, okHandler)
	r := &rebindingResolver{answers: [][]netip.Addr{addrs("93.184.216.34"), addrs("127.0.0.1")}}
	client := HTTPClient(newChecker(t, Config{Allow: []string{"rebinding.test"}, Resolver: r}))
	resp, err := client.Get("http://rebinding.test:" + port + "/")
	if resp != nil {
		resp.Body.Close()
	}
	var denied *DeniedError
	require.ErrorAs(t, err, &denied)
	assert.Contains(t, denied.Reason, "loopback address 127.0.0.1")
	assert.Equal(t, int64(2), r.calls.Load(), "checked once by URL, once at dial")
	assertNoConnections(t, target)
}

func TestDialerRefusesAtConnectTime(t *testing.T) {
	_, target, port := loopbackServer(t, okHandler)
	var prevCalled atomic.Int64
	base := &net.Dialer{Timeout: time.Second}
	base.Control = func(string, string, syscall.RawConn) error { prevCalled.Add(1); return nil }
	d := Dialer(base, newChecker(t, Config{Allow: []string{"*"}}))
	for _, network := range []string{"tcp", "tcp4"} {
		conn, err := d.DialContext(context.Background(), network, "127.0.0.1:"+port)
		if conn != nil {
			conn.Close()
		}
		var denied *DeniedError
		require.ErrorAs(t, err, &denied, network)
		assert.Equal(t, "loopback address 127.0.0.1", denied.Reason)
	}
	assert.Zero(t, prevCalled.Load(), "base control must not run for a refused address")
	assertNoConnections(t, target)

	// With the address exempt, the dial goes through and the base control still runs.
	open := Dialer(base, newChecker(t, Config{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}))
	conn, err := open.DialContext(context.Background(), "tcp4", "127.0.0.1:"+port)
	require.NoError(t, err)
	conn.Close()
	assert.Equal(t, int64(1), prevCalled.Load())
}

func TestHTTPClientRechecksRedirects(t *testing.T) {
	_, target, targetPort := loopbackServer(t, okHandler)
	_, front, frontPort := loopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "front")
	}))
	// Only the front server's port is allowed; 127.0.0.1 is exempted so that it is reachable.
	c := newChecker(t, Config{
		Allow:        []string{"127.0.0.1:" + frontPort, "rebind.test:" + frontPort},
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	})
	client := HTTPClient(c)

	resp, err := client.Get("http://127.0.0.1:" + frontPort + "/")
	require.NoError(t, err, "the allowed server must be reachable")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "front", string(body))

	redirects := append(loopbackSpellings(targetPort),
		"file:///etc/passwd",
		"gopher://127.0.0.1:"+targetPort+"/_x",
		"//127.0.0.1:"+targetPort+"/",
	)
	for _, to := range redirects {
		t.Run(to, func(t *testing.T) {
			resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%s/?to=%s", frontPort, url.QueryEscape(to)))
			if resp != nil {
				resp.Body.Close()
			}
			var denied *DeniedError
			require.ErrorAs(t, err, &denied)
		})
	}
	assert.Positive(t, front.accepted.Load())
	assertNoConnections(t, target)
}

func TestHTTPClientAllowsExemptServer(t *testing.T) {
	_, srv, port := loopbackServer(t, okHandler)
	client := HTTPClient(newChecker(t, Config{
		Allow:        []string{"rebind.test"},
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	}))
	resp, err := client.Get("http://rebind.test:" + port + "/")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, "ok", string(body))
	assert.Equal(t, int64(1), srv.accepted.Load())
}
