package crossproc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// The USD budget scenario: each call reports 1000 input and 100 output
// tokens on "primary" (3 and 15 USD per million).
const (
	usdPerCall = 1000*3/1e6 + 100*15/1e6
	usdCeiling = 0.1
)

// refuseRequest is the call of the usd-refuse scenario: estimated at 100
// output tokens and its messages' input.
var refuseRequest = runtime.ChatRequest{Model: "primary", MaxTokens: 100,
	Messages: []runtime.Message{{Role: "user", Content: "What is the status of order A1234, due on Monday?"}}}

// workerEnv is what a worker reads from its environment.
type workerEnv struct {
	backend, url, prefix, dir, arg string
	start                          time.Time
}

func readEnv() workerEnv {
	ns, _ := strconv.ParseInt(os.Getenv(envStart), 10, 64)
	return workerEnv{backend: os.Getenv(envBackend), url: os.Getenv(envURL), prefix: os.Getenv(envPrefix),
		dir: os.Getenv(envDir), arg: os.Getenv(envArg), start: time.Unix(0, ns)}
}

// sharedPlan returns a plan whose store "shared" is the worker's backend.
func (e workerEnv) sharedPlan(chains plan.Chains) *plan.Plan {
	p := rt.Plan(chains)
	p.Stores = map[string]plan.Store{"shared": {Kind: e.backend, URL: e.url, Prefix: e.prefix}}
	if e.backend == "sqlite" {
		p.Stores = map[string]plan.Store{"shared": {Kind: "sqlite", Path: e.url}}
	}
	p.Tools = map[string]plan.Tool{
		"pay":    {SideEffecting: true},
		"charge": {SideEffecting: true},
		"refund": {SideEffecting: true, RetrySafe: true},
		"lookup": {},
	}
	return p
}

