package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

const callKeyEnv = "AGENTC_TEST_CALL_KEY_DIGEST"

// keyedCallKey is the key of the record of a call with the digest key
// testDigestKey: its arguments' digest is keyed.
func keyedCallKey(t *testing.T, at int, u runtime.ToolUse) string {
	d, err := runtime.NewDigester([]byte(testDigestKey))
	require.NoError(t, err)
	args, err := json.Marshal(u.Arguments)
	require.NoError(t, err)
	sum := strings.TrimPrefix(d.Sum(args), runtime.KeyedDigestPrefix)
	plain := callKey(at, u)
	return plain[:strings.LastIndex(plain, ":")+1] + runtime.KeyedDigestPrefix + sum[:16]
}

// The key a run's records name an agent turn's tool call by (ToolRecord.Call,
// CallIntent.Calls) held the first 16 hex digits of the plain SHA-256 of
// its arguments with settings.digest_key_env set too: anyone reading a
// checkpoint recovered a PIN from it by digesting the 10,000 candidates.
// With a key it is keyed now, "1:u1:hmac-sha256:HEX".
func TestTheRecordKeyOfACallIsKeyedWithADigestKey(t *testing.T) {
	t.Setenv(callKeyEnv, testDigestKey)
	unlock := use("u1", "unlock", `{"pin":"4821"}`)
	model := rt.NewModel(callTools(unlock), rt.Response{Deltas: []string{"unlocked"}})
	store := runtime.NewMemoryCheckpoints()
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool":true,"keep":0}`)}})
	p.Tools = map[string]plan.Tool{"unlock": {SideEffecting: true}}
	p.Settings.DigestKeyEnv = callKeyEnv
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
		Tools: map[string]runtime.ToolFunc{"unlock": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil }}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "door"})
	_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "open the door"})
	require.NoError(t, err)

	want := keyedCallKey(t, 1, unlock)
	versions, err := store.CheckpointVersions(context.Background(), "door")
	require.NoError(t, err)
	var calls []string
	for _, v := range versions {
		cp, _, err := store.CheckpointAt(context.Background(), "door", v)
		require.NoError(t, err)
		b, err := json.Marshal(cp)
		require.NoError(t, err)
		assert.NotContains(t, string(b), callKey(1, unlock), "version %d holds no plain digest of the arguments", v)
		if cp.Calls != nil {
			calls = cp.Calls.Calls
		}
	}
	assert.Equal(t, []string{want}, calls, "the calls recorded")
	cp, _, err := store.LatestCheckpoint(context.Background(), "door")
	require.NoError(t, err)
	require.Len(t, cp.Tools, 1)
	assert.Equal(t, want, cp.Tools[0].Call, "the call's record")
}

// A run saved before the digest key was set names its calls by their plain
// keys: resumed with the key, a call is still answered from its record,
// and one whose tool ran an agent turn that started a call that would
// repeat an effect (CallIntent.Delegated) is still in doubt, as before.
func TestARunSavedBeforeTheDigestKeyResumes(t *testing.T) {
	t.Setenv(callKeyEnv, testDigestKey)
	refund, lookup := use("r1", "refund", `{"order":7}`), use("l1", "lookup", `{"order":7}`)
	for _, tc := range []struct {
		name    string
		cp      runtime.Checkpoint
		inDoubt string
	}{
		{name: "record", cp: runtime.Checkpoint{
			Transcript: []runtime.Message{{Role: "user", Content: "refund order 7"}, {Role: "assistant", ToolCalls: []runtime.ToolUse{refund}}},
			Tools:      []runtime.ToolRecord{{Tool: "refund", Call: callKey(1, refund), Result: map[string]any{"refunded": 7.0}}}}},
		{name: "delegated", inDoubt: "lookup", cp: runtime.Checkpoint{
			Transcript: []runtime.Message{{Role: "user", Content: "look order 7 up"}, {Role: "assistant", ToolCalls: []runtime.ToolUse{lookup}}},
			Calls: &runtime.CallIntent{Calls: []string{callKey(1, lookup)},
				Delegated: map[string][]runtime.DelegatedCall{callKey(1, lookup): {{Tool: "refund", Call: callKey(1, lookup) + "/1:r9:0123456789abcdef"}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := runtime.NewMemoryCheckpoints()
			tc.cp.RunID, tc.cp.Status = "r", runtime.RunRunning
			_, err := store.SaveCheckpoint(context.Background(), tc.cp)
			require.NoError(t, err)
			var runs atomic.Int32
			counted := func(_ context.Context, c *runtime.ToolCall) (any, error) { runs.Add(1); return c.Name + " ok", nil }
			p := rt.Plan(plan.Chains{})
			p.Tools = map[string]plan.Tool{"lookup": {}, "refund": {SideEffecting: true}}
			p.Settings.DigestKeyEnv = callKeyEnv
			model := rt.NewModel(rt.Response{Deltas: []string{"done"}})
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
				Tools: map[string]runtime.ToolFunc{"lookup": counted, "refund": counted}})
			cp, err := pl.Checkpointer("")
			require.NoError(t, err)
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
			_, err = cp.Resume(ctx, "r")
			require.NoError(t, err)

			res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
			assert.Zero(t, runs.Load(), "no call runs again")
			if tc.inDoubt != "" {
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt)
				assert.Equal(t, tc.inDoubt, doubt.Tool)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "done", res.Output)
			sent := model.Requests()[0].Messages
			assert.Equal(t, `{"refunded":7}`, sent[len(sent)-1].Parts[0].Text, "answered from its record")
		})
	}
}
