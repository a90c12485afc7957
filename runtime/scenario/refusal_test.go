package scenario_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// A model item may script a refusal: its text streams as one delta marked
// a refusal (runtime.Delta.Refusal), ending with content_filter unless the
// item says otherwise, and a chat step reports that what it received was
// one.
func TestModelItemRefusal(t *testing.T) {
	res, got := run(t, planWith(plan.Chains{}), `{
		"models": {"primary": [{"refusal": "I can't help with that"}, {"refusal": "No.", "finish_reason": "stop"}, {"text": "Sure."}]},
		"steps": [{"chat": {"model": "primary"}}, {"chat": {"model": "primary"}}, {"chat": {"model": "primary"}}]}`, scenario.Options{})
	require.Len(t, res.Steps, 3)
	want := []map[string]any{
		{"outcome": "ok", "text": "I can't help with that", "refusal": true, "finish_reason": "content_filter"},
		{"outcome": "ok", "text": "No.", "refusal": true, "finish_reason": "stop"},
		{"outcome": "ok", "text": "Sure."},
	}
	steps := got.(map[string]any)["steps"].([]any)
	for i, w := range want {
		require.NoError(t, subset("steps", w, steps[i]))
	}
	_, marked := steps[2].(map[string]any)["refusal"]
	assert.False(t, marked, "an answer is not a refusal")
}

func TestModelItemRefusalErrors(t *testing.T) {
	for name, tt := range map[string]struct{ scen, want string }{
		"with text":       {`{"models": {"m": [{"refusal": "no", "text": "a"}]}, "steps": [{"chat": {}}]}`, "models.m[0]: refusal excludes text, deltas and tool_calls"},
		"with deltas":     {`{"models": {"m": [{"refusal": "no", "deltas": ["a"]}]}, "steps": [{"chat": {}}]}`, "models.m[0]: refusal excludes text, deltas and tool_calls"},
		"with tool calls": {`{"models": {"m": [{"refusal": "no", "tool_calls": [{"name": "t"}]}]}, "steps": [{"chat": {}}]}`, "models.m[0]: refusal excludes text, deltas and tool_calls"},
		"empty":           {`{"models": {"m": [{"refusal": ""}]}, "steps": [{"chat": {}}]}`, "models.m[0]: one of text, deltas, refusal, tool_calls or error is required"},
		"error alone":     {`{"models": {"m": [{"refusal": "no", "error": "transient"}]}, "steps": [{"chat": {}}]}`, "models.m[0]: error with text, deltas, refusal or tool_calls needs fail_after"},
		"past its delta":  {`{"models": {"m": [{"refusal": "no", "fail_after": 2}]}, "steps": [{"chat": {}}]}`, "fail_after 2 is past the 1 deltas"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := scenario.Parse([]byte(tt.scen))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
