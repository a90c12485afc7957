package memoize_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

var ctx1 = runtime.WithRun(context.Background(), runtime.Run{ID: "run-1"})

func toolPlan(config string) *plan.Plan {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("memoize", config)}})
	p.Tools = map[string]plan.Tool{"search": {}, "refund": {SideEffecting: true, RetrySafe: true}, "vault": {SecretResult: true}}
	return p
}

func TestToolCacheReadOnly(t *testing.T) {
	search := rt.NewTool(rt.ToolResult{Value: map[string]any{"hits": []any{"a"}}}, rt.ToolResult{Value: "second"})
	pl := rt.Build(t, toolPlan(""), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x", "n": 1}}
	r1, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	assert.False(t, r1.Cached)
	r2, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"n": 1, "q": "x"}})
	require.NoError(t, err)
	assert.True(t, r2.Cached)
	assert.Equal(t, map[string]any{"hits": []any{"a"}}, r2.Value, "the stored result as decoded JSON")
	assert.Equal(t, 1, search.Calls())

	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "y"}})
	require.NoError(t, err)
	assert.Equal(t, 2, search.Calls(), "other arguments miss")
}

func TestSideEffectingSecretAndUndeclaredToolsPassThrough(t *testing.T) {
	refund := rt.NewTool(rt.ToolResult{Value: "ok"})
	other := rt.NewTool(rt.ToolResult{Value: "ok"})
	vault := rt.NewTool(rt.ToolResult{Value: "tok_8f2a91c4"})
	pl := rt.Build(t, toolPlan(""), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": refund.Func(), "other": other.Func(),
		"vault": vault.Func()}})
	for range 3 {
		r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "vault", Args: map[string]any{}})
		require.NoError(t, err)
		assert.False(t, r.Cached)
		r, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"id": "A1"}})
		require.NoError(t, err)
		assert.False(t, r.Cached)
		r, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "other", Args: map[string]any{"id": "A1"}})
		require.NoError(t, err)
		assert.False(t, r.Cached)
	}
	assert.Equal(t, 3, refund.Calls(), "a side-effecting tool is never cached")
	assert.Equal(t, 3, other.Calls(), "an undeclared tool is never cached")
	assert.Equal(t, 3, vault.Calls(), "a secret_result tool is never cached")
}

func TestErrorsAreNotCached(t *testing.T) {
	search := rt.NewTool(rt.ToolResult{Err: rt.Permanent("no")}, rt.ToolResult{Value: "yes"})
	pl := rt.Build(t, toolPlan(""), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}}
	_, err := pl.Tool(ctx1, req)
	require.Error(t, err)
	r, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	assert.False(t, r.Cached)
	r, err = pl.Tool(ctx1, req)
	require.NoError(t, err)
	assert.True(t, r.Cached)
	assert.Equal(t, "yes", r.Value)
	assert.Equal(t, 2, search.Calls())
}

