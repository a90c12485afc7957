package crossproc_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// proxy forwards 127.0.0.1:port to a server until cut, and again once
// restored on the same port: a store outage without touching the server.
type proxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	p.listen("127.0.0.1:0")
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	require.NoError(p.t, err)
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[s] = struct{}{}, struct{}{}
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
		}
	}()
}

// cut closes the listener and every connection through it.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// restore listens again on the same address.
func (p *proxy) restore() { p.listen(p.addr) }

// via returns u with its host replaced by the proxy's.
func (p *proxy) via(u string) string {
	pu, err := url.Parse(u)
	require.NoError(p.t, err)
	pu.Host = p.addr
	return pu.String()
}

func hostOf(t *testing.T, u string) string {
	pu, err := url.Parse(u)
	require.NoError(t, err)
	return pu.Host
}

func TestAStoreOutageFailsClosedAndResumes(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			px := newProxy(t, hostOf(t, b.url))
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{
				rt.Layer("rate_limit", `{"rate": 1000, "burst": 100, "mode": "reject", "store": "shared"}`),
				rt.Layer("meter", `{"budget": {"calls": 1000}, "scope": "global", "store": "shared"}`),
				rt.Layer("idempotent", `{"store": "shared"}`),
			}})
			p.Stores = map[string]plan.Store{"shared": {Kind: b.kind, URL: px.via(b.url), Prefix: storetest.Prefix(t)}}
			p.Tools = map[string]plan.Tool{"pay": {SideEffecting: true}}
			var mu sync.Mutex
			ran := map[string]int{}
			pay := func(_ context.Context, c *runtime.ToolCall) (any, error) {
				mu.Lock()
				ran[c.Args["order_id"].(string)]++
				mu.Unlock()
				return "paid " + c.Args["order_id"].(string), nil
			}
			pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"pay": pay}})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "run-1"})
			call := func(order string) (runtime.ToolResult, error) {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				return pl.Tool(cctx, runtime.ToolRequest{Name: "pay", Args: map[string]any{"order_id": order}})
			}
			_, err := call("A1")
			require.NoError(t, err)

			px.cut()
			for _, order := range []string{"A1", "A2"} {
				_, err := call(order)
				require.Error(t, err, "the store is down: the call fails closed")
				assert.NotEqual(t, runtime.ClassOK, runtime.Classify(err))
			}
			mu.Lock()
			assert.Equal(t, map[string]int{"A1": 1}, ran, "nothing ran while the store was down")
			mu.Unlock()

			px.restore()
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, err = call("A2")
				if err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			require.NoError(t, err, "service resumes once the store is back")
			r, err := call("A1")
			require.NoError(t, err)
			assert.True(t, r.Deduped, "the call made before the outage is not executed again")
			mu.Lock()
			assert.Equal(t, map[string]int{"A1": 1, "A2": 1}, ran, "nothing executed twice")
			mu.Unlock()
		})
	}
}
