// Package runtimetest offers helpers for testing middlewares: plans built in
// Go, scripted model clients and tools that count their calls, and a goroutine
// leak check.
package runtimetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// Build builds p with deps, failing the test on an error, and closes the
// pipeline when the test ends.
func Build(t testing.TB, p *plan.Plan, deps runtime.Deps) *runtime.Pipeline {
	t.Helper()
	pl, err := runtime.Build(context.Background(), p, deps)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	t.Cleanup(func() { _ = pl.Close() })
	return pl
}

// Layer returns a chain entry using module use with a JSON config (defaults
// are the module's own when fields are left out).
func Layer(use, config string) plan.Layer {
	l := plan.Layer{Use: use, Name: use}
	if config != "" {
		l.Config = json.RawMessage(config)
	}
	return l
}

// Named returns l renamed.
func Named(name string, l plan.Layer) plan.Layer {
	l.Name = name
	return l
}

// Plan returns a plan with the given chains and two priced models, "primary"
// (3/15 USD per million tokens) and "backup" (0.5/1.5). It declares no
// tools and allows undeclared ones (settings.allow_undeclared_tools), so
// that tests can call the tools they register in Deps.Tools.
func Plan(chains plan.Chains) *plan.Plan {
	return &plan.Plan{
		Version: plan.Version,
		Policy:  "test",
		Models: map[string]plan.Model{
			"primary": {USDPerMTokIn: 3, USDPerMTokOut: 15},
			"backup":  {USDPerMTokIn: 0.5, USDPerMTokOut: 1.5},
		},
		Chains:   chains,
		Settings: plan.Settings{AllowUndeclaredTools: true},
	}
}

// Response is one scripted model response.
type Response struct {
	// Deltas are streamed in order, one text delta each.
	Deltas []string
	// Stream, when set, is streamed instead of Deltas: whole deltas (tool-call
	// fragments, finish reasons) as they are.
	Stream []runtime.Delta
	// Usage is reported on the last delta (when the stream completes).
	Usage runtime.Usage
	// Err fails the call after FailAfter deltas (0: before the first).
	Err       error
	FailAfter int
	// Delay waits before the first delta (respecting cancellation).
	Delay time.Duration
	// Hang blocks after the deltas until the context is done.
	Hang bool
}

// Model is a scripted model client: each call takes the next response (the
// last one repeats). It counts calls and the calls still running.
type Model struct {
	mu        sync.Mutex
	responses []Response
	calls     atomic.Int64
	running   atomic.Int64
	cancelled atomic.Int64
	requests  []runtime.ChatRequest
}

// CallResponse is a model's answer that calls the tool name with the JSON
// arguments args, under the call id id (finish reason tool_calls).
func CallResponse(id, name, args string) Response {
	return Response{Stream: []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: id, Name: name, Arguments: args}},
		FinishReason: runtime.FinishToolCalls}}}
}

// NewModel returns a model that answers with responses in order.
func NewModel(responses ...Response) *Model {
	return &Model{responses: responses}
}

// Calls returns how many calls the model received.
func (m *Model) Calls() int { return int(m.calls.Load()) }

// Requests returns the requests the model received, in order.
func (m *Model) Requests() []runtime.ChatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]runtime.ChatRequest(nil), m.requests...)
}

// Running returns how many calls are still in progress.
func (m *Model) Running() int { return int(m.running.Load()) }

// Cancelled returns how many calls ended because their context was done.
func (m *Model) Cancelled() int { return int(m.cancelled.Load()) }

// Stream implements runtime.ModelClient.
func (m *Model) Stream(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	n := m.calls.Add(1) - 1
	m.running.Add(1)
	defer m.running.Add(-1)
	m.mu.Lock()
	r := m.responses[min(int(n), len(m.responses)-1)]
	m.requests = append(m.requests, *req)
	m.mu.Unlock()
	if r.Delay > 0 {
		t := time.NewTimer(r.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			m.cancelled.Add(1)
			return ctx.Err()
		case <-t.C:
		}
	}
	deltas := r.Stream
	if deltas == nil {
		deltas = make([]runtime.Delta, len(r.Deltas))
		for i, d := range r.Deltas {
			deltas[i] = runtime.Delta{Text: d}
		}
	}
	for i, delta := range deltas {
		if r.Err != nil && i == r.FailAfter {
			return r.Err
		}
		if err := ctx.Err(); err != nil {
			m.cancelled.Add(1)
			return err
		}
		if i == len(deltas)-1 && r.Err == nil && !r.Usage.IsZero() {
			delta.Usage = r.Usage
		}
		if !yield(delta) {
			return nil
		}
	}
	if r.Err != nil {
		return r.Err
	}
	if r.Hang {
		<-ctx.Done()
		m.cancelled.Add(1)
		return ctx.Err()
	}
	return nil
}

