// Command service is an example of embedding agentc: a small HTTP service that
// loads a compiled plan (plan.json, as written by `agentc build`), registers
// its model clients and tools, and runs every call through the pipeline. It
// links the runtime and the builtins only, not CUE.
//
// Endpoints (a run id is taken from the X-Run-ID header; a request without
// one is a run of its own, with a generated id returned in X-Run-ID and its
// per-run state dropped when the request ends):
//
//	POST /v1/chat          {"model","messages"} -> NDJSON: {"delta"}... then {"done"} or {"error"}
//	POST /v1/tools/{name}  {"args"}             -> {"result","attempts"} or {"error"}
//	POST /v1/turn          {"input"}            -> {"output"} or {"error"}
//	POST /v1/admit         {"items"}            -> {"admitted"}
//	POST /v1/runs/{id}/end                      -> 204; the run's per-run state (ledgers) is dropped
//
// A named run the client never ends is ended after 15 minutes without a
// call (policy.cue's settings.run_idle). At most 10,000 named runs are open
// at once: a request naming a new run past that is refused with 503
// (kind "too_many_runs", with Retry-After) unless runs idle for 15 minutes
// can be forgotten to make room.
//
// A refund sent again with the same Idempotency-Key header (or, without
// one, in the same run with the same arguments) is not made again: the
// policy's idempotent layer answers it from the first one's record
// ("deduped": true), kept in process memory for an hour.
//
// The example authenticates no one: a client that names another client's
// run id shares that run's budgets, rate limits and idempotency records (a
// duplicate refund is answered from the other's record). A service in front
// of several callers authenticates them and sets runtime.Run's Tenant from
// the credential (the run then belongs to that tenant: rate limits with
// scope "key" and idempotency records are the tenant's own), and scopes run
// ids per tenant, as agentc serve does with its keys (docs/serve.md).
//
// A body over 1 MiB is refused with 413, a malformed one (unknown fields,
// anything but white space after its JSON value) with 400.
// Errors are {"error": {"kind","layer","message"}} with status 403 for a
// blocked call, 402 for a budget ceiling, 409 for a call in doubt, 429 for a rate limit (with
// Retry-After: the limit's delay, else 1 s), 503 for an open circuit breaker or a
// store that is unavailable (with Retry-After), 504 for a timeout, 400 for an
// upstream's refusal of the request itself and 502 for any other failure (the
// mapping of agentc serve, serve.StatusOf). A client that went away gets no
// body (499 is logged).
//
// Limits: each connection is bounded (headers within 5s, the whole body
// within 30s, keep-alive idle 120s, 64 KiB of headers, 1,024 connections
// at once); a body is at most 1 MiB; a run id at most 1,024 bytes (400
// past it); 10,000 named runs open at once, each ended after 15 minutes
// idle; idempotency records kept an hour.
//
// Shutdown (an interrupt): the service stops taking requests and gives the
// calls in flight 30 s to finish (shutdownDrain), then cancels those still
// running and waits for them to return; only then is the pipeline closed,
// so that no call finds its stores closed.
//
// Run it with: go run ./examples/service -plan examples/service/plan.json
//
// policy.cue is the policy plan.json is built from: after a change to it,
// build the plan again with
// `go run ./cmd/agentc build -o examples/service/plan.json examples/service`.
//
// replicated/policy.cue is its policy for several replicas sharing one Redis
// and one PostgreSQL (REDIS_URL, DATABASE_URL): build it with agentc build
// and start each replica on the plan (docs/state.md).
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/serve"
)

func main() {
	planPath := flag.String("plan", "plan.json", "compiled plan")
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *planPath, *addr); err != nil {
		slog.Error("service", "error", err)
		os.Exit(1)
	}
}

// run serves the plan at planPath on addr until ctx ends, then lets the
// calls in flight finish (shutdownDrain, then cancels them and waits for
// them to return) before the pipeline is closed. It returns the listener's
// error, if any, after the same cleanup.
func run(ctx context.Context, planPath, addr string) error {
	p, err := plan.Load(planPath)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	srv, err := NewServer(ctx, p, DemoDeps(slog.Default()))
	if err != nil {
		return err
	}
	// Deferred, so it runs after serveUntil returned: once no call is left.
	defer func() {
		if err := srv.Close(); err != nil {
			slog.Error("close pipeline", "error", err)
		}
	}()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	slog.Info("serving", "addr", addr, "policy", p.Policy)
	return serveUntil(ctx, srv, netutil.LimitListener(ln, defaultLimits.MaxConns), shutdownDrain)
}

// shutdownDrain is how long a shutdown waits for the calls in flight
// before it cancels them.
const shutdownDrain = 30 * time.Second

// serveUntil serves h on ln until ctx ends (or serving fails), then stops
// taking requests and returns only once no handler is running: the
// pipeline's stores must outlive its calls (runtime.Pipeline.Close does
// not wait for them, and an outcome an audit or idempotent layer can no
// longer record leaves its call in doubt). The calls in flight have drain
// to finish; then their contexts are cancelled, and serveUntil waits for them
// to return. It returns the listener's error, if any.
func serveUntil(ctx context.Context, h http.Handler, ln net.Listener, drain time.Duration) error {
	base, cancelCalls := context.WithCancel(context.Background())
	defer cancelCalls()
	calls := newInflight()
	hs := newHTTPServer(calls.wrap(h), defaultLimits)
	hs.BaseContext = func(net.Listener) context.Context { return base }
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	shutdownDone := make(chan error, 1)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), drain)
		defer cancel()
		shutdownDone <- hs.Shutdown(shutdown)
	}()
	serveErr := hs.Serve(ln)
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	// A server that failed to listen is shut down too, so the wait ends.
	stop()
	if err := <-shutdownDone; err != nil {
		slog.Error("shutdown: calls still running after the drain are cancelled", "drain", drain, "error", err)
	}
	// Shutdown returned once the requests in flight were done, or when
	// the drain ended: then their contexts are cancelled, and the calls
	// still running are waited for; none starts after.
	cancelCalls()
	calls.closeAndWait()
	_ = hs.Close()
	return serveErr
}

