package semanticmemoize_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestPostgresIndexServesHits caches a chat answer and a tool result in a
// PostgreSQL index and serves them: the partition of an entry is text the
// server stores.
func TestPostgresIndexServesHits(t *testing.T) {
	idx := storetest.Postgres(t)
	var logs bytes.Buffer
	model := rt.NewModel(rt.Response{Deltas: []string{"a", "b"}}, rt.Response{Deltas: []string{"c"}})
	search := rt.NewTool(rt.ToolResult{Value: "first"}, rt.ToolResult{Value: "second"})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("semantic_memoize", `{"index": "vec"}`)},
		Tool: []plan.Layer{rt.Layer("semantic_memoize", `{"index": "vec"}`)}})
	p.Tools = map[string]plan.Tool{"search": {}}
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Embedder: fixedEmbedder{},
		Tools:   map[string]runtime.ToolFunc{"search": search.Func()},
		Indexes: map[string]runtime.VectorIndex{"vec": idx}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "one"}}}
	for range 2 {
		text, _, err := rt.Collect(ctx1, pl, req, 0)
		require.NoError(t, err)
		assert.Equal(t, "ab", text)
		r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}})
		require.NoError(t, err)
		assert.Equal(t, "first", r.Value)
	}
	assert.Equal(t, 1, model.Calls(), "the second request is a hit")
	assert.Empty(t, logs.String())
}

// TestPoisonedChatEntryIsAMissAndReported writes garbage that is JSON but
// no recorded answer over the cached answers of a PostgreSQL index by hand:
// the next similar request is answered by the model, not served an empty
// answer, and the layer logs that the entry does not decode.
func TestPoisonedChatEntryIsAMissAndReported(t *testing.T) {
	for _, garbage := range []string{"null", "{}", "not json"} {
		t.Run(garbage, func(t *testing.T) {
			idx := storetest.Postgres(t)
			var logs bytes.Buffer
			model := rt.NewModel(rt.Response{Deltas: []string{"a", "b"}}, rt.Response{Deltas: []string{"c"}})
			pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("semantic_memoize", `{"index": "vec"}`)}}),
				runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Embedder: fixedEmbedder{},
					Indexes: map[string]runtime.VectorIndex{"vec": idx}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: t.Name()}}}
			text, _, err := rt.Collect(ctx1, pl, req, 0)
			require.NoError(t, err)
			require.Equal(t, "ab", text)

			n, err := idx.Pool().Exec(context.Background(), "UPDATE "+idx.Schema()+".vectors SET value = $1", []byte(garbage))
			require.NoError(t, err)
			require.NotZero(t, n.RowsAffected(), logs.String())
			text, resp, err := rt.Collect(ctx1, pl, req, 0)
			require.NoError(t, err)
			assert.Equal(t, "c", text, "the model answers; the garbage is not served")
			assert.False(t, resp.Cached)
			assert.Contains(t, logs.String(), "a cached entry does not decode")
		})
	}
}

// TestOlderChatEntryCallingAToolIsAMiss writes over the cached answer of a
// PostgreSQL index one that calls a tool, as the layer stored before it
// kept only plain answers: the next similar request is a miss, neither an
// error nor a replayed call, and the model's plain answer takes its place.
func TestOlderChatEntryCallingAToolIsAMiss(t *testing.T) {
	idx := storetest.Postgres(t)
	var logs bytes.Buffer
	model := rt.NewModel(rt.Response{Deltas: []string{"a"}}, rt.Response{Deltas: []string{"b"}})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("semantic_memoize", `{"index": "vec"}`)}})
	p.Tools = map[string]plan.Tool{"balance": {}}
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Embedder: fixedEmbedder{},
		Indexes: map[string]runtime.VectorIndex{"vec": idx}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "my balance?"}}}
	_, _, err := rt.Collect(ctx1, pl, req, 0)
	require.NoError(t, err)
	older := `{"deltas": [], "tool_calls": [{"id": "call_1", "name": "balance", "arguments": {"account": "A"}}], "finish_reason": "tool_calls", "usage": {}}`
	n, err := idx.Pool().Exec(context.Background(), "UPDATE "+idx.Schema()+".vectors SET value = $1", []byte(older))
	require.NoError(t, err)
	require.NotZero(t, n.RowsAffected())

	text, resp, err := rt.Collect(ctx1, pl, req, 0)
	require.NoError(t, err)
	assert.Equal(t, "b", text, "the model answers")
	assert.False(t, resp.Cached)
	assert.Empty(t, resp.ToolCalls, "the stored call is not replayed")
	text, resp, err = rt.Collect(ctx1, pl, req, 0)
	require.NoError(t, err)
	assert.Equal(t, "b", text)
	assert.True(t, resp.Cached, "the plain answer replaced it")
	assert.Equal(t, 2, model.Calls())
	assert.Empty(t, logs.String(), "a miss, not a fault")
}