func TestScopeAndTTL(t *testing.T) {
	ctx2 := runtime.WithRun(context.Background(), runtime.Run{ID: "run-2"})
	req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}}

	search := rt.NewTool(rt.ToolResult{Value: 1})
	pl := rt.Build(t, toolPlan(`{"scope": "run"}`), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	_, _ = pl.Tool(ctx1, req)
	_, _ = pl.Tool(ctx2, req)
	assert.Equal(t, 2, search.Calls(), "scope run: runs do not share entries")

	search = rt.NewTool(rt.ToolResult{Value: 1})
	pl = rt.Build(t, toolPlan(`{"scope": "global", "ttl": "30ms"}`), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	_, _ = pl.Tool(ctx1, req)
	r, err := pl.Tool(ctx2, req)
	require.NoError(t, err)
	assert.True(t, r.Cached, "scope global: shared across runs")
	time.Sleep(50 * time.Millisecond)
	r, err = pl.Tool(ctx2, req)
	require.NoError(t, err)
	assert.False(t, r.Cached, "expired")
	assert.Equal(t, 2, search.Calls())
}

func TestValidate(t *testing.T) {
	_, err := runtime.Build(context.Background(), toolPlan(`{"scope": "session"}`), runtime.Deps{})
	assert.ErrorContains(t, err, "scope")
	_, err = runtime.Build(context.Background(), toolPlan(`{"store": "nope"}`), runtime.Deps{})
	assert.ErrorContains(t, err, `store "nope" is not declared`)
	// A ttl of zero would keep every entry for good in redis and postgres.
	for _, ttl := range []string{"0s", "0.0m"} {
		_, err = runtime.Build(context.Background(), toolPlan(`{"ttl": "`+ttl+`"}`), runtime.Deps{})
		assert.ErrorContains(t, err, "ttl must be positive", ttl)
	}
}

// brokenKV fails every operation.
type brokenKV struct{}

var errBroken = errors.New("store down")

func (brokenKV) Get(context.Context, string) ([]byte, bool, error) { return nil, false, errBroken }
func (brokenKV) Set(context.Context, string, []byte, time.Duration) error {
	return errBroken
}
func (brokenKV) SetIfAbsent(context.Context, string, []byte, time.Duration) (bool, error) {
	return false, errBroken
}
func (brokenKV) Delete(context.Context, string) error { return errBroken }

func TestStoreFailureFailsOpen(t *testing.T) {
	search := rt.NewTool(rt.ToolResult{Value: 1})
	pl := rt.Build(t, toolPlan(""), runtime.Deps{KV: brokenKV{}, Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	for range 2 {
		r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}})
		require.NoError(t, err)
		assert.Equal(t, 1, r.Value)
	}
	assert.Equal(t, 2, search.Calls())
}

func TestSQLiteStoreSurvivesRestart(t *testing.T) {
	p := toolPlan(`{"store": "disk", "scope": "global"}`)
	p.Stores = map[string]plan.Store{"disk": {Kind: "sqlite", Path: filepath.Join(t.TempDir(), "cache.db")}}
	search := rt.NewTool(rt.ToolResult{Value: "v1"}, rt.ToolResult{Value: "v2"})
	deps := runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}}
	req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}}

	pl, err := runtime.Build(context.Background(), p, deps)
	require.NoError(t, err)
	_, err = pl.Tool(ctx1, req)
	require.NoError(t, err)
	require.NoError(t, pl.Close())

	pl, err = runtime.Build(context.Background(), p, deps)
	require.NoError(t, err)
	defer pl.Close()
	r, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	assert.True(t, r.Cached)
	assert.Equal(t, "v1", r.Value)
	assert.Equal(t, 1, search.Calls())
}

func chatPlan(chain ...plan.Layer) *plan.Plan {
	return rt.Plan(plan.Chains{Chat: chain})
}

func TestChatHitReplaysAndIsNotCharged(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"hel", "lo"}, Usage: runtime.Usage{InputTokens: 10, OutputTokens: 5}},
		rt.Response{Deltas: []string{"other"}})
	pl := rt.Build(t, chatPlan(rt.Layer("meter", ""), rt.Layer("memoize", "")),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}

	text, r1, err := rt.Collect(ctx1, pl, req, 0)
	require.NoError(t, err)
	assert.Equal(t, "hello", text)
	assert.False(t, r1.Cached)

	text, r2, err := rt.Collect(ctx1, pl, req, 0)
	require.NoError(t, err)
	assert.Equal(t, "hello", text)
	assert.True(t, r2.Cached)
	assert.Equal(t, 2, r2.Deltas, "replayed as the same deltas")
	assert.Equal(t, "primary", r2.Model)
	assert.Equal(t, runtime.Usage{InputTokens: 10, OutputTokens: 5}, r2.Usage, "the cached usage is reported")
	assert.Equal(t, 1, model.Calls())

	meter := pl.Layers(plan.StageChat)[0].Middleware.(runtime.LedgerReader)
	assert.Equal(t, runtime.Ledger{InputTokens: 10, OutputTokens: 5, USD: meter.Ledger("run-1").USD, Calls: 1}, meter.Ledger("run-1"))

	_, r3, err := rt.Collect(ctx1, pl, runtime.ChatRequest{Model: "primary", MaxTokens: 9, Messages: req.Messages}, 0)
	require.NoError(t, err)
	assert.False(t, r3.Cached, "max_tokens is part of the input")
}

