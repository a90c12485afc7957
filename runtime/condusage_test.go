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
// provider's prompt cache as response.usage.cache_write_input_tokens, and
// the part of them written to one-hour entries as
// response.usage.cache_write_1h_input_tokens.
func TestConditionReadsCacheWriteTokens(t *testing.T) {
	for _, c := range []struct {
		field     string
		hit, miss runtime.Usage
		because   string
	}{
		{field: "cache_write_input_tokens", hit: runtime.Usage{InputTokens: 900, CacheWriteInputTokens: 800, OutputTokens: 1},
			miss: runtime.Usage{InputTokens: 900, CachedInputTokens: 800, OutputTokens: 1}, because: "a read from the cache is not a write"},
		{field: "cache_write_1h_input_tokens", hit: runtime.Usage{InputTokens: 900, CacheWriteInputTokens: 800, CacheWrite1hInputTokens: 600, OutputTokens: 1},
			miss: runtime.Usage{InputTokens: 900, CacheWriteInputTokens: 800, OutputTokens: 1}, because: "five-minute writes are not one-hour writes"},
	} {
		model := rt.NewModel(rt.Response{Deltas: []string{"ok"}, Usage: c.hit}, rt.Response{Deltas: []string{"ok"}, Usage: c.miss})
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{
			rt.Named("cache_writes", rt.Layer("guard", `{"deny":"response.usage.`+c.field+` > 500","phase":"after","message":"cache write"}`)),
		}})
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
		require.NoError(t, err)
		req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
		_, _, err = rt.Collect(context.Background(), pl, req, 0)
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b, c.field)
		assert.Equal(t, "cache_writes", b.Layer)
		text, _, err := rt.Collect(context.Background(), pl, req, 0)
		require.NoError(t, err, c.because)
		assert.Equal(t, "ok", text)
	}
}
