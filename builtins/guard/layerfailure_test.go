package guard_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/outputcoerce"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// coercedGuard builds a pipeline whose tool "lookup" (its result_schema a
// status of "ok" or "pending") answers value, behind an after-phase guard
// denying deny with an output_coerce inside it.
func coercedGuard(t *testing.T, deny string, value any) error {
	t.Helper()
	_, err := callTool(t, []plan.Layer{
		rt.Named("res_check", rt.Layer("guard", `{"deny":"`+deny+`","phase":"after"}`)),
		rt.Layer("output_coerce", `{}`),
	}, "lookup", `{"type":"object","required":["status"],"properties":{"status":{"type":"string","enum":["ok","pending"]}}}`,
		rt.ToolResult{Value: value})
	return err
}

// TestAfterGuardKeepsALayersFailure: a result output_coerce inside the
// guard refuses fails the call with its diagnostics. The failure is the
// layer's, not an answer of the tool: a read of a field of its text,
// which is no result, fails, and the guard returned a block saying only
// "no such key: status", the diagnostics lost. The failure is returned as
// it is (the call still fails, not retried), while a rule that holds on
// its text still blocks, as on any text the model reads.
func TestAfterGuardKeepsALayersFailure(t *testing.T) {
	err := coercedGuard(t, "result.status == 'pending'", map[string]any{"status": "weird"})
	var re *outputcoerce.ResultError
	require.ErrorAs(t, err, &re, "%v", err)
	var b *runtime.BlockedError
	assert.False(t, errors.As(err, &b), "no block hides it: %v", err)
	assert.Equal(t, "permanent", runtime.KindOf(err))
	assert.Contains(t, err.Error(), "does not match its result_schema")
	assert.Contains(t, err.Error(), "/status")
	assert.NotContains(t, err.Error(), "no such key")

	err = coercedGuard(t, "result.contains('result_schema')", map[string]any{"status": "weird"})
	require.ErrorAs(t, err, &b, "%v", err)
	assert.Equal(t, "res_check", b.Layer)
	assert.NoError(t, b.Err, "the rule held on the text")

	err = coercedGuard(t, "result.status == 'pending'", map[string]any{"status": "pending"})
	require.ErrorAs(t, err, &b, "a valid result is read as before: %v", err)
	assert.NoError(t, b.Err)
}
