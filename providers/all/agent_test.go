package all_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/runtime"
)

const guarded = `
tools: get_weather: {
	description: "Current weather in a city"
	args: {type: "object", required: ["location"], properties: {location: {type: "string"}, unit: {type: "string"}}}
}
chains: {
	chat: [{use: "meter"}, {use: "retry", max_attempts: 2, initial_delay: "1ms"}]
	tool: [{use: "guard", name: "no_paris", tools: ["get_weather"], deny: "args.location.startsWith('Paris')",
		message: "Paris is off limits"}]
}
`

// toolMessages returns the tool messages of a request body the fake OpenAI
// server received.
func toolMessages(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var req struct {
		Messages []map[string]any `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	var out []map[string]any
	for _, m := range req.Messages {
		if m["role"] == "tool" {
			out = append(out, m)
		}
	}
	return out
}

func TestBlockedToolCallReachesTheModelAsARefusal(t *testing.T) {
	oa := ssetest.New(t,
		ssetest.Reply{Body: transcript(t, "openai", "tool_call.sse")},
		ssetest.Reply{Body: transcript(t, "openai", "text.sse")})
	ran := 0
	pl := loadWith(t, oa, ssetest.New(t), guarded, runtime.Deps{Tools: map[string]runtime.ToolFunc{
		"get_weather": func(context.Context, *runtime.ToolCall) (any, error) { ran++; return "sunny", nil },
	}})
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "weather in Paris?"})
	require.NoError(t, err)
	assert.Equal(t, 0, ran, "the guard stopped the call before the tool")
	assert.Equal(t, 1, res.Blocked)
	assert.Equal(t, "Hello! How can I help you today?", res.Output)
	assert.Equal(t, runtime.StopDone, res.Stop)
	assert.Equal(t, runtime.Usage{InputTokens: 1249, OutputTokens: 28, CachedInputTokens: 1024}, res.Usage)

	require.Equal(t, 2, oa.Requests())
	var first struct {
		Tools []map[string]any `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(oa.Bodies()[0], &first))
	require.Len(t, first.Tools, 1, "the declared tool is offered to the model")
	assert.Equal(t, "get_weather", first.Tools[0]["function"].(map[string]any)["name"])
	tools := toolMessages(t, oa.Bodies()[1])
	require.Len(t, tools, 1)
	assert.Equal(t, "call_DdmO9pD3xa9XTPNJ32zg2hcA", tools[0]["tool_call_id"])
	assert.Equal(t, "refused: the call was blocked by policy (no_paris): Paris is off limits. Do not repeat it unchanged.", tools[0]["content"])
}

func TestBlockedToolCallCanEndTheTurn(t *testing.T) {
	oa := ssetest.New(t, ssetest.Reply{Body: transcript(t, "openai", "tool_call.sse")})
	pl := loadWith(t, oa, ssetest.New(t), guarded, runtime.Deps{Tools: map[string]runtime.ToolFunc{
		"get_weather": func(context.Context, *runtime.ToolCall) (any, error) { return "sunny", nil },
	}})
	res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "weather in Paris?", OnBlock: runtime.OnBlockEndTurn})
	require.Error(t, err)
	assert.Equal(t, runtime.ClassBlocked, runtime.Classify(err))
	assert.Equal(t, "no_paris", runtime.LayerOf(err))
	assert.Equal(t, 1, res.Steps)
	assert.Equal(t, 1, oa.Requests(), "the model is not called again")
}
