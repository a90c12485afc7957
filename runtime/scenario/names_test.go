package scenario_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// A step or setting that names what the policy does not have, or acts on
// what it lacks, could only fail or would stand for nothing: the scenario
// is refused before any step runs, at its place, rather than run with the
// mistake passing silently.
func TestRunRefusesWhatThePolicyLacks(t *testing.T) {
	chat := func(extra string) string {
		return `{"models": {"primary": [{"text": "hi"}]}, "steps": [{"chat": {"model": "primary", "messages": [{"role": "user", "content": "x"}]` + extra + `}}]}`
	}
	egress := planWith(plan.Chains{Tool: []plan.Layer{layer("egress", `{"allow":["api.example.com"]}`)}})
	tests := []struct {
		name string
		p    *plan.Plan
		src  string
		want string
	}{
		// Anthropic's name of the mode would force a tool named "any".
		{"tool_choice any", designPlan(), chat(`, "tool_choice": "any"`),
			`s.json:1:131: steps[0].chat.tool_choice: "any" is neither auto, none nor required, nor a tool the policy declares; did you mean "required"? (the policy declares refund)`},
		{"tool_choice misspelt tool", designPlan(), chat(`, "tool_choice": "refnd"`),
			`steps[0].chat.tool_choice: "refnd" is neither auto, none nor required, nor a tool the policy declares; did you mean "refund"? (the policy declares refund)`},
		{"tool_choice a tool the step does not offer", designPlan(), chat(`, "tools": [], "tool_choice": "refund"`),
			`steps[0].chat.tool_choice: "refund" is neither auto, none nor required, nor a tool the step offers (the step offers no tools)`},
		{"tool_choice of an agent's calls", designPlan(), `{"models": {"primary": [{"text": "hi"}]}, "steps": [{"turn": {"input": "x", "steps": [
			{"agent": {"model": "primary", "input": "x", "params": {"tool_choice": "Auto"}}}]}}]}`,
			`s.json:2:60: steps[0].turn.steps[0].agent.params.tool_choice: "Auto" is neither auto, none nor required, nor a tool the policy declares; did you mean "auto"?`},
		{"resume store", designPlan(), "{\"steps\": [{\"checkpoint\": {}},\n  {\"resume\": {\"store\": \"defualt\"}}]}",
			`s.json:2:15: steps[1].resume.store: the policy declares no store "defualt", so the step can only fail; did you mean "default"? (the stores are default)`},
		{"checkpoint store", designPlan(), `{"steps": [{"checkpoint": {"store": "ledgr"}}]}`,
			`steps[0].checkpoint.store: the policy declares no store "ledgr", so the step can only fail (the stores are default)`},
		{"dns under no layer that looks names up", designPlan(), `{"dns": {"api.example.com": ["93.184.216.34"]}, "steps": [{"tool": {"name": "refund", "args": {}}}]}`,
			`s.json:1:2: dns: no layer of the policy looks host names up (egress does), so the stub is never consulted`},
		{"hold_background without background sinks", designPlan(), `{"hold_background": true, "steps": [{"tool": {"name": "refund", "args": {}}}]}`,
			`s.json:1:2: hold_background: the policy's state has no background sinks, so nothing is held`},
		{"admit query without grounding", designPlan(), `{"steps": [{"admit": {"query": "refunds", "items": []}}]}`,
			`s.json:1:23: steps[0].admit.query: the policy has no grounding section, so nothing is grounded and the query is never used`},
		{"continue from nothing", designPlan(), `{"models": {"primary": [{"text": "hi"}]}, "steps": [{"agent": {"model": "primary", "continue": true, "input": "x"}}]}`,
			`s.json:1:84: steps[0].agent.continue: no agent or resume step before it left a transcript (a crash loses it), so the turn would start from nothing`},
		{"continue after a crash", designPlan(), `{"models": {"primary": [{"text": "hi"}, {"text": "again"}]}, "steps": [{"agent": {"model": "primary", "input": "x"}}, {"crash": {}},
			{"turn": {"input": "x", "steps": [{"agent": {"model": "primary", "continue": true, "input": "y"}}]}}]}`,
			`steps[2].turn.steps[0].agent.continue: no agent or resume step before it left a transcript`},
		// Checked under egress too, where dns is read.
		{"tool_choice under egress", egress, chat(`, "tool_choice": "any"`), `steps[0].chat.tool_choice: "any"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := scenario.Parse([]byte(tt.src))
			require.NoError(t, err)
			_, err = scenario.Run(context.Background(), tt.p, s, scenario.Options{})
			var se *scenario.Error
			require.ErrorAs(t, err, &se)
			assert.Contains(t, se.In("s.json"), tt.want)
		})
	}

	withLedger := designPlan()
	withLedger.Stores = map[string]plan.Store{"ledger": {Kind: "memory"}}
	for _, ok := range []struct {
		p   *plan.Plan
		src string
	}{
		{designPlan(), chat(`, "tool_choice": "refund"`)},
		{designPlan(), chat(`, "tool_choice": "required"`)},
		// A tool the step offers, declared or not.
		{designPlan(), chat(`, "tools": [{"name": "wipe"}], "tool_choice": "wipe"`)},
		{withLedger, `{"steps": [{"checkpoint": {"store": "ledger"}}, {"resume": {"store": "ledger"}}, {"resume": {"store": "default"}}]}`},
		// A transcript to continue: an agent step's, or a resume's after a crash.
		{designPlan(), `{"models": {"primary": [{"text": "hi"}, {"text": "again"}]}, "steps": [{"agent": {"model": "primary", "input": "x"}},
			{"agent": {"model": "primary", "continue": true, "input": "y"}}]}`},
		{designPlan(), `{"steps": [{"checkpoint": {}}, {"crash": {}}, {"resume": {}}, {"agent": {"model": "primary", "continue": true}}]}`},
		// egress looks host names up with the stub.
		{egress, `{"dns": {"api.example.com": ["93.184.216.34"]}, "steps": [{"tool": {"name": "refund", "args": {}}}]}`},
	} {
		s, err := scenario.Parse([]byte(ok.src))
		require.NoError(t, err)
		_, err = scenario.Run(context.Background(), ok.p, s, scenario.Options{})
		require.NoError(t, err, ok.src)
	}
}

// consume: 0 abandons the stream at its first delta, before delivering
// it: nothing is delivered, the step ends ok (the consumer's choice, not a
// failure) and what arrived is charged, as for a consumer that closes the
// connection as soon as the answer starts.
func TestConsumeZero(t *testing.T) {
	s, err := scenario.Parse([]byte(`{"models": {"primary": [{"deltas": ["he", "llo"], "usage": {"input_tokens": 10, "output_tokens": 2}}]},
		"steps": [{"chat": {"model": "primary", "messages": [{"role": "user", "content": "hi"}], "consume": 0}}]}`))
	require.NoError(t, err)
	res, err := scenario.Run(context.Background(), planWith(plan.Chains{Chat: []plan.Layer{layer("meter", `{"scope":"run"}`)}}), s, scenario.Options{})
	require.NoError(t, err)
	got, err := json.Marshal(res.Steps[0])
	require.NoError(t, err)
	assert.JSONEq(t, `{"index": 0, "stage": "chat", "outcome": "ok", "text": "", "model": "primary", "attempts": 1,
		"requests": [{"model": "primary", "messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "refund", "parameters": {"type": "object"}}]}]}`, string(got))
	assert.Equal(t, 1, res.Executions.Models["primary"])
	// The stream ended before its usage report: the call is charged as
	// estimated, its output being the first delta, which arrived ("he":
	// 1 token).
	assert.Equal(t, int64(1), res.Meter.Calls)
	assert.Equal(t, int64(1), res.Meter.OutputTokens)
}
