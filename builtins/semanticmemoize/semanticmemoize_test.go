package semanticmemoize_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/builtins/semanticmemoize"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

var ctx1 = runtime.WithRun(context.Background(), runtime.Run{ID: "run-1"})

func toolPlan(config string) *plan.Plan {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("semantic_memoize", config)}})
	p.Tools = map[string]plan.Tool{"search": {}, "other": {}, "refund": {SideEffecting: true}}
	return p
}

func TestToolNearDuplicate(t *testing.T) {
	search := rt.NewTool(rt.ToolResult{Value: "A"}, rt.ToolResult{Value: "B"}, rt.ToolResult{Value: "C"})
	other := rt.NewTool(rt.ToolResult{Value: "O"})
	pl := rt.Build(t, toolPlan(`{"threshold": 0.9}`), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func(), "other": other.Func()}})
	call := func(name, q string) runtime.ToolResult {
		r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: name, Args: map[string]any{"q": q}})
		require.NoError(t, err)
		return r
	}
	assert.False(t, call("search", "What is the refund policy for lost parcels?").Cached)
	r := call("search", "  what is the  refund POLICY for lost parcels? ")
	assert.True(t, r.Cached, "equal after normalisation")
	assert.Equal(t, "A", r.Value)
	r = call("search", "Which carriers deliver to Norway?")
	assert.False(t, r.Cached, "a different question")
	assert.Equal(t, "B", r.Value)
	assert.False(t, call("other", "What is the refund policy for lost parcels?").Cached, "partitioned by tool")
	assert.Equal(t, 2, search.Calls())
}

func TestToolNearDuplicateWithOtherArgumentsMisses(t *testing.T) {
	get := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		return "record of " + c.Args["customer"].(string), nil
	}
	pl := rt.Build(t, toolPlan(`{"threshold": 0.5}`), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": get}})
	fields := "name, billing address, shipping address, order history, payment methods, loyalty points"
	for _, tt := range []struct {
		customer, want string
		cached         bool
	}{
		{"alice.smith", "record of alice.smith", false},
		{"bob.smith", "record of bob.smith", false},
		{"alice.smyth", "record of alice.smyth", false},
		{" Alice.Smith", "record of alice.smith", true},
		{"BOB.SMITH", "record of bob.smith", true},
	} {
		r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"customer": tt.customer, "fields": fields, "n": 3}})
		require.NoError(t, err)
		assert.Equal(t, tt.want, r.Value, tt.customer)
		assert.Equal(t, tt.cached, r.Cached, tt.customer)
	}
	r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"customer": "alice.smith", "fields": fields, "n": 4}})
	require.NoError(t, err)
	assert.False(t, r.Cached, "a number is compared exactly")
}

func TestNormalizedArgsDigest(t *testing.T) {
	d := func(args map[string]any) string {
		s, err := semanticmemoize.NormalizedArgsDigest(runtime.Digester{}, args)
		require.NoError(t, err)
		return s
	}
	base := d(map[string]any{"q": "Lost parcel", "tags": []any{"A b"}, "n": 1.0, "ok": true})
	assert.Equal(t, base, d(map[string]any{"ok": true, "n": 1, "tags": []any{" a   B "}, "q": "\tlost  PARCEL\n"}))
	// Equal numbers alike, however spelled (a host's json.Number, -0).
	assert.Equal(t, base, d(map[string]any{"q": "Lost parcel", "tags": []any{"A b"}, "n": json.Number("1.0"), "ok": true}))
	assert.Equal(t, d(map[string]any{"n": 0.0}), d(map[string]any{"n": math.Copysign(0, -1)}))
	for _, other := range []map[string]any{
		{"q": "Lost parcels", "tags": []any{"A b"}, "n": 1.0, "ok": true},
		{"Q": "Lost parcel", "tags": []any{"A b"}, "n": 1.0, "ok": true},
		{"q": "Lost parcel", "tags": []any{"A b"}, "n": 2.0, "ok": true},
		{"q": "Lost parcel", "tags": []any{"A b"}, "n": 1.0, "ok": false},
		{"q": "Lost parcel", "tags": []any{"Ab"}, "n": 1.0, "ok": true},
	} {
		assert.NotEqual(t, base, d(other), "%v", other)
	}
	_, err := semanticmemoize.NormalizedArgsDigest(runtime.Digester{}, map[string]any{"x": make(chan int)})
	assert.Error(t, err)
}

