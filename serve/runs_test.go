package serve

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runProbe is a layer keeping a value per run, as a meter keeps a ledger.
// onEnd, when set, is called as EndRun begins, and the func it returns once
// the run's value is dropped.
type runProbe struct {
	mu    sync.Mutex
	state map[string]int
	onEnd func(run string) func()
}

var probes struct {
	mu   sync.Mutex
	last *runProbe
}

func init() {
	runtime.Register(runtime.Module{
		ID:     "serve_test_run_probe",
		Stages: []plan.Stage{plan.StageTool},
		Doc:    "test layer keeping state per run",
		New: func() runtime.Middleware {
			p := &runProbe{state: map[string]int{}}
			probes.mu.Lock()
			probes.last = p
			probes.mu.Unlock()
			return p
		},
	})
}

func (p *runProbe) WrapTool(next runtime.ToolHandler) runtime.ToolHandler { return next }

func (p *runProbe) set(run string, v int) {
	p.mu.Lock()
	p.state[run] = v
	p.mu.Unlock()
}

func (p *runProbe) get(run string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state[run]
}

func (p *runProbe) EndRun(run string) {
	p.mu.Lock()
	h := p.onEnd
	p.mu.Unlock()
	done := func() {}
	if h != nil {
		done = h(run)
	}
	p.mu.Lock()
	delete(p.state, run)
	p.mu.Unlock()
	done()
}

// TestEndingARunExcludesARequestOfIt: the idle sweep and the per-tenant
// bound end a run on the layers while a new request of the same run id
// may arrive; the request waits for the end, so the state it builds (a
// meter's ledger) is not wiped under it.
func TestEndingARunExcludesARequestOfIt(t *testing.T) {
	src := SourceFunc(func(context.Context) (*Loaded, error) {
		return &Loaded{Plan: &plan.Plan{Version: plan.Version, Policy: "p",
			Chains: plan.Chains{Tool: []plan.Layer{{Use: "serve_test_run_probe", Name: "probe"}}}}}, nil
	})
	for _, tc := range []struct {
		name    string
		idle    time.Duration
		maxRuns int
	}{
		{"idle sweep", time.Millisecond, 10000},
		{"tenant bound", time.Hour, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := New(context.Background(), Options{Source: src, WatchInterval: -1, RunIdle: tc.idle, MaxRuns: tc.maxRuns})
			require.NoError(t, err)
			defer srv.Close()
			probes.mu.Lock()
			probe := probes.last
			probes.mu.Unlock()
			g := srv.acquire()
			defer g.release()
			request := func(id string) func() {
				r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
				r.Header.Set(RunHeader, id)
				_, finish, err := srv.withRun(context.Background(), httptest.NewRecorder(), r, g, caller{})
				require.NoError(t, err)
				return finish
			}

			// While run "a" is being ended, a request of "a" arrives and
			// builds its state; it reads that state once the end is over.
			set, release, requestDone, ended := make(chan struct{}), make(chan struct{}), make(chan int), make(chan struct{})
			var once sync.Once
			probe.mu.Lock()
			probe.onEnd = func(run string) func() {
				if run != "a" {
					return func() {}
				}
				started := false
				once.Do(func() {
					started = true
					go func() {
						finish := request("a")
						probe.set("a", 7)
						close(set)
						<-release
						requestDone <- probe.get("a")
						finish()
					}()
					select {
					case <-set:
					case <-time.After(100 * time.Millisecond):
					}
				})
				if !started {
					return func() {}
				}
				return func() { close(ended) }
			}
			probe.mu.Unlock()

			request("a")()
			if tc.maxRuns == 1 {
				request("b")()
			} else {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go srv.sweepRuns(ctx)
			}
			select {
			case <-ended:
			case <-time.After(5 * time.Second):
				t.Fatal("run a was not ended")
			}
			close(release)
			assert.Equal(t, 7, <-requestDone, "the state of a request of run a was wiped while it ran")
		})
	}
}

// TestTheBoundEndsTheOldestRunNotTheNewOne: past a tenant's bound, the run
// idle the longest is ended, not the run just named (which, ended as it
// began, was no longer tracked: its state was never ended again).
func TestTheBoundEndsTheOldestRunNotTheNewOne(t *testing.T) {
	src := SourceFunc(func(context.Context) (*Loaded, error) {
		return &Loaded{Plan: &plan.Plan{Version: plan.Version, Policy: "p"}}, nil
	})
	srv, err := New(context.Background(), Options{Source: src, WatchInterval: -1, MaxRuns: 2})
	require.NoError(t, err)
	defer srv.Close()
	g := srv.acquire()
	defer g.release()
	for _, id := range []string{"a", "b", "c"} {
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		r.Header.Set(RunHeader, id)
		_, finish, err := srv.withRun(context.Background(), httptest.NewRecorder(), r, g, caller{})
		require.NoError(t, err)
		finish()
		time.Sleep(time.Millisecond)
	}
	srv.runs.mu.Lock()
	defer srv.runs.mu.Unlock()
	assert.ElementsMatch(t, []string{"b", "c"}, slices.Collect(maps.Keys(srv.runs.runs)))
}

