package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// lifecycle records the lifecycle calls of test middlewares.
type lifecycle struct {
	mu     sync.Mutex
	events []string
}

func (l *lifecycle) add(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *lifecycle) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

var events = &lifecycle{}

// probe is a test middleware that records its lifecycle and the order in
// which calls pass through it.
type probe struct {
	Tag          string `json:"tag"`
	FailProvide  bool   `json:"fail_provision"`
	FailValidate bool   `json:"fail_validate"`
	PanicProvide bool   `json:"panic_provision"`
	name         string
}

func (p *probe) Provision(b *runtime.BuildContext) error {
	p.name = b.Name()
	events.add("provision " + p.name)
	if p.FailProvide {
		return errors.New("provision failed on purpose")
	}
	if p.PanicProvide {
		panic("provision panicked on purpose")
	}
	return nil
}

func (p *probe) Validate() error {
	events.add("validate " + p.name)
	if p.FailValidate {
		return errors.New("invalid on purpose")
	}
	return nil
}

func (p *probe) Cleanup() error {
	events.add("cleanup " + p.name)
	return nil
}

func (p *probe) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		events.add("tool " + p.name)
		return next(ctx, c)
	}
}

func (p *probe) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		events.add("chat " + p.name)
		return next(ctx, c, yield)
	}
}

// cache is a test middleware that answers every chat call itself and marks
// it cached.
type cache struct{}

func (cache) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		c.Meta.Cached = true
		c.Served = c.Request.Model
		c.Usage = runtime.Usage{InputTokens: 1000, OutputTokens: 1000}
		c.Emit(yield, runtime.Delta{Text: "cached"})
		return nil
	}
}

// pass is a pass-through tool middleware.
type pass struct{}

func (pass) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) { return next(ctx, c) }
}

func init() {
	runtime.Register(runtime.Module{
		ID: "test.probe", Stages: []plan.Stage{plan.StageChat, plan.StageTool},
		ConfigSchema: "tag?: string", New: func() runtime.Middleware { return &probe{} },
	})
	runtime.Register(runtime.Module{
		ID: "test.cache", Stages: []plan.Stage{plan.StageChat}, Traits: []runtime.Trait{runtime.TraitCaches},
		New: func() runtime.Middleware { return cache{} },
	})
	runtime.Register(runtime.Module{
		ID: "test.pass", Stages: []plan.Stage{plan.StageTool}, New: func() runtime.Middleware { return pass{} },
	})
}

func TestRegisterRejectsMistakes(t *testing.T) {
	tests := []struct {
		name string
		m    runtime.Module
		want string
	}{
		{"duplicate", runtime.Module{ID: "retry", Stages: []plan.Stage{"tool"}, New: func() runtime.Middleware { return pass{} }}, "already registered"},
		{"bad id", runtime.Module{ID: "Bad-Id", Stages: []plan.Stage{"tool"}, New: func() runtime.Middleware { return pass{} }}, "invalid module id"},
		{"no new", runtime.Module{ID: "test.nonew", Stages: []plan.Stage{"tool"}}, "New is nil"},
		{"no stages", runtime.Module{ID: "test.nostages", New: func() runtime.Middleware { return pass{} }}, "no stages"},
		{"missing wrapper", runtime.Module{ID: "test.nochat", Stages: []plan.Stage{"chat"}, New: func() runtime.Middleware { return pass{} }}, "does not implement the chat stage wrapper"},
		{"unknown stage", runtime.Module{ID: "test.badstage", Stages: []plan.Stage{"admit"}, New: func() runtime.Middleware { return pass{} }}, `unknown stage "admit"`},
		{"incomplete constraint", runtime.Module{ID: "test.badconstraint", Stages: []plan.Stage{"tool"}, New: func() runtime.Middleware { return pass{} },
			Constraints: []runtime.Constraint{{ID: "x", Outer: "a"}}}, `constraint "x" needs id, outer, inner and why`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Panics(t, func() { runtime.Register(tt.m) })
			assert.Contains(t, mustPanicMessage(t, tt.m), tt.want)
		})
	}
}

func mustPanicMessage(t *testing.T, m runtime.Module) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		s, _ := r.(string)
		msg = strings.TrimPrefix(s, "runtime.Register: ")
	}()
	runtime.Register(m)
	return ""
}

func TestModulesListsBuiltins(t *testing.T) {
	var ids []string
	for _, m := range runtime.Modules() {
		ids = append(ids, m.ID)
	}
	for _, id := range []string{"tracing", "retry", "fallback", "hedge", "meter", "rate_limit", "max_tokens", "log", "guard"} {
		assert.Contains(t, ids, id)
	}
	assert.IsIncreasing(t, ids)
	m, ok := runtime.LookupModule("retry")
	require.True(t, ok)
	assert.True(t, m.Supports(plan.StageChat))
	assert.False(t, m.Supports(plan.StageTurn))
	assert.True(t, m.HasTrait(runtime.TraitReinvokes))
	assert.True(t, m.Repeatable)
}

