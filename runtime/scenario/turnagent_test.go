package scenario_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// TestTurnStepRefusalWithholdsItsAgentStepsText: a turn step around an
// agent step runs the turn chain around the agent's own. A refusal of the
// outer chain (its input differs) left the text it refused in the agent
// step's transcript and in the one a later step continues: the host shows
// both. It is withheld there, as the agent's own chain's refusal withholds
// it.
func TestTurnStepRefusalWithholdsItsAgentStepsText(t *testing.T) {
	p := planWith(plan.Chains{Turn: []plan.Layer{layer("guard", `{"deny":"input.text == \"outer\" && output.text.contains(\"acct 1234\")","phase":"after"}`)}})
	s, err := scenario.Parse([]byte(`{"models": {"primary": [{"text": "your acct 1234 is open"}, {"text": "anything else?"}]},
		"steps": [{"turn": {"input": "outer", "steps": [{"agent": {"model": "primary", "input": "inner"}}]}},
			{"agent": {"model": "primary", "continue": true, "input": "more"}}]}`))
	require.NoError(t, err)
	res, err := scenario.Run(context.Background(), p, s, scenario.Options{})
	require.NoError(t, err)
	require.Len(t, res.Steps, 2)
	assert.Equal(t, "blocked", res.Steps[0].Outcome)
	require.Len(t, res.Steps[0].Nested, 1)
	assert.Equal(t, "ok", res.Steps[0].Nested[0].Outcome, "the agent's own chain let it through")
	agent := res.Steps[0].Nested[0]
	assert.Nil(t, agent.Output)
	for _, msgs := range [][]runtime.Message{agent.Agent.Messages, res.Steps[1].Agent.Messages, res.Steps[1].Requests[0].Messages} {
		b, err := json.Marshal(msgs)
		require.NoError(t, err)
		assert.NotContains(t, string(b), "acct 1234")
	}
	assert.Equal(t, "anything else?", *res.Steps[1].Output)
}

// TestNestedTurnStepRefusalWithholdsItsAgentStepsText: the agent step of a
// turn step, or of a parallel step, nested in a turn step that the outer
// chain refuses kept its text in its messages, its output and the
// transcript a later step continues (and the nested turn step its output,
// the agent's): only the outer step's own agent steps were withheld. Every
// agent step under the refused turn step loses its text, at any depth.
func TestNestedTurnStepRefusalWithholdsItsAgentStepsText(t *testing.T) {
	p := planWith(plan.Chains{Turn: []plan.Layer{layer("guard", `{"deny":"input.text == \"outer\" && output.text.contains(\"acct 1234\")","phase":"after"}`)}})
	agentStep := `{"agent": {"model": "primary", "input": "inner"}}`
	for name, middle := range map[string]string{
		"turn":     `{"turn": {"input": "middle", "steps": [` + agentStep + `]}}`,
		"parallel": `{"parallel": [` + agentStep + `]}`,
	} {
		t.Run(name, func(t *testing.T) {
			s, err := scenario.Parse([]byte(`{"models": {"primary": [{"text": "your acct 1234 is open"}, {"text": "anything else?"}]},
				"steps": [{"turn": {"input": "outer", "steps": [` + middle + `]}},
					{"agent": {"model": "primary", "continue": true, "input": "more"}}]}`))
			require.NoError(t, err)
			res, err := scenario.Run(context.Background(), p, s, scenario.Options{})
			require.NoError(t, err)
			require.Len(t, res.Steps, 2)
			assert.Equal(t, "blocked", res.Steps[0].Outcome)
			require.Len(t, res.Steps[0].Nested, 1)
			middle := res.Steps[0].Nested[0]
			assert.Equal(t, "ok", middle.Outcome, "the middle step's own chain let it through")
			assert.Nil(t, middle.Output, "a nested turn step's output, the agent step's, is withheld too")
			require.Len(t, middle.Nested, 1)
			agent := middle.Nested[0]
			assert.Equal(t, "ok", agent.Outcome)
			assert.Nil(t, agent.Output)
			for _, msgs := range [][]runtime.Message{agent.Agent.Messages, res.Steps[1].Agent.Messages, res.Steps[1].Requests[0].Messages} {
				b, err := json.Marshal(msgs)
				require.NoError(t, err)
				assert.NotContains(t, string(b), "acct 1234")
			}
			assert.Equal(t, "anything else?", *res.Steps[1].Output)
		})
	}
}