func TestChatAbandonedOrFailedStreamIsNotCached(t *testing.T) {
	model := rt.NewModel(
		rt.Response{Deltas: []string{"a", "b", "c"}},
		rt.Response{Deltas: []string{"a", "b"}, Err: rt.Transient("cut"), FailAfter: 1},
		rt.Response{Deltas: []string{"full"}},
	)
	pl := rt.Build(t, chatPlan(rt.Layer("memoize", "")), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	text, _, err := rt.Collect(ctx1, pl, req, 1)
	require.NoError(t, err)
	assert.Equal(t, "a", text)
	_, _, err = rt.Collect(ctx1, pl, req, 0)
	require.Error(t, err)
	text, resp, err := rt.Collect(ctx1, pl, req, 0)
	require.NoError(t, err)
	assert.Equal(t, "full", text)
	assert.False(t, resp.Cached)
	text, resp, err = rt.Collect(ctx1, pl, req, 0)
	require.NoError(t, err)
	assert.Equal(t, "full", text)
	assert.True(t, resp.Cached)
	assert.Equal(t, 3, model.Calls())
}

func TestChatReplayHonoursConsumerStop(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"a", "b", "c"}})
	pl := rt.Build(t, chatPlan(rt.Layer("memoize", "")), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	_, _, err := rt.Collect(ctx1, pl, req, 0)
	require.NoError(t, err)
	text, resp, err := rt.Collect(ctx1, pl, req, 2)
	require.NoError(t, err)
	assert.Equal(t, "ab", text)
	assert.Equal(t, 2, resp.Deltas)
}