// inflight counts the handlers running; once closed, it refuses new ones.
type inflight struct {
	mu     sync.Mutex
	idle   *sync.Cond
	n      int
	closed bool
}

func newInflight() *inflight {
	f := &inflight{}
	f.idle = sync.NewCond(&f.mu)
	return f
}

// wrap runs h for each request while f is open; a request that arrives
// after closeAndWait began is answered 503.
func (f *inflight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			w.Header().Set("Connection", "close")
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		f.n++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.n--
			if f.n == 0 {
				f.idle.Broadcast()
			}
			f.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// closeAndWait refuses new requests and returns once none is running.
func (f *inflight) closeAndWait() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for f.n > 0 {
		f.idle.Wait()
	}
}

// limits bound what one client can hold: the time to send the headers and
// the whole body (a client trickling a body is cut off), how long an idle
// keep-alive connection stays open, the header size, and the connections
// served at once (more wait in the listen queue instead of exhausting file
// descriptors). Responses have no write deadline: a chat stream lasts as long
// as the model streams.
type limits struct {
	ReadHeader, Read, Idle   time.Duration
	MaxHeaderBytes, MaxConns int
}

var defaultLimits = limits{ReadHeader: 5 * time.Second, Read: 30 * time.Second, Idle: 120 * time.Second,
	MaxHeaderBytes: 64 << 10, MaxConns: 1024}

func newHTTPServer(h http.Handler, l limits) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: l.ReadHeader, ReadTimeout: l.Read, IdleTimeout: l.Idle,
		MaxHeaderBytes: l.MaxHeaderBytes}
}

// DemoDeps returns the service's model clients and tools: an echo model
// served under both plan models and two in-memory tools.
func DemoDeps(logger *slog.Logger) runtime.Deps {
	orders := map[string]float64{"A1": 42.5, "B7": 250}
	return runtime.Deps{
		Logger: logger,
		Models: map[string]runtime.ModelClient{
			"primary": EchoModel{Name: "primary"},
			"backup":  EchoModel{Name: "backup"},
		},
		Tools: map[string]runtime.ToolFunc{
			"lookup_order": func(_ context.Context, c *runtime.ToolCall) (any, error) {
				id, _ := c.Args["order_id"].(string)
				total, ok := orders[id]
				if !ok {
					return nil, &runtime.CallError{Kind: runtime.KindPermanent, Status: 404, Message: "no order " + id}
				}
				return map[string]any{"order_id": id, "total": total}, nil
			},
			"refund": func(_ context.Context, c *runtime.ToolCall) (any, error) {
				// A real refund passes the key to the payment provider so
				// that a retry cannot pay twice.
				return map[string]any{"refunded": c.Args["amount"], "idempotency_key": c.IdempotencyKey()}, nil
			},
		},
	}
}

// EchoModel streams the last user message back word by word and reports
// estimated usage. A message containing "fail <name>" makes the model of that
// name fail with a transient error, which shows fallback at work.
type EchoModel struct {
	Name string
}

// Stream implements runtime.ModelClient.
func (m EchoModel) Stream(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	var last string
	for _, msg := range req.Messages {
		if msg.Role == "user" {
			last = msg.Content
		}
	}
	if strings.Contains(last, "fail "+m.Name) {
		return &runtime.CallError{Kind: runtime.KindTransient, Status: 503, Message: m.Name + " is unavailable"}
	}
	words := strings.Fields(last)
	for i, w := range words {
		if err := ctx.Err(); err != nil {
			return err
		}
		d := runtime.Delta{Text: w}
		if i > 0 {
			d.Text = " " + w
		}
		if i == len(words)-1 {
			d.Usage = runtime.Usage{InputTokens: runtime.EstimateMessages(req.Messages), OutputTokens: runtime.EstimateTokens(last)}
		}
		if !yield(d) {
			return nil
		}
	}
	return nil
}

// errorBody is the JSON of a failed call.
type errorBody struct {
	Kind    string `json:"kind"`
	Layer   string `json:"layer,omitempty"`
	Message string `json:"message"`
}

func errorOf(err error) errorBody {
	return errorBody{Kind: runtime.KindOf(err), Layer: runtime.LayerOf(err), Message: err.Error()}
}

// writeError answers a failed call: the status serve.StatusOf maps it to,
// with Retry-After in whole seconds, rounded up, and {"error"} plus extra.
// When the client went away, only the status 499 is recorded.
func writeError(w http.ResponseWriter, r *http.Request, err error, extra map[string]any) {
	if r.Context().Err() != nil {
		w.WriteHeader(serve.StatusClientClosedRequest)
		return
	}
	status, retryAfter := serve.StatusOf(err)
	serve.SetRetryAfter(w.Header(), retryAfter)
	body := map[string]any{"error": errorOf(err)}
	for k, v := range extra {
		body[k] = v
	}
	writeJSON(w, status, body)
}
