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

// A run saved with one digest key and resumed with another: the call's
// name in the checkpoint holds a digest under the key of before, which
// the resumed turn took for no name of the call at all, so a retry_safe
// call ran again under the idempotency key derived from the new key's
// digest, new to its tool: the charge was made twice. It is in doubt, as
// once the key is removed.
func TestAResumedRetrySafeCallIsInDoubtOnceTheDigestKeyIsChanged(t *testing.T) {
	t.Setenv(callKeyEnv, testDigestKey)
	cp, _ := keyForm(t, true)
	t.Setenv(callKeyEnv, "another-digest-key-for-the-resumed-run-0123456789")
	err, keys := resumeKeyForm(t, cp, true)
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	assert.Equal(t, runtime.InDoubtKeyFormChanged, doubt.Reason)
	assert.Empty(t, keys, "the call does not run")
}

// A call in doubt because the run recorded it under a digest key the
// pipeline no longer has named the key derived from the plain digest of
// its arguments, which its first execution never got, and said its tool
// was not retry_safe, also of a tool that is: a person reconciling by it
// found nothing and looked for the wrong cause. The error says the key
// form changed, names the call as the run recorded it and no idempotency
// key, which cannot be derived again, whether the call has a record or
// not and whatever its tool.
func TestAResumedCallInDoubtAfterTheDigestKeyWasRemovedSaysWhy(t *testing.T) {
	t.Setenv(callKeyEnv, testDigestKey)
	charge := use("c1", "charge", `{"order":7,"amount":12}`)
	for _, tc := range []struct {
		name   string
		tool   plan.Tool
		record bool
	}{
		{"retry_safe", plan.Tool{SideEffecting: true, RetrySafe: true}, false},
		{"not retry_safe", plan.Tool{SideEffecting: true}, false},
		{"retry_safe with a record", plan.Tool{SideEffecting: true, RetrySafe: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp, _ := keyFormOf(t, true, tc.tool)
			if tc.record {
				cp.Tools = []runtime.ToolRecord{{Tool: "charge", Call: keyedCallKey(t, 1, charge), Result: "charged"}}
			}
			err, keys := resumeKeyFormOf(t, cp, false, tc.tool)
			var doubt *runtime.InDoubtError
			require.ErrorAs(t, err, &doubt)
			assert.Empty(t, keys, "the call does not run")
			assert.Equal(t, runtime.InDoubtKeyFormChanged, doubt.Reason)
			assert.Equal(t, keyedCallKey(t, 1, charge), doubt.Call, "the call as the run recorded it")
			assert.Empty(t, doubt.IdempotencyKey, "the key of the first execution cannot be derived again")
			msg := err.Error()
			assert.Contains(t, msg, keyedCallKey(t, 1, charge))
			assert.Contains(t, msg, "settings.digest_key_env")
			assert.NotContains(t, msg, "not retry_safe")
			assert.NotContains(t, msg, "stopped before recording its outcome")
		})
	}
}

// sharedID returns cp with a second call of charge under the id of its
// call, c1, of other arguments, and a result answering c1: which of the
// two it answers is not known, so the turn ends before anything runs,
// each call that may have run in doubt.
func sharedID(cp runtime.Checkpoint) runtime.Checkpoint {
	last := &cp.Transcript[len(cp.Transcript)-1]
	last.ToolCalls = append(last.ToolCalls, use("c1", "charge", `{"order":8,"amount":3}`))
	cp.Transcript = append(cp.Transcript, runtime.Message{Role: "tool", ToolCallID: "c1", Content: "charged"})
	return cp
}

