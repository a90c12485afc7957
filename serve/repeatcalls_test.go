package serve

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// repeatDecls declares a side-effecting refund, a retry_safe
// side-effecting notify and a read-only get_weather.
const repeatDecls = `
tools: {
	get_weather: args: {type: "object", required: ["location"], properties: location: type: "string"}
	refund: {side_effecting: true, args: {type: "object", required: ["amount"], properties: {amount: type: "number", note: type: "string"}}}
	notify: {side_effecting: true, retry_safe: true}
}`

// TestRepeatedSideEffectingCallIsRelayedOnce: an answer proposing the
// same refund twice (the same tool and arguments as JSON values, under two
// ids) was relayed whole, and the client ran the refund twice, where an
// agent run (RunAgent) runs it once. The repeat is left out of the answer,
// on every route, whole or streamed, its place closed up; the log says so
// and a counter counts it. A read-only call repeated, and a refund of
// other arguments, are relayed.
func TestRepeatedSideEffectingCallIsRelayedOnce(t *testing.T) {
	g := callsGateway(t, repeatDecls,
		callOf{"refund", `{"amount":5,"note":"x"}`}, callOf{"get_weather", `{"location":"Paris"}`},
		callOf{"refund", `{"note": "x", "amount": 5.0}`}, callOf{"get_weather", `{"location":"Paris"}`},
		callOf{"refund", `{"amount":7}`})
	answers := choiceAsk{}.ask(t, g)
	assertRelayed(t, answers, "refund", "get_weather", "get_weather", "refund")
	for _, a := range answers {
		want := []string{"call_1", "call_2", "call_4", "call_5"}
		if strings.HasPrefix(a.route, "messages") {
			want = []string{"toolu_1", "toolu_2", "toolu_4", "toolu_5"}
		}
		assert.Equal(t, want, a.ids, a.route)
		if strings.HasSuffix(a.route, "stream") {
			assert.Equal(t, "Let me check.", a.text, a.route)
		}
	}
	assert.Contains(t, g.metrics(t), `agentc_serve_repeated_calls_dropped_total{tool="refund"} 6`)
	logs := g.logs.String()
	assert.Equal(t, 6, strings.Count(logs, "repeated tool call left out"), logs)
	assert.Contains(t, logs, "tool=refund call=call_3 repeats=call_1")
	assert.Contains(t, logs, "tool=refund call=toolu_3 repeats=toolu_1")
}

// TestRepeatedCallsFollowRunAgent: which repeats are left out is
// RunAgent's rule: a side-effecting tool's, retry_safe or not; a tool of
// other arguments, or a read-only one, is relayed each time; under
// parallel_tool_calls false the answer is refused whole, as RunAgent runs
// none of its calls.
func TestRepeatedCallsFollowRunAgent(t *testing.T) {
	t.Run("retry_safe", func(t *testing.T) {
		g := callsGateway(t, repeatDecls, callOf{"notify", `{"to":"a"}`}, callOf{"notify", `{"to":"a"}`})
		assertRelayed(t, choiceAsk{tools: []string{"notify"}}.ask(t, g), "notify")
	})
	t.Run("other arguments", func(t *testing.T) {
		g := callsGateway(t, repeatDecls, callOf{"refund", `{"amount":5}`}, callOf{"refund", `{"amount":6}`})
		assertRelayed(t, choiceAsk{}.ask(t, g), "refund", "refund")
		assert.NotContains(t, g.metrics(t), "agentc_serve_repeated_calls_dropped_total{")
	})
	t.Run("serial", func(t *testing.T) {
		g := callsGateway(t, repeatDecls, callOf{"refund", `{"amount":5}`}, callOf{"refund", `{"amount":5}`})
		assertRefused(t, choiceAsk{serial: true}.ask(t, g), "the model proposed 2 tool calls in one answer, and the request allows one")
	})
}
