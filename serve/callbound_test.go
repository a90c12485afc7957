package serve

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestAnswerOverTheCallBoundIsRefused: an answer of any number of calls
// was relayed whole, where an agent run (RunAgent) runs none of the calls
// of an answer over its bound (runtime.DefaultAgentMaxToolCalls): a model
// in a loop, or an injected instruction, had the client run 65 calls.
// Such an answer is the upstream's unusable answer: a 502 in the route's
// error format naming the bound, an error event in a stream; an answer of
// as many calls as the bound is relayed.
func TestAnswerOverTheCallBoundIsRefused(t *testing.T) {
	over := runtime.DefaultAgentMaxToolCalls + 1
	g := choiceGateway(t, over, "get_weather", `{"location":"Paris"}`)
	want := "the model proposed 65 tool calls in one answer, more than the 64 an answer may make"
	assertFailed(t, choiceAsk{}.ask(t, g), http.StatusBadGateway, "", want)
	assert.NotContains(t, g.metrics(t), `agentc_serve_blocks_total{`, "not a refusal of the policy")

	t.Run("at the bound", func(t *testing.T) {
		g := choiceGateway(t, runtime.DefaultAgentMaxToolCalls, "get_weather", `{"location":"Paris"}`)
		for _, a := range (choiceAsk{}).ask(t, g) {
			assert.NoError(t, a.err, a.route)
			assert.Len(t, a.calls, runtime.DefaultAgentMaxToolCalls, a.route)
		}
	})
}

// TestCallBoundIsASetting: the bound of an answer's calls was fixed at
// runtime.DefaultAgentMaxToolCalls, though a gateway whose clients run
// their agents with another bound (RunAgent's MaxToolCalls) would relay
// what they refuse, or refuse what they run. Options.MaxToolCalls (the
// command's -maxtoolcalls) sets it: an answer over it is the upstream's
// unusable answer, naming it; one at it is relayed. A bound under 1 is
// an *OptionsError, as an answer could make no call.
func TestCallBoundIsASetting(t *testing.T) {
	bound := func(o *Options) { o.MaxToolCalls = 3 }
	calls := func(n int) []idCall {
		return numbered("call_", slices.Repeat([]callOf{{"get_weather", `{"location":"Paris"}`}}, n))
	}
	g := idCallsGateway(t, proposalDecls, calls(4), calls(4), bound)
	assertFailed(t, choiceAsk{}.ask(t, g), http.StatusBadGateway, "", "the model proposed 4 tool calls in one answer, more than the 3 an answer may make")
	g = idCallsGateway(t, proposalDecls, calls(3), calls(3), bound)
	for _, a := range (choiceAsk{}).ask(t, g) {
		assert.NoError(t, a.err, a.route)
		assert.Len(t, a.calls, 3, a.route)
	}

	_, err := New(context.Background(), Options{Source: cueSource(filepath.Join(t.TempDir(), "missing")), MaxToolCalls: -1})
	var oe *OptionsError
	require.ErrorAs(t, err, &oe)
	assert.EqualError(t, err, "serve: -maxtoolcalls (Options.MaxToolCalls, -1) must be at least 1: an answer of more calls fails with a 502, so none could make a call")
}

// TestCallsGetIDsOfTheirOwn: the calls of an answer that gave two of them
// one id, or one none, were relayed as they came: the client's results
// named one id twice (Anthropic refuses such a transcript; a client may
// match a result to the wrong call) or none. Each call is relayed under an
// id of its own, as an agent run (RunAgent) records it: the first of an
// id keeps it, a later one, or one without, gets <id>_<n> (call_<n>), n
// its place in the answer from 1, on every route, whole or streamed.
func TestCallsGetIDsOfTheirOwn(t *testing.T) {
	g := idCallsGateway(t, repeatDecls,
		[]idCall{{"dup", "refund", `{"amount":5}`}, {"dup", "refund", `{"amount":6}`}, {"", "get_weather", `{"location":"Paris"}`}},
		[]idCall{{"toolu_a", "refund", `{"amount":5}`}, {"toolu_a", "refund", `{"amount":6}`}, {"", "get_weather", `{"location":"Paris"}`}})
	for _, a := range (choiceAsk{}).ask(t, g) {
		require.NoError(t, a.err, a.route)
		assert.Equal(t, []string{"refund", "refund", "get_weather"}, a.calls, a.route)
		want := []string{"dup", "dup_2", "call_3"}
		if strings.HasPrefix(a.route, "messages") {
			want = []string{"toolu_a", "toolu_a_2", "call_3"}
		}
		assert.Equal(t, want, a.ids, a.route)
	}

	t.Run("with a repeat left out", func(t *testing.T) {
		g := idCallsGateway(t, repeatDecls,
			[]idCall{{"dup", "refund", `{"amount":5}`}, {"dup", "refund", `{"amount":5}`}, {"dup", "get_weather", `{"location":"Paris"}`}},
			[]idCall{{"toolu_a", "refund", `{"amount":5}`}, {"toolu_a", "refund", `{"amount":5}`}, {"toolu_a", "get_weather", `{"location":"Paris"}`}})
		for _, a := range (choiceAsk{}).ask(t, g) {
			require.NoError(t, a.err, a.route)
			assert.Equal(t, []string{"refund", "get_weather"}, a.calls, a.route)
			want := []string{"dup", "dup_3"}
			if strings.HasPrefix(a.route, "messages") {
				want = []string{"toolu_a", "toolu_a_3"}
			}
			assert.Equal(t, want, a.ids, a.route)
		}
		assert.Contains(t, g.logs.String(), "tool=refund call=dup_2 repeats=dup")
	})
}