func TestThresholdOneMatchesIdenticalInput(t *testing.T) {
	search := rt.NewTool(rt.ToolResult{Value: "A"})
	pl := rt.Build(t, toolPlan(`{"threshold": 1}`), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	for _, q := range []string{"Lost parcel refund, order 1234", "Lost parcel refund, order 1234", "Lost parcel refund, order 1235"} {
		_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": q}})
		require.NoError(t, err)
	}
	assert.Equal(t, 2, search.Calls(), "identical input hits, one digit off misses")
}

func TestSideEffectingToolPassesThrough(t *testing.T) {
	refund := rt.NewTool(rt.ToolResult{Value: "R"})
	pl := rt.Build(t, toolPlan(""), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": refund.Func()}})
	for range 2 {
		r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"id": "A1"}})
		require.NoError(t, err)
		assert.False(t, r.Cached)
	}
	assert.Equal(t, 2, refund.Calls())
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
	assert.Equal(t, 2, search.Calls())
}

// fixedEmbedder maps every text to the same vector, except "far".
type fixedEmbedder struct{ fail bool }

func (f fixedEmbedder) Embed(_ context.Context, text string) ([]float32, error) {
	if f.fail {
		return nil, errors.New("embedder down")
	}
	if text == "user: far\n" {
		return []float32{0, 1}, nil
	}
	return []float32{1, 0}, nil
}

func TestChatWithCustomEmbedderAndIndex(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"a", "b"}, Usage: runtime.Usage{InputTokens: 4, OutputTokens: 2}},
		rt.Response{Deltas: []string{"c"}})
	idx := runtime.NewMemoryVectorIndex()
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", ""), rt.Layer("semantic_memoize", `{"index": "vec"}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Embedder: fixedEmbedder{},
			Indexes: map[string]runtime.VectorIndex{"vec": idx}})
	msg := func(s string) runtime.ChatRequest {
		return runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: s}}}
	}
	_, _, err := rt.Collect(ctx1, pl, msg("one"), 0)
	require.NoError(t, err)
	text, resp, err := rt.Collect(ctx1, pl, msg("anything else"), 0)
	require.NoError(t, err)
	assert.Equal(t, "ab", text, "the embedder says it is the same input")
	assert.True(t, resp.Cached)
	assert.Equal(t, runtime.Usage{InputTokens: 4, OutputTokens: 2}, resp.Usage)
	text, resp, err = rt.Collect(ctx1, pl, msg("far"), 0)
	require.NoError(t, err)
	assert.Equal(t, "c", text)
	assert.False(t, resp.Cached)
	assert.Equal(t, 2, model.Calls())
	meter := pl.Layers(plan.StageChat)[0].Middleware.(runtime.LedgerReader)
	assert.Equal(t, int64(2), meter.Ledger("run-1").Calls, "the hit is not charged")
}

func TestEmbedderFailureFailsOpen(t *testing.T) {
	search := rt.NewTool(rt.ToolResult{Value: "A"})
	pl := rt.Build(t, toolPlan(""), runtime.Deps{Embedder: fixedEmbedder{fail: true}, Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	for range 2 {
		r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}})
		require.NoError(t, err)
		assert.False(t, r.Cached)
	}
	assert.Equal(t, 2, search.Calls())
}

