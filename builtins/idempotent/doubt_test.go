package idempotent_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
)

// replicaStores returns, per store kind, a function that opens one store
// twice, as two replicas do: memory (one store for both), a SQLite file
// opened by each, and the Redis and PostgreSQL test servers whose URLs are
// set.
func replicaStores() map[string]func(t *testing.T) (a, b runtime.KV) {
	return map[string]func(t *testing.T) (a, b runtime.KV){
		"memory": func(*testing.T) (a, b runtime.KV) {
			kv := runtime.NewMemoryKV()
			return kv, kv
		},
		"sqlite": func(t *testing.T) (a, b runtime.KV) {
			path := filepath.Join(t.TempDir(), "state.db")
			open := func() runtime.KV {
				s, err := sqlite.Open(context.Background(), path)
				require.NoError(t, err)
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
			return open(), open()
		},
		"redis":    func(t *testing.T) (a, b runtime.KV) { return twoKVs(t, "redis") },
		"postgres": func(t *testing.T) (a, b runtime.KV) { return twoKVs(t, "postgres") },
	}
}

// twoKVs is twoClients seen as key-value stores.
func twoKVs(t *testing.T, kind string) (a, b runtime.KV) {
	sa, sb := twoClients(t, kind)
	return sa.(runtime.KV), sb.(runtime.KV)
}

// A side-effecting call that may have had its effect (it panicked, was
// cancelled or timed out while it ran, or lost its connection after the
// request went out) is recorded in doubt at once: a duplicate on another
// replica fails in doubt without waiting out the lease (an hour here), and
// without running the tool again; the key stays in doubt.
func TestACallThatMayHaveRunIsInDoubtAtOnce(t *testing.T) {
	ways := map[string]func(ctx context.Context, started chan<- struct{}) (any, error){
		"panic": func(context.Context, chan<- struct{}) (any, error) {
			panic("charged, then crashed decoding the answer")
		},
		"cancelled": func(ctx context.Context, started chan<- struct{}) (any, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		},
		"timed out": func(context.Context, chan<- struct{}) (any, error) {
			return nil, &runtime.CallError{Status: 504, Message: "payments gateway timed out"}
		},
		"may have run": func(context.Context, chan<- struct{}) (any, error) {
			return nil, runtime.MayHaveRun(rt.Transient("connection lost"))
		},
	}
	for kind, open := range replicaStores() {
		for way, first := range ways {
			t.Run(kind+"/"+way, func(t *testing.T) {
				sa, sb := open(t)
				p := toolPlan(rt.Layer("idempotent", `{"lease_ttl": "1h"}`))
				p.Tools = map[string]plan.Tool{"charge": {SideEffecting: true}}
				var calls atomic.Int64
				started := make(chan struct{})
				charge := func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
					if calls.Add(1) == 1 {
						return first(ctx, started)
					}
					return "charged again", nil
				}
				replica := func(kv runtime.KV) *runtime.Pipeline {
					return rt.Build(t, p, runtime.Deps{KV: kv, Tools: map[string]runtime.ToolFunc{"charge": charge}})
				}
				a, b := replica(sa), replica(sb)
				req := runtime.ToolRequest{Name: "charge", Args: map[string]any{"order_id": "A1"}}

				switch way {
				case "panic":
					assert.Panics(t, func() { _, _ = a.Tool(ctx1, req) })
				case "cancelled":
					require.ErrorIs(t, cancelWhileRunning(a, req, started), context.Canceled)
				default:
					_, err := a.Tool(ctx1, req)
					require.Error(t, err)
				}

				for _, dup := range []*runtime.Pipeline{b, a} {
					dctx, cancel := context.WithTimeout(ctx1, 5*time.Second)
					_, err := dup.Tool(dctx, req)
					cancel()
					var doubt *runtime.InDoubtError
					require.ErrorAs(t, err, &doubt, "the duplicate fails in doubt at once, not after the lease")
					assert.Equal(t, "in_doubt", runtime.KindOf(err))
				}
				assert.EqualValues(t, 1, calls.Load(), "the charge did not run again")
			})
		}
	}
}