// logExecution appends one line to the executions log: the process and the
// call's idempotency key.
func (e workerEnv) logExecution(c *runtime.ToolCall) error {
	f, err := os.OpenFile(filepath.Join(e.dir, "exec.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY|os.O_SYNC, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%d %s\n", os.Getpid(), c.IdempotencyKey())
	return err
}

var stdout sync.Mutex

func say(format string, args ...any) {
	stdout.Lock()
	fmt.Printf(format+"\n", args...)
	stdout.Unlock()
}

func work(scenario string) error {
	e := readEnv()
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "run-1", Tenant: "acme"})
	var (
		p     *plan.Plan
		tools = map[string]runtime.ToolFunc{}
		deps  runtime.Deps
	)
	switch scenario {
	case "stuck":
		say("started")
		select {} // never ends: found stuck by the test, or its stdin ends
	case "idempotent":
		p = e.sharedPlan(plan.Chains{Tool: []plan.Layer{rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "5s"}`)}})
		tools["pay"] = func(_ context.Context, c *runtime.ToolCall) (any, error) {
			if err := e.logExecution(c); err != nil {
				return nil, err
			}
			time.Sleep(300 * time.Millisecond)
			return map[string]any{"payment": fmt.Sprintf("P-%d-%d", os.Getpid(), time.Now().UnixNano())}, nil
		}
	case "hold", "hold-duplicate":
		p = e.sharedPlan(plan.Chains{Tool: []plan.Layer{rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "1s"}`)}})
		fn := func(_ context.Context, c *runtime.ToolCall) (any, error) {
			if err := e.logExecution(c); err != nil {
				return nil, err
			}
			if scenario == "hold" {
				say("started")
				select {} // killed while it holds the lease
			}
			return "done", nil
		}
		tools["charge"], tools["refund"] = fn, fn
	case "memoize", "memoize-hold", "memoize-waiter":
		p = e.sharedPlan(plan.Chains{Tool: []plan.Layer{rt.Layer("memoize",
			`{"store": "shared", "scope": "global", "single_flight": true, "lease_ttl": "1s"}`)}})
		tools["lookup"] = func(_ context.Context, c *runtime.ToolCall) (any, error) {
			if err := e.logExecution(c); err != nil {
				return nil, err
			}
			switch scenario {
			case "memoize-hold":
				say("started")
				select {} // killed while it leads
			case "memoize":
				time.Sleep(300 * time.Millisecond)
			}
			return map[string]any{"answer": fmt.Sprintf("A-%d-%d", os.Getpid(), time.Now().UnixNano())}, nil
		}
	case "rate":
		p = e.sharedPlan(plan.Chains{Tool: []plan.Layer{rt.Layer("rate_limit", `{"rate": 40, "per": "1s", "burst": 10, "mode": "reject", "store": "shared"}`)}})
		tools["lookup"] = func(context.Context, *runtime.ToolCall) (any, error) { return 1, nil }
	case "calls-budget":
		p = e.sharedPlan(plan.Chains{Tool: []plan.Layer{rt.Layer("meter", `{"budget": {"calls": 50}, "scope": "global", "store": "shared"}`)}})
		tools["lookup"] = func(_ context.Context, c *runtime.ToolCall) (any, error) {
			if err := e.logExecution(c); err != nil {
				return nil, err
			}
			time.Sleep(5 * time.Millisecond)
			return 1, nil
		}
	case "usd-budget":
		p = e.sharedPlan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", fmt.Sprintf(`{"budget": {"usd": %g}, "scope": "global", "store": "shared"}`, usdCeiling))}})
		deps.Models = map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"x"},
			Usage: runtime.Usage{InputTokens: 1000, OutputTokens: 100}, Delay: 5 * time.Millisecond})}
	case "usd-refuse":
		// Each call reports its estimate as usage, and arg more output
		// tokens than its max_tokens allowed.
		extra, err := strconv.ParseInt(e.arg, 10, 64)
		if err != nil {
			return err
		}
		p = e.sharedPlan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter",
			fmt.Sprintf(`{"budget": {"usd": %g}, "scope": "global", "store": "shared", "on_cross": "refuse"}`, usdCeiling))}})
		deps.Models = map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"x"},
			Usage: runtime.Usage{InputTokens: runtime.EstimateMessages(refuseRequest.Messages), OutputTokens: int64(refuseRequest.MaxTokens) + extra},
			Delay: 5 * time.Millisecond})}
	case "audit":
		return workAudit(e)
	case "agent":
		return workAgent(e)
	default:
		return fmt.Errorf("unknown scenario %q", scenario)
	}
	deps.Tools = tools
	pl, err := runtime.Build(context.Background(), p, deps)
	if err != nil {
		return err
	}
	defer pl.Close()
	time.Sleep(time.Until(e.start))

	switch scenario {
	case "idempotent":
		sayResults(ctx, pl, 64, runtime.ToolRequest{Name: "pay", Args: map[string]any{"order_id": "A1"}})
	case "memoize":
		sayResults(ctx, pl, 16, runtime.ToolRequest{Name: "lookup", Args: map[string]any{"q": "x"}})
	case "memoize-hold", "memoize-waiter":
		sayResults(ctx, pl, 1, runtime.ToolRequest{Name: "lookup", Args: map[string]any{"q": "x"}})
	case "hold", "hold-duplicate":
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: e.arg, Args: map[string]any{"order_id": "A1"}})
		switch {
		case err == nil:
			say("ok")
		case runtime.Classify(err) == runtime.ClassInDoubt:
			say("in_doubt")
		default:
			say("error: %v", err)
		}
	case "rate":
		window, err := time.ParseDuration(e.arg)
		if err != nil {
			return err
		}
		var n, first, last atomic.Int64
		first.Store(1<<63 - 1)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for time.Since(e.start) < window {
					t0 := time.Now()
					_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "lookup"})
					t1 := time.Now()
					if err == nil {
						n.Add(1)
						for v := first.Load(); t0.UnixNano() < v && !first.CompareAndSwap(v, t0.UnixNano()); v = first.Load() {
						}
						for v := last.Load(); t1.UnixNano() > v && !last.CompareAndSwap(v, t1.UnixNano()); v = last.Load() {
						}
					} else if runtime.KindOf(err) != "rate_limited" {
						say("error: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		say("%d %d %d", n.Load(), first.Load(), last.Load())
	case "usd-refuse":
		var (
			wg sync.WaitGroup
			n  atomic.Int64
		)
		for range 8 {
			wg.Go(func() {
				for {
					_, _, err := rt.Collect(ctx, pl, refuseRequest, 0)
					var be *runtime.BudgetError
					if errors.As(err, &be) {
						return
					}
					if err != nil {
						say("error: %v", err)
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		say("%d", n.Load())
	case "calls-budget", "usd-budget":
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for {
					var err error
					if scenario == "calls-budget" {
						_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "lookup"})
					} else {
						_, _, err = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
					}
					var be *runtime.BudgetError
					if errors.As(err, &be) {
						return
					}
					if err != nil {
						say("error: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	return nil
}

// sayResults makes n concurrent calls of req and reports each one's result
// as JSON (or its error).
func sayResults(ctx context.Context, pl *runtime.Pipeline, n int, req runtime.ToolRequest) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r, err := pl.Tool(ctx, req)
			if err != nil {
				say("error: %v", err)
				return
			}
			b, _ := json.Marshal(r.Value)
			say("%s", b)
		})
	}
	wg.Wait()
}

// workAudit makes audited calls one after another and reports each one the
// pipeline acknowledged, until it is killed.
func workAudit(e workerEnv) error {
	p := e.sharedPlan(plan.Chains{Tool: []plan.Layer{rt.Layer("audit", `{"sink": "shared"}`)}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{
		"pay": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil },
	}})
	if err != nil {
		return err
	}
	defer pl.Close()
	for i := 0; ; i++ {
		run := fmt.Sprintf("%s-%d", e.arg, i)
		if _, err := pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: run}),
			runtime.ToolRequest{Name: "pay", Args: map[string]any{"n": i}}); err != nil {
			return err
		}
		say("ack %s", run)
	}
}