func TestValidate(t *testing.T) {
	for _, c := range []string{`{"threshold": 0}`, `{"threshold": 1.5}`, `{"scope": "x"}`} {
		_, err := runtime.Build(context.Background(), toolPlan(c), runtime.Deps{})
		assert.Error(t, err, c)
	}
	p := toolPlan(`{"index": "kv"}`)
	p.Stores = map[string]plan.Store{"kv": {Kind: "sqlite", Path: t.TempDir() + "/x.db"}}
	_, err := runtime.Build(context.Background(), p, runtime.Deps{})
	assert.ErrorContains(t, err, "offers no vector index")
}

func TestTranscript(t *testing.T) {
	assert.Equal(t, "system: be brief\nuser: hi\n",
		semanticmemoize.Transcript([]runtime.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}))
	// Two group chats that differ only in who said what embed apart.
	alice := semanticmemoize.Transcript([]runtime.Message{{Role: "user", Name: "alice", Content: "approve it"}})
	mallory := semanticmemoize.Transcript([]runtime.Message{{Role: "user", Name: "mallory", Content: "approve it"}})
	assert.Equal(t, "user (alice): approve it\n", alice)
	assert.NotEqual(t, alice, mallory)
	// Two questions about two PDFs embed apart: the same question about
	// another document is not the same request.
	pdf := func(data string) string {
		return semanticmemoize.Transcript([]runtime.Message{{Role: "user", Content: "summarize", Parts: []runtime.ContentPart{
			{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: "data:application/pdf;base64," + data}}}})
	}
	assert.Contains(t, pdf("JVBERi0="), "user: summarize [document ")
	assert.NotEqual(t, pdf("JVBERi0="), pdf("JVBERi1="))
}

func BenchmarkToolLookup(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n, "-entries"), func(b *testing.B) {
			search := rt.NewTool(rt.ToolResult{Value: "A"})
			pl := rt.Build(b, toolPlan(`{"threshold": 0.9}`), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
			for i := range n {
				if _, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": fmt.Sprintf("question number %d about topic %d", i, i*7)}}); err != nil {
					b.Fatal(err)
				}
			}
			req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "question number 42 about topic 294!"}}
			b.ReportAllocs()
			for b.Loop() {
				if r, err := pl.Tool(ctx1, req); err != nil || !r.Cached {
					b.Fatal("miss", err)
				}
			}
		})
	}
}

// TestScopeKeyIsPerTenant: scope "key" reuses a tenant's entries across its
// runs, never another tenant's.
func TestScopeKeyIsPerTenant(t *testing.T) {
	at := func(tenant, run string) context.Context {
		return runtime.WithRun(context.Background(), runtime.Run{ID: run, Tenant: tenant})
	}
	search := rt.NewTool(rt.ToolResult{Value: "alice's"}, rt.ToolResult{Value: "bob's"})
	pl := rt.Build(t, toolPlan(`{"scope": "key"}`), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "my balance"}}
	r, err := pl.Tool(at("alice", "r1"), req)
	require.NoError(t, err)
	assert.False(t, r.Cached)
	r, err = pl.Tool(at("alice", "r2"), req)
	require.NoError(t, err)
	assert.True(t, r.Cached, "one tenant's runs share its entries")
	r, err = pl.Tool(at("bob", "r1"), req)
	require.NoError(t, err)
	assert.False(t, r.Cached, "another tenant never gets alice's result")
	assert.Equal(t, "bob's", r.Value)
}