// failingSets is a KV whose writes fail once armed.
type failingSets struct {
	runtime.KV
	armed atomic.Bool
}

func (f *failingSets) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if f.armed.Load() {
		return errBroken
	}
	return f.KV.Set(ctx, key, value, ttl)
}

// When the store cannot record the doubt, the claim is left to expire into
// doubt, as before, and the failure is logged: a duplicate still never runs
// the call again.
func TestADoubtTheStoreCannotRecordWaitsOutTheLease(t *testing.T) {
	kv := &failingSets{KV: runtime.NewMemoryKV()}
	// Every line is written before the call returns (its renewer has
	// stopped by then).
	var log bytes.Buffer
	p := toolPlan(rt.Layer("idempotent", `{"lease_ttl": "300ms"}`))
	p.Tools = map[string]plan.Tool{"charge": {SideEffecting: true}}
	var calls atomic.Int64
	charge := func(context.Context, *runtime.ToolCall) (any, error) {
		calls.Add(1)
		kv.armed.Store(true) // the store goes away as the gateway times out
		return nil, &runtime.CallError{Status: 504, Message: "payments gateway timed out"}
	}
	pl := rt.Build(t, p, runtime.Deps{KV: kv, Logger: slog.New(slog.NewTextHandler(&log, nil)),
		Tools: map[string]runtime.ToolFunc{"charge": charge}})
	req := runtime.ToolRequest{Name: "charge", Args: map[string]any{"order_id": "A1"}}
	_, err := pl.Tool(ctx1, req)
	require.Error(t, err)
	assert.Contains(t, log.String(), "recording it in doubt failed, so its key is in doubt once its lease expires")
	assert.Contains(t, log.String(), errBroken.Error())

	dctx, cancel := context.WithTimeout(ctx1, 10*time.Second)
	defer cancel()
	_, err = pl.Tool(dctx, req)
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt, "in doubt once the lease expired")
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
	assert.EqualValues(t, 1, calls.Load())
}

// A side-effecting call cancelled before it reached the tool, its error
// marked runtime.NotRun (an MCP call cancelled while it waited for its
// server's tools to be listed again), did not act: its claim is released,
// and the call sent again runs, once.
func TestACallCancelledBeforeItRanIsReleased(t *testing.T) {
	p := toolPlan(rt.Layer("idempotent", `{"lease_ttl": "1h"}`))
	p.Tools = map[string]plan.Tool{"charge": {SideEffecting: true}}
	var calls atomic.Int64
	started := make(chan struct{})
	charge := func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
		if calls.Add(1) == 1 {
			close(started)
			<-ctx.Done()
			return nil, runtime.NotRun(ctx.Err())
		}
		return "charged", nil
	}
	pl := rt.Build(t, p, runtime.Deps{KV: runtime.NewMemoryKV(), Tools: map[string]runtime.ToolFunc{"charge": charge}})
	req := runtime.ToolRequest{Name: "charge", Args: map[string]any{"order_id": "A1"}}
	require.ErrorIs(t, cancelWhileRunning(pl, req, started), context.Canceled)

	dctx, cancel := context.WithTimeout(ctx1, 5*time.Second)
	defer cancel()
	res, err := pl.Tool(dctx, req)
	require.NoError(t, err, "the call sent again runs")
	assert.Equal(t, "charged", res.Value)
	assert.EqualValues(t, 2, calls.Load())
}

// cancelWhileRunning runs req on pl, cancels its context once started is
// closed, and returns the call's error.
func cancelWhileRunning(pl *runtime.Pipeline, req runtime.ToolRequest, started <-chan struct{}) error {
	cctx, cancel := context.WithCancel(ctx1)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := pl.Tool(cctx, req)
		done <- err
	}()
	<-started
	cancel()
	return <-done
}
