package serve

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	_ "github.com/agentc-dev/agentc/runtime/store/postgres"
	_ "github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// stallProxy forwards TCP connections to addr until stall is called; from
// then on it forwards nothing more, so that the server seems to hang.
type stallProxy struct {
	ln      net.Listener
	stalled atomic.Bool
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	conns   []net.Conn
}

func newStallProxy(t *testing.T, addr string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &stallProxy{ln: ln, done: make(chan struct{})}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go p.pipe(c, up)
			go p.pipe(up, c)
		}
	}()
	t.Cleanup(p.close)
	return p
}

// close ends the proxy and every connection through it.
func (p *stallProxy) close() {
	p.once.Do(func() {
		close(p.done)
		_ = p.ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
}

func (p *stallProxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.stalled.Load() {
			<-p.done
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *stallProxy) stall() { p.stalled.Store(true) }

// TestSharedStoreTimeoutIsUnavailable: a shared store that stops answering
// (its `timeout` passing) refuses the call in the layer that needs it
// (meter, rate_limit, idempotent); that is the gateway's store being
// unavailable, not the model timing out: 503 with Retry-After, never 504.
func TestSharedStoreTimeoutIsUnavailable(t *testing.T) {
	for kind, env := range map[string]string{"redis": storetest.RedisEnv, "postgres": storetest.PostgresEnv} {
		raw := os.Getenv(env)
		if raw == "" {
			t.Logf("%s not set: %s skipped", env, kind)
			continue
		}
		for name, layer := range map[string]plan.Layer{
			"meter":      rt.Layer("meter", `{"scope": "run", "budget": {"calls": 100}, "store": "shared"}`),
			"rate_limit": rt.Layer("rate_limit", `{"rate": 100, "per": "1m", "mode": "reject", "scope": "run", "store": "shared"}`),
		} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				u, err := url.Parse(raw)
				require.NoError(t, err)
				proxy := newStallProxy(t, u.Host)
				u.Host = proxy.ln.Addr().String()
				p := rt.Plan(plan.Chains{Chat: []plan.Layer{layer}})
				prefix := storetest.Prefix(t)
				if kind == "postgres" {
					t.Cleanup(func() { dropSchema(t, raw, prefix) })
				}
				p.Stores = map[string]plan.Store{"shared": {Kind: kind, URL: u.String(), Prefix: prefix, Timeout: "300ms"}}
				model := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
				pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
				t.Cleanup(proxy.close) // before the pipeline closes its connections
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
				req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
				_, err = pl.Complete(ctx, req)
				require.NoError(t, err, "the store answers")

				proxy.stall()
				start := time.Now()
				_, err = pl.Complete(ctx, req)
				require.Error(t, err)
				assert.Less(t, time.Since(start), 3*time.Second, "bounded by the store's timeout")
				assert.Equal(t, 1, model.Calls(), "the call did not run")
				code, delay := StatusOf(err)
				assert.Equal(t, http.StatusServiceUnavailable, code, "%v", err)
				assert.GreaterOrEqual(t, delay, time.Second, "%v", err)
				assert.Equal(t, "store_unavailable", runtime.KindOf(err), "%v", err)
			})
		}
	}
}
