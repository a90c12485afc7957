package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestStateUncompared: a layer StateChanges cannot read the keys of, its
// middleware not registered in the program or its config not decoding
// (a baseline plan another build wrote), is named, once, with why; a
// layer that keeps no state, or reads, is not.
func TestStateUncompared(t *testing.T) {
	old := resetPlan(toolChain(
		rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"],"retired_field":1}`),
		rt.Layer("log", ""),
		rt.Named("mine", rt.Layer("not_registered_here", `{}`)),
		rt.Named("gone", rt.Layer("also_not_registered", `{}`))))
	next := resetPlan(toolChain(
		rt.Layer("idempotent", `{"store":"shared","key_args":["order_id","amount"]}`),
		rt.Layer("log", ""),
		rt.Named("mine", rt.Layer("not_registered_here", `{}`))))
	assert.Empty(t, runtime.StateChanges(old, next), "what cannot be read is not compared")
	us := runtime.StateUncompared(old, next)
	require.Len(t, us, 3)
	assert.Equal(t, "mine", us[0].Layer)
	assert.False(t, us[0].Baseline, "reported once, at the new version's")
	assert.Contains(t, us[0].Message(), `mine (not_registered_here) could not be compared: middleware "not_registered_here" is not registered in this program`)
	assert.Equal(t, "idempotent", us[1].Layer)
	assert.True(t, us[1].Baseline)
	assert.Contains(t, us[1].Message(), `the state of idempotent in the baseline could not be compared: its config does not decode`)
	assert.Contains(t, us[1].Message(), "retired_field")
	assert.Equal(t, "gone", us[2].Layer)
	assert.True(t, us[2].Baseline)

	read := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`), rt.Layer("log", "")))
	assert.Empty(t, runtime.StateUncompared(read, read), "layers read in both versions")
}