func TestBuildErrorsNameTheLayer(t *testing.T) {
	tests := []struct {
		name   string
		chains plan.Chains
		want   []string
	}{
		{"unknown middleware", plan.Chains{Tool: []plan.Layer{rt.Layer("nope", "")}}, []string{`chains.tool[0] "nope"`, `unknown middleware "nope" (not registered: import github.com/agentc-dev/agentc/builtins/all for agentc's own, or the package of yours that registers it; for a plan of another agentc, build the plan again with the agentc that loads it)`}},
		// A misspelt use of a registered module (a custom one as a
		// builtin) names the one it is near.
		{"misspelt middleware", plan.Chains{Chat: []plan.Layer{rt.Layer("Retry", "")}}, []string{`chains.chat[0] "Retry"`, `unknown middleware "Retry": did you mean "retry"? (not registered: import`}},
		{"wrong stage", plan.Chains{Tool: []plan.Layer{rt.Layer("hedge", `{"models":["primary","backup"]}`)}}, []string{`chains.tool[0] "hedge"`, "does not support the tool stage"}},
		{"unknown field", plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"max_attempt":3}`)}}, []string{`chains.chat[0] "retry"`, `config: unknown field "max_attempt" (a typo, or a plan of another agentc: build the plan again with the agentc that loads it)`}},
		{"bad type", plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"max_attempts":"3"}`)}}, []string{"config"}},
		// encoding/json matches a key to a field regardless of case, and
		// the last of two wins: a reader of the plan sees a ceiling of 1
		// call, the meter would have applied a million.
		{"nested key in another case", plan.Chains{Tool: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":1,"CALLS":1000000},"scope":"run"}`)}},
			[]string{`chains.tool[0] "meter": config: budget: unknown field "CALLS" (keys match the fields exactly: "calls")`}},
		{"key in another case", plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"Max_Attempts":3}`)}}, []string{`config: unknown field "Max_Attempts" (keys match the fields exactly: "max_attempts")`}},
		{"key in a list in another case", plan.Chains{Tool: []plan.Layer{rt.Layer("tool_policy", `{"arg_patterns":[{"arg":"x","pattern":"^a$","Pattern":".*"}]}`)}},
			[]string{`config: arg_patterns[0]: unknown field "Pattern"`}},
		{"bad duration", plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"max_delay":"soon"}`)}},
			[]string{`chains.chat[0] "retry": config: max_delay: time: invalid duration "soon"`}},
		{"nested bad duration", plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"breaker":{"cooldown":"5 parsecs"}}`)}},
			[]string{`chains.chat[0] "retry": config: breaker.cooldown: time: unknown unit " parsecs" in duration "5 parsecs"`}},
		{"optional bad duration", plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"attempt_timeout":"-1s"}`)}},
			[]string{`chains.chat[0] "retry": config: attempt_timeout: "-1s": negative duration`}},
		{"duration of another kind", plan.Chains{Chat: []plan.Layer{rt.Layer("judge", `{"model":"m","timeout":5}`)}},
			[]string{`chains.chat[0] "judge": config: timeout: 5 is not a duration string such as "30s"`}},
		{"nested unknown field", plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"breaker":{"limit":3}}`)}},
			[]string{`chains.chat[0] "retry": config: breaker: unknown field "limit" (a typo, or a plan of another agentc`}},
		{"validate", plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"max_attempts":0}`)}}, []string{"validate", "max_attempts must be at least 1"}},
		{"fallback without models", plan.Chains{Chat: []plan.Layer{rt.Layer("fallback", `{}`)}}, []string{"models must name at least one model"}},
		{"guard without predicate", plan.Chains{Tool: []plan.Layer{rt.Layer("guard", `{}`)}}, []string{"exactly one of deny and require"}},
		{"guard bad cel", plan.Chains{Tool: []plan.Layer{rt.Layer("guard", `{"deny":"args.amount >"}`)}}, []string{`chains.tool[0] "guard"`, "predicate deny"}},
		{"second layer", plan.Chains{Tool: []plan.Layer{rt.Layer("log", ""), rt.Named("later", rt.Layer("rate_limit", `{"rate":1,"mode":"sometimes"}`))}}, []string{`chains.tool[1] "later"`, "mode must be"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runtime.Build(context.Background(), rt.Plan(tt.chains), runtime.Deps{})
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestBuildLifecycleAndCleanupOfPartialProvision(t *testing.T) {
	events.events = nil
	p := rt.Plan(plan.Chains{
		Chat: []plan.Layer{rt.Named("c0", rt.Layer("test.probe", `{}`))},
		Tool: []plan.Layer{
			rt.Named("t0", rt.Layer("test.probe", `{"tag":"a"}`)),
			rt.Named("t1", rt.Layer("test.probe", `{"fail_provision":true}`)),
			rt.Named("t2", rt.Layer("test.probe", `{}`)),
		},
	})
	_, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.ErrorContains(t, err, "provision failed on purpose")
	assert.Equal(t, []string{
		"provision c0", "validate c0",
		"provision t0", "validate t0",
		"provision t1",
		"cleanup t1", "cleanup t0", "cleanup c0",
	}, events.get())
}

// TestBuildCleansUpOnPanicAndCancellation: a Provision that panics still
// gets every instance created so far cleaned up before the panic goes on,
// and a Build whose context ended provisions nothing more.
func TestBuildCleansUpOnPanicAndCancellation(t *testing.T) {
	events.events = nil
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Named("t0", rt.Layer("test.probe", `{}`)),
		rt.Named("t1", rt.Layer("test.probe", `{"panic_provision":true}`)),
		rt.Named("t2", rt.Layer("test.probe", `{}`)),
	}})
	assert.PanicsWithValue(t, "provision panicked on purpose", func() {
		_, _ = runtime.Build(context.Background(), p, runtime.Deps{})
	})
	assert.Equal(t, []string{"provision t0", "validate t0", "provision t1", "cleanup t1", "cleanup t0"}, events.get())

	events.events = nil
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := runtime.Build(ctx, rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("t0", rt.Layer("test.probe", `{}`))}}), runtime.Deps{})
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), `chains.tool[0] "t0"`)
	assert.Empty(t, events.get())
}

