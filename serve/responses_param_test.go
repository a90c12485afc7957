package serve

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// TestResponsesUpstreamParamNamesTheClientsField: an OpenAI model's 400
// names a field of the Chat Completions request the gateway sent
// (messages[4].content); a Responses client never sent it. It gets the
// field of its own request the upstream's maps to (input[3].content), or
// a null param when none maps cleanly (a message made of several items),
// never a field of the other API.
func TestResponsesUpstreamParamNamesTheClientsField(t *testing.T) {
	// The request: instructions (messages[0]), a user message (input[0],
	// messages[1]), an assistant message and a function call (input[1]
	// and input[2], together messages[2]), the call's output (input[3],
	// messages[3]), a user message (input[4], messages[4]).
	body := `{"model": "primary", "instructions": "be brief", "max_output_tokens": 64, "temperature": 0.5,
		"tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}}],
		"input": [
			{"role": "user", "content": "What is the weather in Paris?"},
			{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
			{"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"location\": \"Paris\"}"},
			{"type": "function_call_output", "call_id": "call_1", "output": "18C"},
			{"role": "user", "content": [{"type": "input_text", "text": "And in Rome?"}]}]}`
	cases := []struct{ upstream, want string }{
		{"messages[4].content", "input[4].content"},
		{"messages[4].content[0].text", "input[4].content"},
		{"messages[1]", "input[0]"},
		{"messages[3].content", "input[3].output"},
		{"messages[0].content", "instructions"},
		{"messages[2].tool_calls[0].function.arguments", ""},
		{"messages[9]", ""},
		{"messages", "input"},
		{"max_completion_tokens", "max_output_tokens"},
		{"temperature", "temperature"},
		{"tools[0].function.parameters", "tools[0].parameters"},
		{"stream_options.include_usage", ""},
		{"response_format", ""},
	}
	// A chat chain that may change the messages (redact may rewrite one,
	// compaction drop some) leaves the messages' params null.
	rewritten := []struct{ upstream, want string }{{"messages[4].content", ""}, {"messages", ""}, {"temperature", "temperature"}}
	for _, c := range cases {
		t.Run(c.upstream, func(t *testing.T) {
			assertParam(t, "/v1/responses", "", body, c.upstream, c.want)
		})
	}
	for _, c := range rewritten {
		t.Run("redact "+c.upstream, func(t *testing.T) {
			assertParam(t, "/v1/responses", `{use: "redact"}`, body, c.upstream, c.want)
		})
	}
}

// TestChatCompletionsUpstreamParamAfterRewrite: a Chat Completions
// client's messages go upstream at their own indexes, so an upstream's
// messages[i] is relayed as it is; a chat chain that may change the
// messages (redact, pii redact, truncate, compaction, a custom middleware)
// may have moved, dropped or rewritten the one it names, so its param is
// null then, while a param of another field is still relayed.
func TestChatCompletionsUpstreamParamAfterRewrite(t *testing.T) {
	body := `{"model": "primary", "temperature": 0.5, "messages": [
		{"role": "system", "content": "be brief"},
		{"role": "user", "content": "What is the weather in Paris?"}]}`
	for _, c := range []struct{ upstream, want string }{
		{"messages[1].content", "messages[1].content"}, {"messages", "messages"}, {"temperature", "temperature"},
	} {
		t.Run(c.upstream, func(t *testing.T) {
			assertParam(t, "/v1/chat/completions", "", body, c.upstream, c.want)
		})
	}
	for _, chain := range []string{`{use: "redact"}`} {
		for _, c := range []struct{ upstream, want string }{
			{"messages[1].content", ""}, {"messages[1]", ""}, {"messages", ""}, {"temperature", "temperature"},
		} {
			t.Run(chain+" "+c.upstream, func(t *testing.T) {
				assertParam(t, "/v1/chat/completions", chain, body, c.upstream, c.want)
			})
		}
	}
}

// assertParam sends body to route of a gateway with chain whose OpenAI
// model answers a 400 naming upstream, and checks the param the client
// gets (want, "" for null).
func assertParam(t *testing.T, route, chain, body, upstream, want string) {
	t.Helper()
	refused := fmt.Sprintf(`{"error":{"message":"Invalid value.","type":"invalid_request_error","param":%q,"code":"invalid_value"}}`, upstream)
	g := newGateway(t, chain, []reply{{status: 400, body: refused}}, nil)
	code, _, got := do(t, "POST", g.url+route, clientKey, []byte(body))
	require.Equal(t, 400, code, got)
	param := gjson.Get(got, "error.param")
	assert.Equal(t, "invalid_value", gjson.Get(got, "error.code").String(), got)
	if want == "" {
		assert.Equal(t, gjson.Null, param.Type, "a param that maps to no field of the request is null: %s", got)
		return
	}
	assert.Equal(t, want, param.String(), got)
}
