package runtime_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// keyForm runs a turn whose model makes one call of the retry_safe tool
// charge, on a pipeline with the digest key or without (keyed), and
// returns the checkpoint saved once the call was recorded, before it ran
// (a crash then), and the idempotency key the tool got.
func keyForm(t *testing.T, keyed bool) (runtime.Checkpoint, string) {
	t.Helper()
	return keyFormOf(t, keyed, plan.Tool{SideEffecting: true, RetrySafe: true})
}

// keyFormOf is keyForm with charge declared as tool.
func keyFormOf(t *testing.T, keyed bool, tool plan.Tool) (runtime.Checkpoint, string) {
	t.Helper()
	charge := use("c1", "charge", `{"order":7,"amount":12}`)
	model := rt.NewModel(callTools(charge), rt.Response{Deltas: []string{"charged"}})
	store := runtime.NewMemoryCheckpoints()
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool":true,"keep":0}`)}})
	p.Tools = map[string]plan.Tool{"charge": tool}
	if keyed {
		p.Settings.DigestKeyEnv = callKeyEnv
	}
	var key string
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
		Tools: map[string]runtime.ToolFunc{"charge": func(_ context.Context, c *runtime.ToolCall) (any, error) {
			key = c.IdempotencyKey()
			return "charged", nil
		}}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "pay"})
	_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "charge order 7"})
	require.NoError(t, err)
	require.NotEmpty(t, key)
	versions, err := store.CheckpointVersions(context.Background(), "pay")
	require.NoError(t, err)
	for _, v := range versions {
		cp, _, err := store.CheckpointAt(context.Background(), "pay", v)
		require.NoError(t, err)
		if cp.Calls != nil && len(cp.Tools) == 0 {
			cp.Version = 0
			return cp, key
		}
	}
	require.FailNow(t, "no checkpoint holds the call before it ran")
	return runtime.Checkpoint{}, ""
}

// resumeKeyForm resumes cp on a pipeline with the digest key or without
// (keyed) and returns the turn's error and the idempotency keys the
// charge tool got.
func resumeKeyForm(t *testing.T, cp runtime.Checkpoint, keyed bool) (error, []string) {
	t.Helper()
	return resumeKeyFormOf(t, cp, keyed, plan.Tool{SideEffecting: true, RetrySafe: true})
}

// resumeKeyFormOf is resumeKeyForm with charge declared as tool.
func resumeKeyFormOf(t *testing.T, cp runtime.Checkpoint, keyed bool, tool plan.Tool) (error, []string) {
	t.Helper()
	store := runtime.NewMemoryCheckpoints()
	_, err := store.SaveCheckpoint(context.Background(), cp)
	require.NoError(t, err)
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{"charge": tool}
	if keyed {
		p.Settings.DigestKeyEnv = callKeyEnv
	}
	var mu sync.Mutex
	var keys []string
	var runs atomic.Int32
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"charged"}})},
		Checkpoints: store,
		Tools: map[string]runtime.ToolFunc{"charge": func(_ context.Context, c *runtime.ToolCall) (any, error) {
			runs.Add(1)
			mu.Lock()
			keys = append(keys, c.IdempotencyKey())
			mu.Unlock()
			return "charged", nil
		}}})
	cpr, err := pl.Checkpointer("")
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "pay"})
	_, err = cpr.Resume(ctx, "pay")
	require.NoError(t, err)
	_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
	require.Equal(t, int32(len(keys)), runs.Load())
	return err, keys
}

// A run saved without the digest key and resumed once the deployment set
// it ran its retry_safe call again under the key derived from the keyed
// digest of its arguments: another key than the first execution's, so the
// tool took it for another call and charged twice. The resumed call gets
// the key of its first execution, which the checkpoint's name of the call
// (plain: no hmac-sha256) tells.
func TestAResumedRetrySafeCallKeepsItsPlainKeyAfterTheDigestKeyIsSet(t *testing.T) {
	t.Setenv(callKeyEnv, testDigestKey)
	cp, first := keyForm(t, false)
	err, keys := resumeKeyForm(t, cp, true)
	require.NoError(t, err)
	assert.Equal(t, []string{first}, keys, "the resumed call has its first execution's idempotency key")
}

// A run saved with the digest key and resumed without it: the key derived
// from the keyed digest cannot be made again, so a retry_safe call
// without a record is in doubt rather than run under another key.
func TestAResumedRetrySafeCallIsInDoubtOnceTheDigestKeyIsRemoved(t *testing.T) {
	t.Setenv(callKeyEnv, testDigestKey)
	cp, _ := keyForm(t, true)
	err, keys := resumeKeyForm(t, cp, false)
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	assert.Equal(t, "charge", doubt.Tool)
	assert.Empty(t, keys, "the call does not run")
}

// Resumed as it was saved, with the key or without, the call keeps its
// key.
func TestAResumedRetrySafeCallKeepsItsKey(t *testing.T) {
	t.Setenv(callKeyEnv, testDigestKey)
	for _, keyed := range []bool{false, true} {
		cp, first := keyForm(t, keyed)
		err, keys := resumeKeyForm(t, cp, keyed)
		require.NoError(t, err)
		assert.Equal(t, []string{first}, keys, "keyed %v", keyed)
	}
}

// A side-effecting call without a record, of a run saved before the
// digest key was set, is in doubt when resumed with it: its error named
// the key derived from the keyed digest of its arguments, which its tool
// never got, so a person reconciling by it found nothing. It names the
// key the call ran with, derived from the plain digest.
func TestAResumedCallInDoubtNamesThePlainKeyItsToolGot(t *testing.T) {
	t.Setenv(callKeyEnv, testDigestKey)
	refund := plan.Tool{SideEffecting: true}
	cp, first := keyFormOf(t, false, refund)
	err, keys := resumeKeyFormOf(t, cp, true, refund)
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	assert.Equal(t, "charge", doubt.Tool)
	assert.Equal(t, first, doubt.IdempotencyKey, "the key its first execution got")
	assert.Empty(t, keys, "the call does not run")
}