func TestToolArgumentsWithoutCanonicalFormBypassTheCache(t *testing.T) {
	search := rt.NewTool(rt.ToolResult{Value: "first"}, rt.ToolResult{Value: "second"}, rt.ToolResult{Value: "third"})
	pl := rt.Build(t, toolPlan(""), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	for _, tt := range []struct {
		q, want string
	}{{"alice", "first"}, {"bob", "second"}, {"alice", "third"}} {
		r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": tt.q, "min": math.Inf(-1)}})
		require.NoError(t, err)
		assert.Equal(t, tt.want, r.Value, tt.q)
		assert.False(t, r.Cached, tt.q)
	}
	assert.Equal(t, 3, search.Calls())
}

// TestScopeKeyIsPerTenant: scope "key" shares a tenant's entries across its
// runs and never serves one tenant's result to another; scope "run" does
// not either, even for runs of two tenants with the same run id.
func TestScopeKeyIsPerTenant(t *testing.T) {
	req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "balance"}}
	at := func(tenant, run string) context.Context {
		return runtime.WithRun(context.Background(), runtime.Run{ID: run, Tenant: tenant})
	}
	search := rt.NewTool(rt.ToolResult{Value: "alice's"}, rt.ToolResult{Value: "bob's"}, rt.ToolResult{Value: "carol's"})
	pl := rt.Build(t, toolPlan(`{"scope": "key"}`), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	r, err := pl.Tool(at("alice", "r1"), req)
	require.NoError(t, err)
	assert.Equal(t, "alice's", r.Value)
	r, err = pl.Tool(at("alice", "r2"), req)
	require.NoError(t, err)
	assert.True(t, r.Cached, "one tenant's runs share its entries")
	assert.Equal(t, "alice's", r.Value)
	r, err = pl.Tool(at("bob", "r3"), req)
	require.NoError(t, err)
	assert.False(t, r.Cached, "another tenant never gets alice's result")
	assert.Equal(t, "bob's", r.Value)

	search = rt.NewTool(rt.ToolResult{Value: "alice's"}, rt.ToolResult{Value: "bob's"})
	pl = rt.Build(t, toolPlan(`{"scope": "run"}`), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	_, err = pl.Tool(at("alice", "same-id"), req)
	require.NoError(t, err)
	r, err = pl.Tool(at("bob", "same-id"), req)
	require.NoError(t, err)
	assert.False(t, r.Cached, "scope run: a run id two tenants both use is still two runs")
	assert.Equal(t, "bob's", r.Value)
}

// A prompt-cache breakpoint is a cost hint: moving it, adding it or taking
// it away does not change the answer, so the cached one serves.
func TestChatKeyIgnoresPromptCacheBreakpoints(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"first"}}, rt.Response{Deltas: []string{"second"}})
	pl := rt.Build(t, chatPlan(rt.Layer("memoize", "")), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	bp := &runtime.CacheControl{Type: "ephemeral"}
	tools := []runtime.ToolDef{{Name: "search", Parameters: []byte(`{"type":"object"}`)}}
	req := runtime.ChatRequest{Model: "primary", CacheControl: bp, Tools: tools, Messages: []runtime.Message{
		{Role: "system", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "Be brief."}, {Type: runtime.PartText, Text: "Be kind.", CacheControl: bp}}},
		{Role: "user", Content: "hi"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "search", Arguments: []byte(`{}`), CacheControl: bp}}},
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c1", Text: "none", CacheControl: bp}}},
	}}
	text, _, err := rt.Collect(ctx1, pl, req, 0)
	require.NoError(t, err)
	assert.Equal(t, "first", text)

	moved := runtime.ChatRequest{Model: "primary", Tools: []runtime.ToolDef{{Name: "search", Parameters: []byte(`{"type":"object"}`), CacheControl: bp}},
		Messages: []runtime.Message{
			{Role: "system", Content: "Be brief.\nBe kind."},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "hi", CacheControl: bp}}},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "search", Arguments: []byte(`{}`)}}},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c1", Text: "none"}}},
		}}
	text, resp, err := rt.Collect(ctx1, pl, moved, 0)
	require.NoError(t, err)
	assert.Equal(t, "first", text)
	assert.True(t, resp.Cached, "the breakpoints moved, the request is the same")
	assert.Equal(t, 1, model.Calls())
	require.NotNil(t, req.Messages[2].ToolCalls[0].CacheControl, "the request keeps its breakpoints")
	require.NotNil(t, model.Requests()[0].Messages[0].Parts[1].CacheControl, "the model got them")

	other := moved
	other.Messages = append([]runtime.Message{}, moved.Messages...)
	other.Messages[3] = runtime.Message{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c1", Text: "one hit"}}}
	_, resp, err = rt.Collect(ctx1, pl, other, 0)
	require.NoError(t, err)
	assert.False(t, resp.Cached, "another tool result is another request")
}

// A cache hit answers what the model answered: the stop sequence it stopped
// at and the usage it reported, prompt-cache writes included.
func TestChatHitReplaysStopSequenceAndCacheWrites(t *testing.T) {
	for _, config := range []string{"", flightConfig} {
		t.Run(config, func(t *testing.T) {
			model := rt.NewModel(rt.Response{Stream: []runtime.Delta{{Text: "The answer"}, {FinishReason: runtime.FinishStop, StopSequence: "END"}},
				Usage: runtime.Usage{InputTokens: 30, CachedInputTokens: 4, CacheWriteInputTokens: 20, OutputTokens: 3}})
			pl := rt.Build(t, chatPlan(rt.Layer("memoize", config)), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			req := runtime.ChatRequest{Model: "primary", Stop: []string{"END"}, Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
			_, r1, err := rt.Collect(ctx1, pl, req, 0)
			require.NoError(t, err)
			require.Equal(t, "END", r1.StopSequence)
			text, r2, err := rt.Collect(ctx1, pl, req, 0)
			require.NoError(t, err)
			assert.True(t, r2.Cached)
			assert.Equal(t, "The answer", text)
			assert.Equal(t, runtime.FinishStop, r2.FinishReason)
			assert.Equal(t, "END", r2.StopSequence)
			assert.Equal(t, r1.Usage, r2.Usage)
			assert.EqualValues(t, 20, r2.Usage.CacheWriteInputTokens)
			assert.Equal(t, 1, model.Calls())
		})
	}
}