// inDoubtErrors returns every *InDoubtError of err's tree.
func inDoubtErrors(err error) []*runtime.InDoubtError {
	var out []*runtime.InDoubtError
	var walk func(error)
	walk = func(err error) {
		if d, ok := err.(*runtime.InDoubtError); ok {
			out = append(out, d)
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// A resumed turn whose calls share an id and are answered in part ends
// before anything runs, each call that may have run in doubt. Those
// errors were made without reading how the run recorded the calls: across
// a switch to a digest key, the call in doubt named the key derived from
// its keyed digest, not the one its tool got; across the key's removal, a
// retry_safe call the run recorded with it, whose key cannot be derived
// again, was not in doubt at all. They are as the settled calls' are.
func TestCallsSharingAnIdAreInDoubtAsRecordedAcrossTheSwitch(t *testing.T) {
	t.Setenv(callKeyEnv, testDigestKey)
	charge := use("c1", "charge", `{"order":7,"amount":12}`)
	t.Run("digest key set", func(t *testing.T) {
		refund := plan.Tool{SideEffecting: true}
		cp, first := keyFormOf(t, false, refund)
		err, keys := resumeKeyFormOf(t, sharedID(cp), true, refund)
		require.ErrorIs(t, err, runtime.ErrUnansweredToolCall)
		assert.Empty(t, keys, "no call runs")
		var named []string
		for _, d := range inDoubtErrors(err) {
			named = append(named, d.IdempotencyKey)
		}
		assert.Len(t, named, 2, "both calls are in doubt")
		assert.Contains(t, named, first, "the recorded call names the key its first execution got")
	})
	t.Run("digest key removed", func(t *testing.T) {
		cp, _ := keyForm(t, true)
		err, keys := resumeKeyForm(t, sharedID(cp), false)
		require.ErrorIs(t, err, runtime.ErrUnansweredToolCall)
		assert.Empty(t, keys, "no call runs")
		// The other call, of the same place and id, may be the one the
		// run recorded so: it is in doubt for the same reason.
		doubts := inDoubtErrors(err)
		require.NotEmpty(t, doubts, "the recorded retry_safe call is in doubt")
		for _, d := range doubts {
			assert.Equal(t, runtime.InDoubtKeyFormChanged, d.Reason)
			assert.Equal(t, keyedCallKey(t, 1, charge), d.Call)
		}
	})
}

// Calls sharing an id and answered in part end the turn before anything
// runs, each that may have run in doubt. A retry_safe call the run
// recorded in doubt, or whose tool ran an agent turn that started a
// payment, was read as one without a record, which may run again, and
// left out: the error hid the doubt the settled call would have had. It
// is in doubt as the run recorded it.
func TestCallsSharingAnIdAreInDoubtWhenRecordedInDoubtOrDelegated(t *testing.T) {
	charge := use("c1", "charge", `{"order":7,"amount":12}`)
	for _, tc := range []struct {
		name   string
		cp     func(runtime.Checkpoint) runtime.Checkpoint
		reason runtime.InDoubtReason
		says   string
	}{
		{"recorded in doubt", func(cp runtime.Checkpoint) runtime.Checkpoint {
			cp.Tools = []runtime.ToolRecord{{Tool: "charge", Call: callKey(1, charge), InDoubt: true, Error: "in doubt"}}
			return cp
		}, runtime.InDoubtRecorded, "recorded it in doubt"},
		{"delegated", func(cp runtime.Checkpoint) runtime.Checkpoint {
			cp.Calls.Delegated = map[string][]runtime.DelegatedCall{callKey(1, charge): {{Tool: "pay", Call: callKey(1, charge) + "/1:p1:0123456789abcdef"}}}
			return cp
		}, runtime.InDoubtDelegated, "pay (" + callKey(1, charge) + "/1:p1:0123456789abcdef)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp, _ := keyForm(t, false)
			err, keys := resumeKeyForm(t, tc.cp(sharedID(cp)), false)
			require.ErrorIs(t, err, runtime.ErrUnansweredToolCall)
			assert.Empty(t, keys, "no call runs")
			doubts := inDoubtErrors(err)
			require.Len(t, doubts, 1, "the call the run recorded so is in doubt")
			assert.Equal(t, tc.reason, doubts[0].Reason)
			assert.NotEmpty(t, doubts[0].IdempotencyKey)
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// edited returns cp with the arguments of its call, c1, replaced (a host
// edited the transcript), and, when also, a second call of charge, c2,
// that the run recorded under its name, keyed with the digest key.
func edited(t *testing.T, cp runtime.Checkpoint, also bool) runtime.Checkpoint {
	last := &cp.Transcript[len(cp.Transcript)-1]
	last.ToolCalls[0].Arguments = []byte(`{"order":7,"amount":13}`)
	if also {
		c2 := use("c2", "charge", `{"order":8,"amount":3}`)
		last.ToolCalls = append(last.ToolCalls, c2)
		cp.Calls.Calls = append(cp.Calls.Calls, keyedCallKey(t, 1, c2))
	}
	return cp
}

// A run saved with the digest key and resumed with the same one, the
// call's arguments edited in between: the run's name of the call, keyed
// with the key, differs from the one the pipeline gives it now, which was
// read as a digest key changed since, and the call was in doubt, saying
// so. When another call of the message is named as it was recorded, the
// key is the same: the edited call is one the run did not record, and a
// retry_safe one runs, as it does without a digest key. Otherwise which
// of the two changed cannot be told: in doubt, its error saying either
// may have.
func TestAResumedCallWhoseArgumentsWereEditedIsNotTakenForAChangedKey(t *testing.T) {
	t.Setenv(callKeyEnv, testDigestKey)
	t.Run("the key shown the same", func(t *testing.T) {
		cp, _ := keyForm(t, true)
		err, keys := resumeKeyForm(t, edited(t, cp, true), true)
		require.NoError(t, err)
		assert.Len(t, keys, 2, "both calls run: neither was recorded as the transcript has it")
	})
	t.Run("the key not shown", func(t *testing.T) {
		cp, _ := keyForm(t, true)
		err, keys := resumeKeyForm(t, edited(t, cp, false), true)
		var doubt *runtime.InDoubtError
		require.ErrorAs(t, err, &doubt)
		assert.Empty(t, keys, "the call does not run")
		assert.Equal(t, runtime.InDoubtKeyFormChanged, doubt.Reason)
		assert.Contains(t, err.Error(), "or its arguments were edited")
	})
	t.Run("without a digest key", func(t *testing.T) {
		cp, _ := keyForm(t, false)
		err, keys := resumeKeyForm(t, edited(t, cp, false), false)
		require.NoError(t, err)
		assert.Len(t, keys, 1, "the edited call runs")
	})
}

// A read-only call the run recorded under a digest key the pipeline no
// longer has runs again, its key form aside: its tool is free of effect.
// But one whose tool ran an agent turn that started a payment, or that
// the run recorded in doubt, was looked up under its name now, which
// holds neither, and ran again: the agent turn anew, whose model could
// make the payment again. It is in doubt, as under its name of before.
func TestAResumedReadOnlyCallThatDelegatedIsInDoubtAcrossTheDigestKey(t *testing.T) {
	t.Setenv(callKeyEnv, testDigestKey)
	lookup := plan.Tool{}
	charge := use("c1", "charge", `{"order":7,"amount":12}`)
	for _, tc := range []struct {
		name   string
		cp     func(runtime.Checkpoint) runtime.Checkpoint
		reason runtime.InDoubtReason
		says   string
	}{
		{"delegated", func(cp runtime.Checkpoint) runtime.Checkpoint {
			name := keyedCallKey(t, 1, charge)
			cp.Calls.Delegated = map[string][]runtime.DelegatedCall{name: {{Tool: "pay", Call: name + "/1:p1:hmac-sha256:0123456789abcdef"}}}
			return cp
		}, runtime.InDoubtDelegated, "pay (" + keyedCallKey(t, 1, charge) + "/1:p1:hmac-sha256:0123456789abcdef)"},
		{"recorded in doubt", func(cp runtime.Checkpoint) runtime.Checkpoint {
			cp.Tools = []runtime.ToolRecord{{Tool: "charge", Call: keyedCallKey(t, 1, charge), InDoubt: true, Error: "in doubt"}}
			return cp
		}, runtime.InDoubtRecorded, "recorded it in doubt"},
	} {
		for _, resumed := range []string{"removed", "changed"} {
			t.Run(tc.name+"/"+resumed, func(t *testing.T) {
				cp, _ := keyFormOf(t, true, lookup)
				keyed := resumed == "changed"
				if keyed {
					t.Setenv(callKeyEnv, "another-digest-key-for-the-resumed-run-0123456789")
				}
				err, keys := resumeKeyFormOf(t, tc.cp(cp), keyed, lookup)
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt)
				assert.Empty(t, keys, "the call does not run again")
				assert.Equal(t, tc.reason, doubt.Reason)
				assert.Equal(t, keyedCallKey(t, 1, charge), doubt.Call, "the call as the run recorded it")
				assert.Empty(t, doubt.IdempotencyKey, "the key of the first execution cannot be derived again")
				assert.Contains(t, err.Error(), tc.says)
				assert.Contains(t, err.Error(), keyedCallKey(t, 1, charge))
			})
		}
	}
}
