package memoize_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// poison overwrites, by hand, every cached value the store holds (plain
// entries and published single-flight results) with garbage.
func poison(t *testing.T, kv runtime.KV, garbage string) {
	t.Helper()
	ctx := context.Background()
	switch s := kv.(type) {
	case *redis.Store:
		keys, err := s.Client().Keys(ctx, s.Prefix()+"agentc/memoize/*").Result()
		require.NoError(t, err)
		n := 0
		for _, k := range keys {
			switch s.Client().Type(ctx, k).Val() {
			case "string":
				require.NoError(t, s.Client().SetArgs(ctx, k, garbage, goredis.SetArgs{KeepTTL: true}).Err())
				n++
			case "hash":
				if s.Client().HGet(ctx, k, "state").Val() == "done" {
					require.NoError(t, s.Client().HSet(ctx, k, "result", garbage).Err())
					n++
				}
			}
		}
		require.NotZero(t, n, "nothing cached to poison")
	case *postgres.Store:
		a, err := s.Pool().Exec(ctx, "UPDATE "+s.Schema()+".kv SET value = $1", []byte(garbage))
		require.NoError(t, err)
		b, err := s.Pool().Exec(ctx, "UPDATE "+s.Schema()+".lease SET result = $1 WHERE state = 'done'", []byte(garbage))
		require.NoError(t, err)
		require.NotZero(t, a.RowsAffected()+b.RowsAffected(), "nothing cached to poison")
	default:
		t.Fatalf("cannot poison a %T", kv)
	}
}

// TestPoisonedEntryIsAMissAndReported writes garbage over the cached
// answers in a shared store by hand: the next call is a miss (the model or
// tool answers it), never the garbage served as an answer, and the layer
// logs that the entry does not decode. A value that is JSON but not a
// recorded answer (null, {}) is garbage too.
func TestPoisonedEntryIsAMissAndReported(t *testing.T) {
	servers := storetest.SharedStores(t)[1:] // the servers, not the memory store
	if len(servers) == 0 {
		storetest.ServerURL(t, storetest.RedisEnv)
	}
	for _, st := range servers {
		for _, flight := range []bool{false, true} {
			cfg := `{"scope": "global"}`
			if flight {
				cfg = `{"scope": "global", "single_flight": true}`
			}
			for _, garbage := range []string{"not json", "null", "{}", `{"usage": {"input_tokens": 1}}`} {
				t.Run(st.Name+"/"+cfg+"/chat/"+garbage, func(t *testing.T) {
					var logs bytes.Buffer
					model := rt.NewModel(rt.Response{Deltas: []string{"hel", "lo"}}, rt.Response{Deltas: []string{"again"}})
					pl := rt.Build(t, chatPlan(rt.Layer("memoize", cfg)), runtime.Deps{KV: st.KV,
						Models: map[string]runtime.ModelClient{"primary": model}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
					req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: t.Name()}}}
					text, _, err := rt.Collect(ctx1, pl, req, 0)
					require.NoError(t, err)
					require.Equal(t, "hello", text)

					poison(t, st.KV, garbage)
					text, resp, err := rt.Collect(ctx1, pl, req, 0)
					require.NoError(t, err)
					assert.Equal(t, "again", text, "the model answers; the garbage is not served")
					assert.False(t, resp.Cached)
					assert.Equal(t, 2, model.Calls())
					assert.Contains(t, logs.String(), "a cached entry does not decode")
				})
			}
			t.Run(st.Name+"/"+cfg+"/tool", func(t *testing.T) {
				var logs bytes.Buffer
				search := rt.NewTool(rt.ToolResult{Value: "first"}, rt.ToolResult{Value: "second"})
				pl := rt.Build(t, toolPlan(cfg), runtime.Deps{KV: st.KV,
					Tools: map[string]runtime.ToolFunc{"search": search.Func()}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": t.Name()}}
				_, err := pl.Tool(ctx1, req)
				require.NoError(t, err)

				poison(t, st.KV, "not json")
				r, err := pl.Tool(ctx1, req)
				require.NoError(t, err)
				assert.Equal(t, "second", r.Value, "the tool answers; the garbage is not served")
				assert.False(t, r.Cached)
				assert.Contains(t, logs.String(), "a cached entry does not decode")
			})
		}
	}
}
