package semanticmemoize_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/semanticmemoize"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

const (
	digestKeyEnv = "AGENTC_TEST_SEMANTIC_MEMOIZE_DIGEST_KEY"
	digestKey    = "semantic-memoize-test-digest-key-0123456789"
)

// indexRow is one entry of a PostgreSQL index as the server stores it.
type indexRow struct{ scope, id, value string }

func indexRows(t *testing.T, idx *postgres.Store) []indexRow {
	t.Helper()
	rows, err := idx.Pool().Query(context.Background(), "SELECT scope, id, value FROM "+idx.Schema()+".vectors ORDER BY scope, id")
	require.NoError(t, err)
	defer rows.Close()
	var out []indexRow
	for rows.Next() {
		var r indexRow
		var v []byte
		require.NoError(t, rows.Scan(&r.scope, &r.id, &v))
		r.value = string(v)
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestADigestKeyKeysTheIndexEntries: with settings.digest_key_env, an entry
// of the index holds no plain digest of a tool call's arguments (its
// normalised arguments' digest, its id) nor of a chat request (its
// partition, its id): each is keyed, so a reader of the index cannot test
// guessed PINs or prompts. The entries still serve hits. A policy without
// the key writes the plain forms, which the keyed one does not read (a
// miss: the call runs once more and is cached again).
func TestADigestKeyKeysTheIndexEntries(t *testing.T) {
	run := func(t *testing.T, keyed bool, idx *postgres.Store) {
		chats := rt.NewModel(rt.Response{Deltas: []string{"a"}}, rt.Response{Deltas: []string{"b"}})
		search := rt.NewTool(rt.ToolResult{Value: "first"}, rt.ToolResult{Value: "second"})
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("semantic_memoize", `{"index": "vec"}`)},
			Tool: []plan.Layer{rt.Layer("semantic_memoize", `{"index": "vec"}`)}})
		p.Tools = map[string]plan.Tool{"search": {}}
		if keyed {
			p.Settings.DigestKeyEnv = digestKeyEnv
		}
		pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": chats}, Embedder: fixedEmbedder{},
			Tools: map[string]runtime.ToolFunc{"search": search.Func()}, Indexes: map[string]runtime.VectorIndex{"vec": idx}})
		req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "my PIN is 4821"}}}
		for range 2 {
			text, _, err := rt.Collect(ctx1, pl, req, 0)
			require.NoError(t, err)
			assert.Equal(t, "a", text)
			r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "search", Args: map[string]any{"pin": "4821"}})
			require.NoError(t, err)
			assert.Equal(t, "first", r.Value)
		}
		assert.Equal(t, 1, chats.Calls(), "the second request is a hit")
		assert.Equal(t, 1, search.Calls(), "the second call is a hit")
	}
	t.Setenv(digestKeyEnv, digestKey)
	plainIdx, keyedIdx := storetest.Postgres(t), storetest.Postgres(t)
	run(t, false, plainIdx)
	run(t, true, keyedIdx)
	plain, keyed := indexRows(t, plainIdx), indexRows(t, keyedIdx)
	require.Len(t, plain, 2)
	require.Len(t, keyed, 2)

	args := map[string]any{"pin": "4821"}
	argsJSON, err := json.Marshal(args)
	require.NoError(t, err)
	plainArgs, err := semanticmemoize.NormalizedArgsDigest(runtime.Digester{}, args)
	require.NoError(t, err)
	sum := sha256.Sum256(argsJSON)
	leaks := []string{plainArgs, hex.EncodeToString(sum[:])}
	for _, r := range plain {
		leaks = append(leaks, r.id)
		// The chat partition's last part is the plain digest of the request.
		if i := strings.LastIndex(r.scope, `/"`); strings.Contains(r.scope, `"chat"`) && i >= 0 {
			leaks = append(leaks, strings.Trim(r.scope[i+1:], `"`))
		}
	}
	require.Len(t, leaks, 5)
	for _, r := range keyed {
		for _, l := range leaks {
			assert.NotContains(t, r.scope, l)
			assert.NotContains(t, r.id, l)
			assert.NotContains(t, r.value, l)
		}
	}
	d, err := runtime.NewDigester([]byte(digestKey))
	require.NoError(t, err)
	want, err := semanticmemoize.NormalizedArgsDigest(d, args)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(want, runtime.KeyedDigestPrefix))
	var found bool
	for _, r := range keyed {
		found = found || strings.Contains(r.value, `"args":"`+want+`"`)
	}
	assert.True(t, found, "an auditor with the key matches the tool entry: %v", keyed)

	// The plain entries of before are not read with the key: each call
	// runs once more (run counts one call of each) and is cached keyed.
	run(t, true, plainIdx)
	assert.Len(t, indexRows(t, plainIdx), 4)
}