// TestMemoryTrailIsWarned: an audit layer whose trail is in process memory
// (the default store, undeclared) is named in a warning when the policy is
// loaded: that trail is lost with the process and keeps only the last
// records. A trail in a declared sqlite store is not.
func TestMemoryTrailIsWarned(t *testing.T) {
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		return mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	}, nil))
	t.Cleanup(up.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw
models: m: {}
mcp: servers: up: url: %q
stores: file: {kind: "sqlite", path: "trail.db"}
chains: tool: [{use: "audit", name: "kept"}, {use: "audit", name: "durable", sink: "file"}]
chains: turn: [{use: "audit", name: "turns"}]
`, up.URL))), WatchInterval: -1})
	logs := s.logs.String()
	assert.Contains(t, logs, "audit trail in process memory")
	assert.Contains(t, logs, "layers=[tool:kept]", "each layer named with its chain; the turn chain's, which the gateway never runs, is not")
}

// TestMemoryTrailOfLayersNeverRunIsNotWarned: without mcp servers the
// gateway runs no tool, and it never runs a turn: an audit layer of the
// tool or turn chain writes no record there, whatever its sink, and is
// named by the warnings about layers that never act, not by the one about
// a trail in memory (examples/support loads so).
func TestMemoryTrailOfLayersNeverRunIsNotWarned(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, `package gw
models: m: {}
chains: tool: [{use: "audit", name: "calls"}]
chains: turn: [{use: "audit", name: "turns"}]
`)), WatchInterval: -1})
	logs := s.logs.String()
	assert.NotContains(t, logs, "audit trail in process memory")
	assert.Contains(t, logs, "turn chain not run by the gateway")
	assert.Contains(t, logs, "tool-chain layers that act only on a call that runs")
}

// TestTurnChainIsWarned: the gateway serves model calls and tool calls,
// never an agent turn, so the layers of a turn chain (a guard on the
// user's input, a rate limit on turns) never act on what it serves. They
// are named in a warning when the policy is loaded; a policy without a
// turn chain has none.
func TestTurnChainIsWarned(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, `package gw
models: m: {}
chains: turn: [{use: "guard", name: "no_injection", deny: "input.text.contains('ignore previous')"}, {use: "rate_limit", rate: 5}]
`)), WatchInterval: -1})
	logs := s.logs.String()
	assert.Contains(t, logs, "turn chain not run by the gateway")
	assert.Contains(t, logs, "layers=\"[no_injection rate_limit]\"")

	s = startServer(t, Options{Source: cueSource(writePolicy(t, `package gw
models: m: {}
chains: chat: [{use: "tracing"}]
`)), WatchInterval: -1})
	assert.NotContains(t, s.logs.String(), "turn chain")
}

// TestRunOnlyToolLayersAreWarned: without mcp servers the gateway runs no
// tool: it admits the calls a model proposes, and the client runs them.
// The tool-chain layers that act only on a call that runs (a redact of
// results, an audit, a phase "after" guard) never act; they are named in a
// warning when the policy is loaded. The admission layers (a tool_policy,
// a guard of phase "before") are not.
func TestRunOnlyToolLayersAreWarned(t *testing.T) {
	const chain = `chains: tool: [{use: "tracing"}, {use: "tool_policy", deny: ["wipe"]}, {use: "audit"}, {use: "guard", name: "before", deny: "args.x == 1"}, {use: "guard", name: "after_check", phase: "after", deny: "result == 'x'"}, {use: "redact"}]
`
	s := startServer(t, Options{Source: cueSource(writePolicy(t, `package gw
models: m: {}
tools: {wipe: {}, look: {}}
`+chain)), WatchInterval: -1})
	logs := s.logs.String()
	assert.Contains(t, logs, "tool-chain layers that act only on a call that runs")
	assert.Contains(t, logs, "layers=\"[audit after_check redact]\"")
}

// TestRunScopedRateLimitIsWarned: a request without X-Agentc-Run is a
// run of its own, so a rate_limit of scope "run" gives each such request
// a fresh bucket and holds back no caller that omits the header. It is
// named in a warning when the policy is loaded; one of scope "key" is not.
func TestRunScopedRateLimitIsWarned(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, `package gw
models: m: {}
chains: chat: [{use: "rate_limit", name: "per_run", rate: 5, per: "1m", scope: "run"}, {use: "rate_limit", name: "per_key", rate: 50, per: "1m", scope: "key"}]
`)), WatchInterval: -1})
	logs := s.logs.String()
	assert.Contains(t, logs, "rate limit of scope run")
	assert.Contains(t, logs, "layers=[chat:per_run]")
}

// TestRunScopedToolLimitWithoutMCPIsWarnedOnce: without mcp servers a
// tool-chain rate_limit never acts in the gateway, whatever its scope; it
// is named by the warning about layers that never act, not again by the
// one about scope run.
func TestRunScopedToolLimitWithoutMCPIsWarnedOnce(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, `package gw
models: m: {}
chains: tool: [{use: "rate_limit", name: "calls", rate: 5, per: "1m", scope: "run"}]
`)), WatchInterval: -1})
	logs := s.logs.String()
	assert.NotContains(t, logs, "rate limit of scope run")
	assert.Contains(t, logs, "tool-chain layers that act only on a call that runs")
	assert.Contains(t, logs, "layers=[calls]")
}

// TestRunScopedBudgetAloneIsWarned: a request without X-Agentc-Run is a
// run of its own, so when every budget of a chain is of scope "run" (the
// meter's default) each such request starts with a whole budget and no
// caller that omits the header is held to one. It is named in a warning
// when the policy is loaded; a chain with a budget of scope "key" beside
// it, or a meter without a budget, is not.
func TestRunScopedBudgetAloneIsWarned(t *testing.T) {
	for _, tc := range []struct {
		name, chain string
		warned      bool
	}{
		{"run only", `[{use: "meter", name: "per_run", budget: usd: 2}]`, true},
		{"beside a tenant's", `[{use: "meter", name: "per_run", budget: usd: 2}, {use: "meter", name: "per_key", scope: "key", budget: usd: 50}]`, false},
		{"no budget", `[{use: "meter"}]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, Options{Source: cueSource(writePolicy(t, `package gw
models: m: {usd_per_mtok_in: 1, usd_per_mtok_out: 2}
chains: chat: `+tc.chain+`
`)), WatchInterval: -1})
			logs := s.logs.String()
			if !tc.warned {
				assert.NotContains(t, logs, "budget of scope run")
				return
			}
			assert.Contains(t, logs, "budget of scope run")
			assert.Contains(t, logs, "layers=[chat:per_run]")
		})
	}
}

