package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// An after-phase condition reads the tokens the response wrote to the
// provider's prompt cache as response.usage.cache_write_input_tokens.
func TestConditionReadsCacheWriteTokens(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"ok"}, Usage: runtime.Usage{InputTokens: 900, CacheWriteInputTokens: 800, OutputTokens: 1}},
		rt.Response{Deltas: []string{"ok"}, Usage: runtime.Usage{InputTokens: 900, CachedInputTokens: 800, OutputTokens: 1}})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Named("cache_writes", rt.Layer("guard", `{"deny":"response.usage.cache_write_input_tokens > 500","phase":"after","message":"cache write"}`)),
	}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	_, _, err = rt.Collect(context.Background(), pl, req, 0)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "cache_writes", b.Layer)
	text, _, err := rt.Collect(context.Background(), pl, req, 0)
	require.NoError(t, err, "a read from the cache is not a write")
	assert.Equal(t, "ok", text)
}

// An after-phase condition reads the part of the cache writes made to
// one-hour entries as response.usage.cache_write_1h_input_tokens.
func TestConditionReadsOneHourCacheWriteTokens(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"ok"}, Usage: runtime.Usage{InputTokens: 900, CacheWriteInputTokens: 800, CacheWrite1hInputTokens: 600, OutputTokens: 1}},
		rt.Response{Deltas: []string{"ok"}, Usage: runtime.Usage{InputTokens: 900, CacheWriteInputTokens: 800, OutputTokens: 1}})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Named("hour_writes", rt.Layer("guard", `{"deny":"response.usage.cache_write_1h_input_tokens > 500","phase":"after","message":"one-hour cache write"}`)),
	}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	_, _, err = rt.Collect(context.Background(), pl, req, 0)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "hour_writes", b.Layer)
	_, _, err = rt.Collect(context.Background(), pl, req, 0)
	require.NoError(t, err, "five-minute writes are not one-hour writes")
}
