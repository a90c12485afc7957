package predicate_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/predicate"
)

func TestStateStageTyping(t *testing.T) {
	value := json.RawMessage(`{"type": "integer"}`)
	state := json.RawMessage(`{"type": "object", "properties": {"bonus": {"type": "integer"}, "name": {"type": "string"}}}`)
	for _, tc := range []struct {
		name, src string
		value     bool
		wantRule  string
	}{
		{"deny reads typed value", "value > 3", false, ""},
		{"deny reads a field with has", "has(state.bonus) && value > state.bonus", false, ""},
		{"unknown state field", "state.bonsu > 1", false, predicate.RuleType},
		{"optional field without has", "state.bonus > 1", false, predicate.RuleType},
		{"value of the field's type", "value * 2", true, ""},
		{"value of another type", "'x'", true, predicate.RuleType},
		{"deny must be bool", "value", false, predicate.RuleNotBool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := predicate.NewEnv(predicate.EnvConfig{Stage: predicate.State, ValueSchema: value, StateSchema: state, Value: tc.value})
			require.NoError(t, err)
			_, iss := env.Check(tc.src)
			if tc.wantRule == "" {
				assert.Empty(t, iss)
				return
			}
			require.NotEmpty(t, iss)
			assert.Equal(t, tc.wantRule, iss[0].Rule)
		})
	}
	_, err := predicate.NewEnv(predicate.EnvConfig{Stage: predicate.Tool, ValueSchema: value})
	assert.ErrorContains(t, err, "state stage only")
}

func TestStateEvalValue(t *testing.T) {
	prog, err := predicate.CompileSpec(predicate.Spec{Stage: predicate.State, Source: "value * 2 + (has(state.bonus) ? state.bonus : 0)",
		ValueSchema: json.RawMessage(`{"type": "integer"}`),
		StateSchema: json.RawMessage(`{"type": "object", "properties": {"bonus": {"type": "integer"}}}`), Value: true})
	require.NoError(t, err)
	vars, err := prog.StateActivation(predicate.RunInfo{ID: "r"}, "n", 5.0, map[string]any{"bonus": 3.0})
	require.NoError(t, err)
	v, err := prog.EvalValue(context.Background(), vars)
	require.NoError(t, err)
	assert.Equal(t, 13.0, v)
	_, err = prog.StateActivation(predicate.RunInfo{}, "n", "five", nil)
	assert.Error(t, err, "a value of another type than the schema's is refused")

	obj, err := predicate.CompileSpec(predicate.Spec{Stage: predicate.State, Source: `{"a": [value, "x"]}`, Value: true})
	require.NoError(t, err)
	vars, _ = obj.StateActivation(predicate.RunInfo{}, "n", "v", nil)
	v, err = obj.EvalValue(context.Background(), vars)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"a": []any{"v", "x"}}, v)
}