// TestMemoryTrailOfHostToolsIsWarned: host tools (Options.Tools) run
// through the tool chain as an mcp server's do, so an audit layer of it
// whose trail is in process memory writes its records there, and is
// warned of, without any mcp server.
func TestMemoryTrailOfHostToolsIsWarned(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, `package gw
models: m: {}
tools: lookup: {description: "Look up."}
chains: tool: [{use: "audit", name: "calls"}]
`)), WatchInterval: -1, Tools: map[string]runtime.ToolFunc{
		"lookup": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil },
	}})
	logs := s.logs.String()
	assert.Contains(t, logs, "audit trail in process memory")
	assert.Contains(t, logs, "layers=[tool:calls]")
	assert.NotContains(t, logs, "tool-chain layers that act only on a call that runs")
}

// TestOnlyTheRunOfARequestWithoutOneIsEphemeral: the run the gateway
// gives a request without a run id ends with the request, and no client
// can name it again, so its layers may drop its state in a shared store
// when it ends; a run the client names may go on at another replica.
func TestOnlyTheRunOfARequestWithoutOneIsEphemeral(t *testing.T) {
	src := SourceFunc(func(context.Context) (*Loaded, error) {
		return &Loaded{Plan: &plan.Plan{Version: plan.Version, Policy: "p"}}, nil
	})
	srv, err := New(context.Background(), Options{Source: src, WatchInterval: -1})
	require.NoError(t, err)
	defer srv.Close()
	g := srv.acquire()
	defer g.release()
	for id, ephemeral := range map[string]bool{"": true, "case-9": false} {
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		if id != "" {
			r.Header.Set(RunHeader, id)
		}
		ctx, finish, err := srv.withRun(context.Background(), httptest.NewRecorder(), r, g, caller{})
		require.NoError(t, err)
		assert.Equal(t, ephemeral, runtime.RunOf(ctx).Ephemeral, "run %q", id)
		finish()
	}
}