// TestFailingWhenIsLoggedOncePerLayer: a when predicate that cannot be
// evaluated applies the layer and is logged once, with the layer named once.
func TestFailingWhenIsLoggedOncePerLayer(t *testing.T) {
	var logs rt.LogBuffer
	l := rt.Named("big", rt.Layer("test.pass", ""))
	l.When = &plan.Predicate{Stage: plan.StageTool, Source: "args.size > 10.0"}
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{l}}), runtime.Deps{
		Tools:  map[string]runtime.ToolFunc{"search": tool.Func()},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	for range 3 {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "search", Args: map[string]any{}})
		require.NoError(t, err)
	}
	out := logs.String()
	assert.Equal(t, 1, strings.Count(out, "when predicate failed"), out)
	assert.Equal(t, 1, strings.Count(out, "layer=big"), out)
}

func TestChainOrderAndClose(t *testing.T) {
	events.events = nil
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Named("outer", rt.Layer("test.probe", "")),
		rt.Named("middle", rt.Layer("test.probe", "")),
		rt.Named("inner", rt.Layer("test.probe", "")),
	}})
	tool := rt.NewTool(rt.ToolResult{Value: "done"})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	events.events = nil
	res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	assert.Equal(t, "done", res.Value)
	assert.Equal(t, 1, res.Attempts)
	assert.Equal(t, []string{"tool outer", "tool middle", "tool inner"}, events.get())

	layers := pl.Layers(plan.StageTool)
	require.Len(t, layers, 3)
	assert.Equal(t, "outer", layers[0].Name)
	assert.Equal(t, "test.probe", layers[2].Use)

	events.events = nil
	require.NoError(t, pl.Close())
	require.NoError(t, pl.Close())
	assert.Equal(t, []string{"cleanup inner", "cleanup middle", "cleanup outer"}, events.get())
}

// TestPredicateStageMustMatchItsUse: a predicate compiled for another stage
// than the one it is evaluated in would fail on every call, and a `when`
// cannot look at a response that does not exist yet; Build rejects both and
// names the layer.
func TestPredicateStageMustMatchItsUse(t *testing.T) {
	withWhen := func(l plan.Layer, w *plan.Predicate) plan.Layer {
		l.When = w
		return l
	}
	withPredicate := func(l plan.Layer, key string, pr *plan.Predicate) plan.Layer {
		l.Predicates = map[string]*plan.Predicate{key: pr}
		return l
	}
	tests := []struct {
		name    string
		chains  plan.Chains
		admit   *plan.Predicate
		wantErr []string
	}{
		{name: "when of chat on a tool layer",
			chains:  plan.Chains{Tool: []plan.Layer{withWhen(rt.Layer("retry", ""), &plan.Predicate{Stage: plan.StageChat, Source: "request.model == 'x'"})}},
			wantErr: []string{`chains.tool[0] "retry"`, "when", `predicate of stage "chat" used in the tool stage`}},
		{name: "when of tool on a chat layer",
			chains:  plan.Chains{Chat: []plan.Layer{withWhen(rt.Layer("retry", ""), &plan.Predicate{Stage: plan.StageTool, Source: "args.x == 1"})}},
			wantErr: []string{`chains.chat[0] "retry"`, `predicate of stage "tool" used in the chat stage`}},
		{name: "when after the call",
			chains:  plan.Chains{Tool: []plan.Layer{withWhen(rt.Layer("retry", ""), &plan.Predicate{Stage: plan.StageTool, Phase: "after", Source: "result == 1"})}},
			wantErr: []string{`chains.tool[0] "retry"`, `when: phase "after"`}},
		{name: "guard predicate of chat on a tool layer",
			chains: plan.Chains{Tool: []plan.Layer{withPredicate(rt.Layer("guard", `{"deny":"true","message":"m"}`), "deny",
				&plan.Predicate{Stage: plan.StageChat, Source: "request.model == 'm'"})}},
			wantErr: []string{`chains.tool[0] "guard"`, "predicate deny", `predicate of stage "chat" used in the tool stage`}},
		{name: "admit of tool",
			admit:   &plan.Predicate{Stage: plan.StageTool, Source: "args.x == 1"},
			wantErr: []string{"admit", `predicate of stage "tool" used in the admit stage`}},
		{name: "matching stages",
			chains: plan.Chains{
				Tool: []plan.Layer{withWhen(rt.Layer("retry", ""), &plan.Predicate{Stage: plan.StageTool, Source: "args.x == 1"})},
				Chat: []plan.Layer{withWhen(rt.Layer("retry", ""), &plan.Predicate{Stage: plan.StageChat, Phase: "before", Source: "request.model == 'x'"})},
			},
			admit: &plan.Predicate{Stage: plan.StageAdmit, Source: "item.score > 0.5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rt.Plan(tt.chains)
			p.Admit = tt.admit
			pl, err := runtime.Build(context.Background(), p, runtime.Deps{})
			if tt.wantErr == nil {
				require.NoError(t, err)
				assert.NoError(t, pl.Close())
				return
			}
			require.Error(t, err)
			for _, w := range tt.wantErr {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestToolsAndWhenScopeALayer(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		func() plan.Layer {
			l := rt.Layer("guard", `{"deny":"true","message":"no refunds"}`)
			l.Tools = []string{"refund"}
			return l
		}(),
		func() plan.Layer {
			l := rt.Named("big", rt.Layer("guard", `{"deny":"true","message":"too big"}`))
			l.When = &plan.Predicate{Stage: plan.StageTool, Source: "args.size > 10.0"}
			return l
		}(),
	}})
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	deps := runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func(), "search": tool.Func()}}
	pl, err := runtime.Build(context.Background(), p, deps)
	require.NoError(t, err)
	tests := []struct {
		name      string
		req       runtime.ToolRequest
		wantLayer string
	}{
		{"scoped tool blocked", runtime.ToolRequest{Name: "refund", Args: map[string]any{"size": 1.0}}, "guard"},
		{"other tool passes", runtime.ToolRequest{Name: "search", Args: map[string]any{"size": 1.0}}, ""},
		{"when true applies", runtime.ToolRequest{Name: "search", Args: map[string]any{"size": 20.0}}, "big"},
		{"when error applies the layer", runtime.ToolRequest{Name: "search", Args: map[string]any{}}, "big"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pl.Tool(context.Background(), tt.req)
			if tt.wantLayer == "" {
				assert.NoError(t, err)
				return
			}
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, tt.wantLayer, b.Layer)
		})
	}
}

