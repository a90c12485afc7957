package serve

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestProposedCallCutByTheUpstreamIsAnUpstreamFailure: a call whose
// arguments the upstream cut (not JSON at all) was refused as a policy
// block (403 permission_error, layer tools), which a client cannot tell
// from a real one. It is the upstream's failure: a 502 in the route's
// format, streamed or not, on every route, no fragment of the call
// relayed and no refusal counted; arguments that are JSON but break the
// declared schema stay a block (TestProposedToolCallsAreAdmittedBeforeTheyAreRelayed).
func TestProposedCallCutByTheUpstreamIsAnUpstreamFailure(t *testing.T) {
	const cut = `{"location":"Par`
	oa := make([]reply, 4)
	for i := range oa {
		oa[i] = reply{body: oaToolCallSSE("get_weather", cut)}
	}
	an := []reply{{body: anToolUseSSE("get_weather", cut)}, {body: anToolUseSSE("get_weather", cut)}}
	g := newGatewayWith(t, proposalDecls, typicalChain, oa, an)
	for _, stream := range []bool{false, true} {
		s := strconv.FormatBool(stream)
		for _, route := range []struct{ name, path, body string }{
			{"chat", "/v1/chat/completions", `{"model":"primary","stream":` + s + `,"messages":[{"role":"user","content":"go"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`},
			{"responses", "/v1/responses", `{"model":"primary","stream":` + s + `,"input":"go","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`},
			{"messages", "/v1/messages", `{"model":"backup","max_tokens":64,"stream":` + s + `,"messages":[{"role":"user","content":"go"}],"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`},
		} {
			code, _, body := do(t, "POST", g.url+route.path, clientKey, []byte(route.body), "anthropic-version", "2023-06-01")
			if !stream {
				assert.Equal(t, http.StatusBadGateway, code, "%s: %s", route.name, body)
			}
			assert.Contains(t, body, "not complete JSON", "%s stream=%v", route.name, stream)
			assert.NotContains(t, body, "blocked", "%s stream=%v: not a policy block", route.name, stream)
			assert.NotContains(t, body, "permission_error", "%s stream=%v", route.name, stream)
			for _, fragment := range []string{`"tool_calls"`, `"function_call"`, `"tool_use"`, `input_json_delta`} {
				assert.NotContains(t, body, fragment, "%s stream=%v: no fragment of the call is relayed", route.name, stream)
			}
		}
	}
	assert.NotContains(t, g.metrics(t), `agentc_serve_blocks_total{layer="tools"`)
}
