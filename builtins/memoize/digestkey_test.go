package memoize_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

const (
	digestKeyEnv = "AGENTC_TEST_MEMOIZE_DIGEST_KEY"
	digestKey    = "memoize-test-digest-key-0123456789abcdef"
)

// cacheKeys returns the keys of the memoize entries s holds, its prefix
// cut.
func cacheKeys(t *testing.T, s *redis.Store) []string {
	t.Helper()
	keys, err := s.Client().Keys(context.Background(), s.Prefix()+"agentc/memoize/*").Result()
	require.NoError(t, err)
	for i := range keys {
		keys[i] = strings.TrimPrefix(keys[i], s.Prefix())
	}
	return keys
}

// TestADigestKeyKeysTheCacheKeys: with settings.digest_key_env the key of a
// cached chat answer or tool result in a shared store is an HMAC of the
// request, not its plain SHA-256, which a reader of the store could test
// guessed prompts against (scope "global": nothing in the key but the
// request). The entries still serve hits; entries written without the key
// are missed once (the call runs again and is cached keyed), single-flight
// or not.
func TestADigestKeyKeysTheCacheKeys(t *testing.T) {
	for _, cfg := range []string{`{"scope": "global"}`, `{"scope": "global", "single_flight": true}`} {
		t.Run(cfg, func(t *testing.T) {
			run := func(t *testing.T, keyed bool, kv *redis.Store) {
				model := rt.NewModel(rt.Response{Deltas: []string{"a"}}, rt.Response{Deltas: []string{"b"}})
				search := rt.NewTool(rt.ToolResult{Value: "first"}, rt.ToolResult{Value: "second"})
				p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("memoize", cfg)}, Tool: []plan.Layer{rt.Layer("memoize", cfg)}})
				p.Tools = map[string]plan.Tool{"search": {}}
				if keyed {
					p.Settings.DigestKeyEnv = digestKeyEnv
				}
				pl := rt.Build(t, p, runtime.Deps{KV: kv, Models: map[string]runtime.ModelClient{"primary": model},
					Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
				req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "my PIN is 4821"}}}
				for range 2 {
					text, _, err := rt.Collect(ctx1, pl, req, 0)
					require.NoError(t, err)
					assert.Equal(t, "a", text)
					r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"pin": "4821"}})
					require.NoError(t, err)
					assert.Equal(t, "first", r.Value)
				}
				assert.Equal(t, 1, model.Calls(), "the second request is a hit")
				assert.Equal(t, 1, search.Calls(), "the second call is a hit")
			}
			t.Setenv(digestKeyEnv, digestKey)
			plainKV, keyedKV := storetest.Redis(t), storetest.Redis(t)
			run(t, false, plainKV)
			run(t, true, keyedKV)
			plain, keyed := cacheKeys(t, plainKV), cacheKeys(t, keyedKV)
			require.Len(t, plain, 2)
			require.Len(t, keyed, 2)
			for _, k := range keyed {
				assert.NotContains(t, plain, k, "the keyed store holds the plain key of the request")
			}
			// The plain entries of before are missed: run counts one call
			// of each, then a hit.
			run(t, true, plainKV)
			assert.Len(t, cacheKeys(t, plainKV), 4)
		})
	}
}
