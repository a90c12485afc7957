package idempotent_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// A resumed turn that no longer offers the tool of a call that may have
// run (its host resumed it with other Params.Tools) must not tell the
// model the call did not run: it may have. The turn ends in doubt, and
// nothing runs.
func TestResumedCallOfAToolNoLongerOffered(t *testing.T) {
	layer := rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "300ms"}`)
	shared := storeOf(t, "redis")
	cp := intentCheckpoint(t, shared)
	var refunds atomic.Int64
	_, err := newResumeWorker(t, cp, shared, layer, &refunds).resume(t)
	require.NoError(t, err)
	require.EqualValues(t, 1, refunds.Load())

	w := newResumeWorker(t, cp, shared, layer, &refunds)
	c, err := w.pl.Checkpointer("")
	require.NoError(t, err)
	_, err = c.Resume(ctx1, "run-1")
	require.NoError(t, err)
	_, err = w.pl.RunAgent(ctx1, runtime.AgentRequest{Model: "primary", Messages: w.pl.Transcript(ctx1),
		Params: runtime.ChatRequest{Tools: []runtime.ToolDef{{Name: "other"}}}})
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	assert.False(t, runtime.DidNotRun(err), "nothing ran now, but the refund ran before")
	assert.EqualValues(t, 1, refunds.Load())
	assert.Zero(t, w.model.Calls(), "the model is not told the refund did not run")
}