// A message whose text rides in parts (a client's text blocks with a
// prompt-cache breakpoint, text beside an image, tool results) is embedded
// by that text: two different questions never share an answer because
// their text was not in Content.
func TestChatTextInPartsIsEmbedded(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"Paris"}}, rt.Response{Deltas: []string{"Flour, eggs, sugar."}},
		rt.Response{Deltas: []string{"Sunny."}}, rt.Response{Deltas: []string{"Raining."}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("semantic_memoize", `{"threshold": 0.95}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	bp := &runtime.CacheControl{Type: "ephemeral"}
	ask := func(parts ...runtime.ContentPart) string {
		text, _, err := rt.Collect(ctx1, pl, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Parts: parts}}}, 0)
		require.NoError(t, err)
		return text
	}
	assert.Equal(t, "Paris", ask(runtime.ContentPart{Type: runtime.PartText, Text: "What is the capital of France?", CacheControl: bp}))
	assert.Equal(t, "Flour, eggs, sugar.", ask(runtime.ContentPart{Type: runtime.PartText, Text: "Give me a cake recipe.", CacheControl: bp}))
	assert.Equal(t, "Paris", ask(runtime.ContentPart{Type: runtime.PartText, Text: "What is the capital of France?"}), "the same question hits")
	result := func(s string) runtime.ContentPart {
		return runtime.ContentPart{Type: runtime.PartToolResult, ToolCallID: "c1", Text: s}
	}
	assert.Equal(t, "Sunny.", ask(result(`{"sky": "clear", "temperature_c": 24}`)))
	assert.Equal(t, "Raining.", ask(result(`{"rain_mm": 12, "wind_kmh": 40, "alerts": ["storm"]}`)))
	assert.Equal(t, 4, model.Calls())
}

func TestTranscriptOfParts(t *testing.T) {
	got := semanticmemoize.Transcript([]runtime.Message{
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "What is this?"}, {Type: runtime.PartImage, ImageURL: "https://example.com/a.png"}}},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "lookup", Arguments: []byte(`{"q":"a"}`)}}},
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c1", Text: "a cat"}}},
	})
	assert.Regexp(t, `^user: What is this\? \[image [0-9a-f]{16}\]\nassistant: \[call lookup \{"q":"a"\}\]\nuser: \[result c1: a cat\]\n$`, got)
}

// The same question about another screenshot or another PDF is another
// request: the attachments, which the embedding reads as a digest among
// the words, must match exactly, or a near-duplicate question would get the
// answer about the other attachment.
func TestChatAttachmentsMatchExactly(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"A cat."}}, rt.Response{Deltas: []string{"A dog."}},
		rt.Response{Deltas: []string{"Q3."}}, rt.Response{Deltas: []string{"Q4."}}, rt.Response{Deltas: []string{"A cow."}})
	// An embedder that reads meaning scores the two requests alike (here,
	// every text alike): a digest among the words is no identity.
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("semantic_memoize", `{"index": "vec"}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Embedder: fixedEmbedder{},
			Indexes: map[string]runtime.VectorIndex{"vec": runtime.NewMemoryVectorIndex()}})
	ask := func(parts ...runtime.ContentPart) string {
		text, _, err := rt.Collect(ctx1, pl, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user",
			Content: "What does it show?", Parts: parts}}}, 0)
		require.NoError(t, err)
		return text
	}
	image := func(data string) runtime.ContentPart {
		return runtime.ContentPart{Type: runtime.PartImage, ImageURL: "data:image/png;base64," + data}
	}
	assert.Equal(t, "A cat.", ask(image("iVBORw0KGgoAAAA")))
	assert.Equal(t, "A dog.", ask(image("iVBORw0KGgoBBBB")), "another image")
	assert.Equal(t, "A cat.", ask(image("iVBORw0KGgoAAAA")), "the same image hits")
	pdf := func(data string) runtime.ContentPart {
		return runtime.ContentPart{Type: runtime.PartDocument, MediaType: "application/pdf", Data: []byte(data)}
	}
	assert.Equal(t, "Q3.", ask(pdf("%PDF-1.7 third quarter")))
	assert.Equal(t, "Q4.", ask(pdf("%PDF-1.7 fourth quarter")), "another PDF given by its bytes")
	bytes := runtime.ContentPart{Type: runtime.PartImage, MediaType: "image/png", Data: []byte("\x89PNG cow")}
	assert.Equal(t, "A cow.", ask(bytes), "an image given by its bytes")
	assert.Equal(t, 5, model.Calls())
}
