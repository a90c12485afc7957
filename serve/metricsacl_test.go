package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// metricsFrom asks srv for /metrics as a connection from remote would.
func metricsFrom(srv *Server, remote string) (int, string) {
	r := httptest.NewRequest("GET", "/metrics", nil)
	r.RemoteAddr = remote
	r.Host = strings.Split(remote, ":")[0]
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// The metrics name every tenant and its spend. Where the keys name more
// than one tenant, /metrics on the callers' listener is served to loopback
// connections only (a scraper beside the gateway): a tenant, or anyone
// reaching the address without a key, would otherwise read the others'
// names, spend and tokens. A policy of one tenant serves them as before.
func TestTenantsMetricsAreNotServedToCallers(t *testing.T) {
	srv := inProcess(t, "", func(o *Options) {
		o.Source = cueSource(writePolicy(t, fmt.Sprintf(twoTenants, sha("alice-key"), sha("bob-key"))))
		o.Models = nil
	})
	// A start on another address than a loopback one says so.
	assert.True(t, srv.metricsLoopbackOnly(&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}))
	assert.True(t, srv.metricsLoopbackOnly(&net.TCPAddr{IP: net.IPv4zero, Port: 8080}))
	assert.False(t, srv.metricsLoopbackOnly(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(twoTenants, sha("alice-key"), sha("bob-key")))), WatchInterval: -1})
	assert.NotContains(t, s.logs.String(), "/metrics", "a gateway on a loopback address serves every connection its metrics")
	code, body := metricsFrom(srv, "10.1.2.3:40000")
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.Contains(t, body, "-metrics")
	assert.NotContains(t, body, "agentc_serve")
	code, body = metricsFrom(srv, "[2001:db8::1]:40000")
	assert.Equal(t, http.StatusForbidden, code, body)

	code, body = metricsFrom(srv, "127.0.0.1:40000")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "agentc_serve_policy_generation")
	code, _ = metricsFrom(srv, "[::1]:40000")
	assert.Equal(t, http.StatusOK, code)

	one := inProcess(t, "")
	code, body = metricsFrom(one, "10.1.2.3:40000")
	assert.Equal(t, http.StatusOK, code, body)
}

// A loopback connection is told by its address in either notation.
func TestMetricsLoopbackInIPv6Notation(t *testing.T) {
	srv := inProcess(t, "", func(o *Options) {
		o.Source = cueSource(writePolicy(t, fmt.Sprintf(twoTenants, sha("alice-key"), sha("bob-key"))))
		o.Models = nil
	})
	code, body := metricsFrom(srv, "[::ffff:127.0.0.1]:40000")
	assert.Equal(t, http.StatusOK, code, body)
	code, _ = metricsFrom(srv, "[::ffff:10.1.2.3]:40000")
	assert.Equal(t, http.StatusForbidden, code)
	assert.False(t, srv.metricsLoopbackOnly(&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 8080}))
}

// A connection to a Unix socket is local: the metrics are served to it,
// and a start on such a socket does not warn (an embedder's listener; its
// remote address names no host).
func TestMetricsOnAUnixSocket(t *testing.T) {
	srv := inProcess(t, "", func(o *Options) {
		o.Source = cueSource(writePolicy(t, fmt.Sprintf(twoTenants, sha("alice-key"), sha("bob-key"))))
		o.Models = nil
	})
	assert.False(t, srv.metricsLoopbackOnly(&net.UnixAddr{Name: "/run/agentc.sock", Net: "unix"}))
	for _, remote := range []string{"@", ""} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.RemoteAddr = remote
		r.Host = "localhost"
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(&net.UnixAddr{Name: "/run/agentc.sock", Net: "unix"})))
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		assert.Equal(t, http.StatusOK, w.Code, "remote %q: %s", remote, w.Body.String())
	}
	// Without a Unix listener, an address that names no host is not local.
	code, _ := metricsFrom(srv, "@")
	assert.Equal(t, http.StatusForbidden, code)
}