// Tool is a scripted tool: each call returns the next result or error (the
// last one repeats). It records the idempotency keys it saw.
type Tool struct {
	mu      sync.Mutex
	results []ToolResult
	calls   int
	keys    []string
}

// ToolResult is one scripted tool outcome.
type ToolResult struct {
	Value any
	Err   error
	// Hang blocks until the context is done.
	Hang bool
}

// NewTool returns a tool that answers with results in order.
func NewTool(results ...ToolResult) *Tool { return &Tool{results: results} }

// Calls returns how many calls the tool received.
func (t *Tool) Calls() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls
}

// Keys returns the idempotency keys of the calls.
func (t *Tool) Keys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.keys...)
}

// Func returns the tool as a runtime.ToolFunc.
func (t *Tool) Func() runtime.ToolFunc {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		t.mu.Lock()
		r := t.results[min(t.calls, len(t.results)-1)]
		t.calls++
		t.keys = append(t.keys, c.IdempotencyKey())
		t.mu.Unlock()
		if r.Hang {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return r.Value, r.Err
	}
}

// Collect runs a chat call and returns the delivered text. stopAfter > 0
// abandons the stream after that many deltas.
func Collect(ctx context.Context, pl *runtime.Pipeline, req runtime.ChatRequest, stopAfter int) (string, runtime.ChatResponse, error) {
	var b strings.Builder
	n := 0
	resp, err := pl.Stream(ctx, req, func(d runtime.Delta) bool {
		b.WriteString(d.Text)
		n++
		return stopAfter <= 0 || n < stopAfter
	})
	return b.String(), resp, err
}

// Staggered calls req on a and, once started is closed (a's call has
// reached its tool: it holds whatever b is to find) and delay after that
// (a store's ttl passing, say), on b (two replicas over one store), and
// returns both results; an error fails the test.
func Staggered(t testing.TB, ctx context.Context, a, b *runtime.Pipeline, req runtime.ToolRequest, started <-chan struct{}, delay time.Duration) (ra, rb runtime.ToolResult) {
	t.Helper()
	var errA, errB error
	var wg sync.WaitGroup
	ended := make(chan struct{})
	wg.Go(func() {
		defer close(ended)
		ra, errA = a.Tool(ctx, req)
	})
	select {
	case <-started:
		<-time.After(delay)
		wg.Go(func() { rb, errB = b.Tool(ctx, req) })
	case <-ended:
		errB = errors.New("the first call ended before its tool started")
	}
	wg.Wait()
	if errA != nil || errB != nil {
		t.Errorf("staggered calls: %v, %v", errA, errB)
	}
	return ra, rb
}

// Transient returns a transient *runtime.CallError.
func Transient(msg string) error {
	return &runtime.CallError{Kind: runtime.KindTransient, Status: 503, Message: msg}
}

// Permanent returns a permanent *runtime.CallError.
func Permanent(msg string) error {
	return &runtime.CallError{Kind: runtime.KindPermanent, Status: 400, Message: msg}
}

// CheckGoroutines fails t if, after the test, more goroutines run than before
// it started (waiting up to two seconds for stragglers to exit).
func CheckGoroutines(t testing.TB) {
	t.Helper()
	before := goruntime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for {
			n := goruntime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				buf = buf[:goruntime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// Notes records the request ids and the models the model clients under a
// context report (runtime.WithUpstreamRequestID): a gateway's notes.
type Notes struct {
	mu     sync.Mutex
	ids    []string
	served []string
}

// NoteUpstreamRequestID implements runtime.UpstreamRequestIDs.
func (n *Notes) NoteUpstreamRequestID(id string) {
	n.mu.Lock()
	n.ids = append(n.ids, id)
	n.mu.Unlock()
}

// NoteServedModel implements runtime.ServedModels.
func (n *Notes) NoteServedModel(name string) {
	n.mu.Lock()
	n.served = append(n.served, name)
	n.mu.Unlock()
}

// IDs returns the request ids reported, in order.
func (n *Notes) IDs() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.ids...)
}

// Served returns the models reported, in order.
func (n *Notes) Served() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.served...)
}

// LogBuffer is a log destination safe for concurrent writers: a
// bytes.Buffer under a lock, for a logger written from several goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
