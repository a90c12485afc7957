package scenario_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// TestScenarioNumbersAreWhatTheyWrite: a scenario's numbers were decoded
// to float64, so a tool step, a scripted model call or a scripted result
// naming account 9007199254740993 ran with 9007199254740992: a guard
// denying 9007199254740993 let the step through, and the test passed for
// a call the gateway refuses. They are what they write now: an integer
// float64 cannot hold is an int64, and a number neither holds is refused
// by the tool chain as a real call's is.
func TestScenarioNumbersAreWhatTheyWrite(t *testing.T) {
	p := planWith(plan.Chains{Tool: []plan.Layer{func() plan.Layer {
		l := layer("guard", `{"deny": "args.account_id == 9007199254740993", "message": "protected"}`)
		l.Name, l.Tools = "protected", []string{"close"}
		return l
	}()}})
	p.Tools = map[string]plan.Tool{"close": {Args: json.RawMessage(`{"type": "object", "required": ["account_id"], "properties": {"account_id": {"type": "integer"}, "rate": {"type": "number"}}}`)}}
	res, got := run(t, p, `{
	  "models": {"primary": [{"tool_calls": [{"id": "c1", "name": "close", "args": {"account_id": 9007199254740993}}]}, {"text": "done"}]},
	  "tools": {"close": [{"result": {"closed": 9007199254740995}}]},
	  "steps": [
	    {"tool": {"name": "close", "args": {"account_id": 9007199254740993}}},
	    {"tool": {"name": "close", "args": {"account_id": 1, "rate": 0.1000000000000000055511151231257827}}},
	    {"tool": {"name": "close", "args": {"account_id": 9007199254740995}}},
	    {"agent": {"model": "primary", "input": "close it"}}]}`, scenario.Options{})
	want := `{"steps": [
	  {"outcome": "blocked", "error": {"layer": "protected"}},
	  {"outcome": "blocked", "error": {"layer": "tools"}},
	  {"outcome": "ok"},
	  {"outcome": "ok"}],
	  "executions": {"tools": {"close": 1}}}`
	var w any
	require.NoError(t, json.Unmarshal([]byte(want), &w))
	require.NoError(t, subset("$", w, got))
	assert.Contains(t, res.Steps[1].Error.Message, "args.rate")
	b, err := json.Marshal(res.Steps[2].Result)
	require.NoError(t, err)
	assert.JSONEq(t, `{"closed": 9007199254740995}`, string(b))
	assert.Contains(t, string(b), "9007199254740995", "the scripted result as written")
	b, err = json.Marshal(res.Steps[3])
	require.NoError(t, err)
	assert.Contains(t, string(b), "protected", "the model's call was refused: %s", b)
}