func TestUnregisteredToolAndModelFailPermanently(t *testing.T) {
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{}), runtime.Deps{})
	require.NoError(t, err)
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "ghost"})
	require.ErrorContains(t, err, `tool "ghost" is not registered`)
	assert.False(t, runtime.IsTransient(err))
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "ghost"})
	require.ErrorContains(t, err, `model "ghost" is not registered`)
	assert.False(t, runtime.IsTransient(err))
}

func TestIdempotencyKeyIsStablePerLogicalCall(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`)}})
	// pay passes its idempotency key downstream: a retry may run it again.
	p.Tools = map[string]plan.Tool{"pay": {SideEffecting: true, RetrySafe: true}}
	tool := rt.NewTool(rt.ToolResult{Err: rt.Transient("flaky")}, rt.ToolResult{Err: rt.Transient("flaky")}, rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"pay": tool.Func()}})
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	args := map[string]any{"b": 2.0, "a": "x"}
	res, err := pl.Tool(ctx, runtime.ToolRequest{Name: "pay", Args: args})
	require.NoError(t, err)
	assert.Equal(t, 3, res.Attempts)
	keys := tool.Keys()
	require.Len(t, keys, 3)
	assert.Equal(t, keys[0], keys[1])
	assert.Equal(t, keys[0], keys[2])

	// The same logical call (same run, tool, canonical args) has the same
	// key; another run or other args do not.
	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "pay", Args: map[string]any{"a": "x", "b": 2.0}})
	require.NoError(t, err)
	_, err = pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: "r2"}), runtime.ToolRequest{Name: "pay", Args: args})
	require.NoError(t, err)
	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "pay", Args: args, IdempotencyKey: "job-7"})
	require.NoError(t, err)
	keys = tool.Keys()
	assert.Equal(t, keys[0], keys[3])
	assert.NotEqual(t, keys[0], keys[4])
	assert.Equal(t, "job-7", keys[5])
}

// TestStatusNamesEachClass: Status names an outcome as its class does,
// but for a failure, which it calls "failed" (as after-phase predicates
// read a turn's status).
func TestStatusNamesEachClass(t *testing.T) {
	for _, tt := range []struct {
		err           error
		class, status string
	}{
		{nil, "ok", "ok"},
		{&runtime.BlockedError{Layer: "g", Message: "no"}, "blocked", "blocked"},
		{&runtime.BudgetError{Layer: "m", Resource: "usd", Spent: 2, Limit: 2}, "budget", "budget"},
		{runtime.ErrOutcomeUnrecorded, "in_doubt", "in_doubt"},
		{errors.New("boom"), "failure", "failed"},
	} {
		assert.Equal(t, tt.class, runtime.Classify(tt.err).String(), "%v", tt.err)
		assert.Equal(t, tt.status, runtime.Status(tt.err), "%v", tt.err)
	}
}

func TestClassify(t *testing.T) {
	blocked := &runtime.BlockedError{Layer: "g", Message: "no"}
	budget := &runtime.BudgetError{Layer: "m", Resource: "usd", Spent: 2, Limit: 2}
	tests := []struct {
		name      string
		err       error
		class     runtime.Class
		final     bool
		transient bool
		kind      string
	}{
		// No error is no failure: KindOf(nil) named one, "failure", in a
		// host's log line of a call that went through.
		{"nil", nil, runtime.ClassOK, false, false, ""},
		{"blocked", blocked, runtime.ClassBlocked, true, false, "blocked"},
		{"wrapped blocked", errors.Join(errors.New("x"), blocked), runtime.ClassBlocked, true, false, "blocked"},
		{"budget", budget, runtime.ClassBudget, true, false, "budget"},
		// A call that ran but whose audit outcome was not written: its effect
		// may stand, so a worker must not redeliver it.
		{"outcome unrecorded", &runtime.CallError{Kind: runtime.KindPermanent, Layer: "audit", Message: "audit outcome not written",
			Err: errors.Join(runtime.ErrOutcomeUnrecorded, errors.New("disk full"))}, runtime.ClassInDoubt, true, false, "in_doubt"},
		// A call that ran but whose record was refused by a layer (a
		// checkpoint whose run another process saved since): the refusal
		// is why the outcome was not recorded, not the call's own, so the
		// call is in doubt, not blocked (which says it did not run).
		{"outcome unrecorded for a refusal", &runtime.CallError{Kind: runtime.KindPermanent, Layer: "runs", Message: "the run is not saved",
			Err: errors.Join(runtime.ErrOutcomeUnrecorded, &runtime.BlockedError{Layer: runtime.LayerCheckpoint, Message: "the run is not saved",
				Err: &runtime.CheckpointConflictError{RunID: "r", Want: 1, Latest: 1}})}, runtime.ClassInDoubt, true, false, "in_doubt"},
		{"outcome unrecorded for a budget", &runtime.CallError{Kind: runtime.KindPermanent, Err: errors.Join(runtime.ErrOutcomeUnrecorded, budget)},
			runtime.ClassInDoubt, true, false, "in_doubt"},
		{"outcome unrecorded beside a block", errors.Join(blocked, &runtime.CallError{Kind: runtime.KindPermanent, Err: runtime.ErrOutcomeUnrecorded}), runtime.ClassBlocked, true, false, "blocked"},
		// A call that failed of its own: its error comes first, as it would
		// with its outcome recorded.
		{"outcome unrecorded after a failure", errors.Join(rt.Transient("503"), &runtime.CallError{Kind: runtime.KindPermanent, Err: runtime.ErrOutcomeUnrecorded}), runtime.ClassFailure, false, true, "transient"},
		{"outcome unrecorded alone", runtime.ErrOutcomeUnrecorded, runtime.ClassInDoubt, true, false, "in_doubt"},
		{"transient", rt.Transient("503"), runtime.ClassFailure, false, true, "transient"},
		// A call that ran but whose result is unusable is classified by
		// its error, and never tried again.
		{"ran, unclassified", runtime.Ran(errors.New("connection reset")), runtime.ClassFailure, false, false, "failure"},
		{"ran, blocked", runtime.Ran(blocked), runtime.ClassBlocked, true, false, "blocked"},
		{"permanent", rt.Permanent("400"), runtime.ClassFailure, false, false, "permanent"},
		{"rate limited", &runtime.CallError{Kind: runtime.KindRateLimited}, runtime.ClassFailure, false, true, "rate_limited"},
		{"status 404", &runtime.CallError{Status: 404}, runtime.ClassFailure, false, false, "permanent"},
		{"status 502", &runtime.CallError{Status: 502}, runtime.ClassFailure, false, true, "transient"},
		{"status 429", &runtime.CallError{Status: 429}, runtime.ClassFailure, false, true, "rate_limited"},
		{"status 408", &runtime.CallError{Status: 408}, runtime.ClassFailure, false, true, "timeout"},
		{"status 504", &runtime.CallError{Status: 504}, runtime.ClassFailure, false, true, "timeout"},
		{"kind wins over status", &runtime.CallError{Kind: runtime.KindPermanent, Status: 503}, runtime.ClassFailure, false, false, "permanent"},
		{"unclassified wrapping canceled", &runtime.CallError{Message: "wrapped", Err: context.Canceled}, runtime.ClassFailure, false, false, "canceled"},
		{"unclassified wrapping a 404", &runtime.CallError{Message: "wrapped", Err: statusErr(404)}, runtime.ClassFailure, false, false, "permanent"},
		{"unclassified wrapping a 503", &runtime.CallError{Err: statusErr(503)}, runtime.ClassFailure, false, true, "transient"},
		{"unclassified wrapping nothing", &runtime.CallError{Message: "boom"}, runtime.ClassFailure, false, true, "failure"},
		{"status code error", statusErr(429), runtime.ClassFailure, false, true, "rate_limited"},
		{"breaker open", &runtime.BreakerOpenError{Layer: "retry", Key: "m"}, runtime.ClassFailure, false, false, "breaker_open"},
		{"canceled", context.Canceled, runtime.ClassFailure, false, false, "canceled"},
		{"deadline", context.DeadlineExceeded, runtime.ClassFailure, false, true, "timeout"},
		{"unclassified", errors.New("boom"), runtime.ClassFailure, false, true, "failure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := runtime.Classify(tt.err)
			assert.Equal(t, tt.class, c)
			assert.Equal(t, tt.final, c.Final())
			assert.Equal(t, tt.transient, runtime.IsTransient(tt.err))
			assert.Equal(t, tt.kind, runtime.KindOf(tt.err))
			var ce *runtime.CallError
			if errors.As(tt.err, &ce) {
				assert.Equal(t, tt.transient, ce.Retryable(), "Retryable agrees with IsTransient")
				assert.NotEmpty(t, ce.Error())
			}
		})
	}
	assert.Equal(t, "404 Not Found", (&runtime.CallError{Status: 404}).Error())
	assert.Equal(t, "rate_limited", (&runtime.CallError{Kind: runtime.KindRateLimited, Status: 429}).Error())
	assert.Equal(t, "blocked", runtime.ClassBlocked.String())
	assert.Equal(t, "g", runtime.LayerOf(blocked))
	assert.Equal(t, "blocked by g: no", blocked.Error())
	var b *runtime.BlockedError
	assert.True(t, errors.As(errors.Join(blocked), &b))
}

// statusErr is a client error that carries an HTTP status.
type statusErr int

func (e statusErr) Error() string   { return fmt.Sprintf("http %d", int(e)) }
func (e statusErr) StatusCode() int { return int(e) }

// TestRuntimeDoesNotLinkCUE enforces the one-way data flow: the runtime,
// the builtins and the providers (what a service that loads a compiled plan
// imports, docs/embedding.md) never import CUE, the DSL or the compiler.
func TestRuntimeDoesNotLinkCUE(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	cmd := exec.Command("go", "list", "-deps",
		"github.com/agentc-dev/agentc/runtime/...", "github.com/agentc-dev/agentc/builtins/all",
		"github.com/agentc-dev/agentc/providers/...", "github.com/agentc-dev/agentc/examples/service")
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/agentc-dev/agentc/runtime")
	for _, d := range deps {
		for _, banned := range []string{"cuelang.org/go", "github.com/agentc-dev/agentc/dsl", "github.com/agentc-dev/agentc/compiler"} {
			assert.False(t, d == banned || strings.HasPrefix(d, banned+"/"), "runtime links %s", d)
		}
	}
}

func TestDurationConfig(t *testing.T) {
	var d runtime.Duration
	require.NoError(t, json.Unmarshal([]byte(`"1m30s"`), &d))
	assert.Equal(t, "1m30s", d.D().String())
	b, err := json.Marshal(d)
	require.NoError(t, err)
	assert.Equal(t, `"1m30s"`, string(b))
	assert.Error(t, json.Unmarshal([]byte(`90`), &d))
	assert.Error(t, json.Unmarshal([]byte(`"-1s"`), &d))
}

func TestWhenOnChatAndTurnLayers(t *testing.T) {
	when := func(l plan.Layer, stage plan.Stage, src string) plan.Layer {
		l.When = &plan.Predicate{Stage: stage, Source: src}
		return l
	}
	p := rt.Plan(plan.Chains{
		Chat: []plan.Layer{when(rt.Layer("max_tokens", `{"limit":1}`), plan.StageChat, "request.model == 'backup'")},
		Turn: []plan.Layer{when(rt.Layer("guard", `{"deny":"true","message":"vip only"}`), plan.StageTurn, "run.agent != 'vip'")},
	})
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model, "backup": model}})
	require.NoError(t, err)

	long := []runtime.Message{{Role: "user", Content: "a long enough message"}}
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary", Messages: long}, 0)
	assert.NoError(t, err, "max_tokens is skipped for primary")
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "backup", Messages: long}, 0)
	assert.ErrorAs(t, err, new(*runtime.BlockedError), "max_tokens applies to backup")

	body := func(context.Context) (string, error) { return "ok", nil }
	_, err = pl.Turn(runtime.WithRun(context.Background(), runtime.Run{ID: "r", Agent: "vip"}), runtime.TurnRequest{Input: "x"}, body)
	assert.NoError(t, err)
	_, err = pl.Turn(runtime.WithRun(context.Background(), runtime.Run{ID: "r", Agent: "bot"}), runtime.TurnRequest{Input: "x"}, body)
	assert.ErrorAs(t, err, new(*runtime.BlockedError))
}

func TestManyToolsAndModels(t *testing.T) {
	tools := map[string]runtime.ToolFunc{}
	models := map[string]runtime.ModelClient{}
	for i := range 12 {
		name := fmt.Sprintf("n%d", i)
		tools[name] = func(context.Context, *runtime.ToolCall) (any, error) { return name, nil }
		models[name] = rt.NewModel(rt.Response{Deltas: []string{name}})
	}
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{}), runtime.Deps{Tools: tools, Models: models})
	require.NoError(t, err)
	for _, name := range []string{"n0", "n7", "n11"} {
		res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: name})
		require.NoError(t, err)
		assert.Equal(t, name, res.Value)
		text, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: name}, 0)
		require.NoError(t, err)
		assert.Equal(t, name, text)
	}
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "n12"})
	assert.ErrorContains(t, err, "not registered")
}

// TestLayerOf: the layer named is the one of the error Classify reports,
// an in-doubt call's included (its checkpoint or idempotent layer).
func TestLayerOf(t *testing.T) {
	blocked := &runtime.BlockedError{Layer: "g", Message: "no"}
	doubt := &runtime.InDoubtError{Layer: "idem", Tool: "refund", IdempotencyKey: "k1"}
	unrecorded := &runtime.CallError{Kind: runtime.KindPermanent, Layer: "audit", Message: "audit outcome not written",
		Err: runtime.ErrOutcomeUnrecorded}
	tests := []struct {
		name  string
		err   error
		layer string
	}{
		{"nil", nil, ""},
		{"blocked", blocked, "g"},
		{"budget", &runtime.BudgetError{Layer: "m", Resource: "usd"}, "m"},
		{"in doubt", doubt, "idem"},
		{"in doubt, wrapped", fmt.Errorf("turn: %w", doubt), "idem"},
		{"in doubt on resume", errors.Join(&runtime.InDoubtError{Layer: runtime.LayerCheckpoint, Tool: "refund"}), runtime.LayerCheckpoint},
		{"in doubt beside a block", errors.Join(blocked, doubt), "idem"},
		{"outcome unrecorded", unrecorded, "audit"},
		{"outcome unrecorded for a refusal", &runtime.CallError{Kind: runtime.KindPermanent, Layer: "runs",
			Err: errors.Join(runtime.ErrOutcomeUnrecorded, &runtime.BlockedError{Layer: runtime.LayerCheckpoint, Message: "the run is not saved"})}, "runs"},
		{"breaker", &runtime.BreakerOpenError{Layer: "retry"}, "retry"},
		{"unnamed", errors.New("boom"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.layer, runtime.LayerOf(tt.err))
		})
	}
}

func TestRan(t *testing.T) {
	assert.NoError(t, runtime.Ran(nil))
	blocked := &runtime.BlockedError{Layer: "g", Message: "no"}
	err := runtime.Ran(blocked)
	assert.ErrorIs(t, err, runtime.ErrRan)
	assert.Equal(t, blocked.Error(), err.Error(), "the message is the error's")
	assert.ErrorAs(t, err, new(*runtime.BlockedError))
	assert.Same(t, err, runtime.Ran(err), "marked once")
	assert.False(t, errors.Is(blocked, runtime.ErrRan))
}

func TestStoreUnavailable(t *testing.T) {
	assert.NoError(t, runtime.StoreUnavailable(nil))
	cause := fmt.Errorf("redis budget reserve: %w", context.DeadlineExceeded)
	err := runtime.StoreUnavailable(cause)
	assert.ErrorIs(t, err, runtime.ErrStoreUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the store's error stays in the chain")
	assert.Equal(t, cause.Error(), err.Error(), "the message is the store's")
	assert.Same(t, err, runtime.StoreUnavailable(err), "marked once")
	wrapped := &runtime.CallError{Layer: "meter", Message: "budget store unavailable; the call did not run", Err: err}
	assert.Equal(t, "store_unavailable", runtime.KindOf(wrapped))
	assert.Equal(t, "meter", runtime.LayerOf(wrapped))
	var se *runtime.StoreError
	require.ErrorAs(t, wrapped, &se, "a gateway finds the store's text to withhold")
	assert.Same(t, cause, se.Err)
	// The caller going away is not the store's failure, but its text is
	// still the store's.
	canceled := fmt.Errorf("redis lease: %w", context.Canceled)
	marked := runtime.StoreUnavailable(canceled)
	assert.NotErrorIs(t, marked, runtime.ErrStoreUnavailable)
	assert.ErrorIs(t, marked, context.Canceled)
	require.ErrorAs(t, marked, &se)
	assert.Equal(t, canceled.Error(), marked.Error())
	assert.Equal(t, "canceled", runtime.KindOf(&runtime.CallError{Layer: "meter", Err: marked}))
	assert.False(t, runtime.DidNotRun(marked))
	// A store's failure after the call ran says nothing of whether it ran.
	failed := runtime.StoreFailed(cause)
	assert.NotErrorIs(t, failed, runtime.ErrStoreUnavailable)
	assert.False(t, runtime.DidNotRun(failed))
	require.ErrorAs(t, failed, &se)
	assert.Same(t, failed, runtime.StoreFailed(failed), "marked once")
	assert.NoError(t, runtime.StoreFailed(nil))
	// A failure a sink marked as keeping the call from running (a host's
	// audit sink) no longer says so once passed on after the call ran.
	refailed := runtime.StoreFailed(runtime.StoreUnavailable(cause))
	assert.NotErrorIs(t, refailed, runtime.ErrStoreUnavailable)
	assert.Equal(t, cause.Error(), refailed.Error())
	require.ErrorAs(t, refailed, &se)
	assert.Same(t, cause, se.Err)
	unrecorded := &runtime.CallError{Layer: "audit", Err: errors.Join(runtime.ErrOutcomeUnrecorded, refailed)}
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(unrecorded))
	assert.Equal(t, "in_doubt", runtime.KindOf(unrecorded))
	assert.False(t, runtime.DidNotRun(unrecorded), "the call ran")
	// An outcome not recorded ran, whatever else its error holds.
	both := &runtime.CallError{Layer: "audit", Err: errors.Join(runtime.ErrOutcomeUnrecorded, runtime.NotRun(runtime.StoreUnavailable(cause)))}
	assert.False(t, runtime.DidNotRun(both), "the call ran")
	// A call refused of its own, whose outcome an audit could not write,
	// did not run.
	refused := errors.Join(runtime.NotRun(&runtime.CallError{Layer: "limit", Kind: runtime.KindRateLimited}),
		&runtime.CallError{Layer: "audit", Err: errors.Join(runtime.ErrOutcomeUnrecorded, refailed)})
	assert.True(t, runtime.DidNotRun(refused))
}

// A dependency set to nil fails Build, naming it, instead of every call it
// would serve: a nil ModelFunc panicked in the first chat call, and a nil
// client stood in for the model's provider.
func TestBuildRefusesNilDeps(t *testing.T) {
	p := rt.Plan(plan.Chains{})
	var nilFunc runtime.ModelFunc
	for name, deps := range map[string]runtime.Deps{
		`Deps.Models["primary"] is nil`: {Models: map[string]runtime.ModelClient{"primary": nilFunc}},
		`Deps.Models["backup"] is nil`:  {Models: map[string]runtime.ModelClient{"primary": rt.NewModel(), "backup": nil}},
		"Deps.Retriever is a nil":       {Retriever: runtime.RetrieverFunc(nil)},
	} {
		pl, err := runtime.Build(context.Background(), p, deps)
		require.Error(t, err, name)
		assert.Nil(t, pl)
		assert.Contains(t, err.Error(), name)
	}
}

// Stream with a nil yield, and a ChatStream that Pipeline.Chat did not
// make, are errors before anything runs, not a nil dereference.
func TestStreamRefusesNilYield(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"hi"}})
	pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	var err error
	require.NotPanics(t, func() { _, err = pl.Stream(context.Background(), req, nil) })
	require.ErrorContains(t, err, "nil yield")
	assert.Zero(t, model.Calls())

	var s runtime.ChatStream
	var errs []error
	require.NotPanics(t, func() {
		for _, err := range s.All() {
			errs = append(errs, err)
		}
	})
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs[0], "not made by Pipeline.Chat")
	assert.Equal(t, errs[0], s.Err())
}

// A call started after Close fails with ErrClosed before anything runs:
// neither the model nor the tool is called, where it used to run against
// closed layers and stores.
func TestCallsAfterCloseFail(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"hi"}})
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	p, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{}), runtime.Deps{
		Models: map[string]runtime.ModelClient{"primary": model}, Tools: map[string]runtime.ToolFunc{"lookup": tool.Func()}})
	require.NoError(t, err)
	require.NoError(t, p.Close())
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	_, err = p.Complete(ctx, req)
	errs := []error{err}
	for _, err := range p.Chat(ctx, req).All() {
		errs = append(errs, err)
	}
	_, err = p.Tool(ctx, runtime.ToolRequest{Name: "lookup"})
	errs = append(errs, err)
	_, err = p.Turn(ctx, runtime.TurnRequest{Input: "x"}, func(context.Context) (string, error) { return "ran", nil })
	errs = append(errs, err)
	_, err = p.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "x"})
	errs = append(errs, err)
	errs = append(errs, p.AdmitTool(ctx, runtime.ToolRequest{Name: "lookup"}))
	_, err = p.Admit(ctx, []runtime.Item{{ID: "a", Content: "x"}})
	errs = append(errs, err)
	_, err = p.Ground(ctx, "q", []runtime.Item{{ID: "a", Content: "x"}})
	errs = append(errs, err)
	_, err = p.SetState(ctx, "notes", "x")
	errs = append(errs, err)
	for i, err := range errs {
		require.ErrorIs(t, err, runtime.ErrClosed, "call %d", i)
		assert.True(t, runtime.DidNotRun(err), "call %d", i)
	}
	assert.Zero(t, model.Calls())
	assert.Zero(t, tool.Calls())
	assert.NoError(t, p.Close(), "closing again")
}

// A run id a store could not key its state on (over MaxRunIDBytes, not UTF-8,
// with a NUL byte) is refused before anything runs, with an error that says
// so, where a store's refusal would look like the store being down.
func TestRunIDsAreChecked(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"hi"}})
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	p, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{}), runtime.Deps{
		Models: map[string]runtime.ModelClient{"primary": model}, Tools: map[string]runtime.ToolFunc{"lookup": tool.Func()}})
	require.NoError(t, err)
	defer p.Close()
	for _, id := range []string{strings.Repeat("r", runtime.MaxRunIDBytes+1), "run-\xff", "run\x00x"} {
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: id})
		_, err := p.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
		errs := []error{err}
		_, err = p.Tool(ctx, runtime.ToolRequest{Name: "lookup"})
		errs = append(errs, err)
		_, err = p.Turn(ctx, runtime.TurnRequest{Input: "x"}, func(context.Context) (string, error) { return "ran", nil })
		errs = append(errs, err)
		for i, err := range errs {
			require.Error(t, err, "call %d", i)
			assert.Contains(t, err.Error(), "the run id ")
			assert.Equal(t, "permanent", runtime.KindOf(err))
			assert.True(t, runtime.DidNotRun(err))
			var ce *runtime.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, http.StatusBadRequest, ce.Status, "the caller's request is at fault")
		}
	}
	assert.Zero(t, model.Calls())
	assert.Zero(t, tool.Calls())
	_, err = p.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: strings.Repeat("r", runtime.MaxRunIDBytes)}), runtime.ToolRequest{Name: "lookup"})
	assert.NoError(t, err, "a run id of the longest length runs")

	// The id is checked when WithRun puts the run in a context, and the
	// verdict is that of the run the context carries, on every call made
	// with it: a bad run over a good one is refused, a good one over a bad
	// one runs, a run read back (RunOf) and given a bad id is refused.
	good := runtime.WithRun(context.Background(), runtime.Run{ID: "good"})
	bad := runtime.WithRun(good, runtime.Run{ID: "bad\x00"})
	rebad := runtime.RunOf(good)
	rebad.ID = "run-\xff"
	calls := tool.Calls()
	for range 2 {
		_, err = p.Tool(bad, runtime.ToolRequest{Name: "lookup"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the run id holds a NUL byte")
		_, err = p.Tool(runtime.WithRun(good, rebad), runtime.ToolRequest{Name: "lookup"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the run id is not UTF-8 text")
		_, err = p.Tool(runtime.WithRun(bad, runtime.RunOf(good)), runtime.ToolRequest{Name: "lookup"})
		require.NoError(t, err)
	}
	assert.Equal(t, calls+2, tool.Calls(), "only the calls of the good run ran")
}

// A chat layer's `when` reads the turns whole as a chat guard does
// (Predicate.EvalChatTurns): a layer that applies when a phrase is found
// applies when the phrase is cut across the messages of one turn (two user
// messages, a tool result and the user's text after it), where the model
// reads it whole, and is skipped still where neither reading holds.
func TestChatWhenReadsATurnWhole(t *testing.T) {
	l := rt.Layer("guard", `{"deny":"true","message":"wire transfers need a person"}`)
	l.When = &plan.Predicate{Stage: plan.StageChat, Source: "messages.exists(m, m.content.contains('wire transfer'))"}
	model := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{l}}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	call := runtime.ToolUse{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{}`)}
	split := func(a, b string) map[string][]runtime.Message {
		return map[string][]runtime.Message{
			"two user messages": {{Role: "user", Content: a}, {Role: "user", Content: b}},
			"a tool message and the user's text": {{Role: "user", Content: "look it up"},
				{Role: "assistant", ToolCalls: []runtime.ToolUse{call}},
				{Role: "tool", ToolCallID: "c1", Content: a}, {Role: "user", Content: b}},
		}
	}
	for name, msgs := range split("please send a wire", " transfer of 5000") {
		_, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary", Messages: msgs}, 0)
		require.ErrorAs(t, err, new(*runtime.BlockedError), name)
	}
	assert.Zero(t, model.Calls())
	for name, msgs := range split("wire", "transfer") {
		_, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary", Messages: msgs}, 0)
		require.NoError(t, err, name)
	}
}
