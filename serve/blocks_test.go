package serve

import (
	"context"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// screenshotTurn is a coding agent's turn that read a screenshot: the
// Read tool's result is an image, then a text and an image.
func screenshotTurn(model string) anthropic.MessageNewParams {
	png := &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
		OfBase64: &anthropic.Base64ImageSourceParam{MediaType: "image/png", Data: "iVBORw0KGgo="}}}
	url := &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{
		OfURL: &anthropic.URLImageSourceParam{URL: "https://example.com/b.png"}}}
	return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64, Messages: []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("What does the page show?")),
		anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]any{"file_path": "/tmp/a.png"}, "Read"),
			anthropic.NewToolUseBlock("toolu_2", map[string]any{"file_path": "/tmp/b.png"}, "Read")),
		anthropic.NewUserMessage(
			anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{ToolUseID: "toolu_1",
				Content: []anthropic.ToolResultBlockParamContentUnion{{OfImage: png}}}},
			anthropic.ContentBlockParamUnion{OfToolResult: &anthropic.ToolResultBlockParam{ToolUseID: "toolu_2",
				Content: []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: "b.png, 1 of 1"}}, {OfImage: url}}}},
			anthropic.NewTextBlock("Compare them.")),
	}}
}

// TestToolResultImagesReachAClaudeModel: the images a tool returned
// (Claude Code's Read of a screenshot) reach a Claude model inside their
// tool results, each result's text before its images.
func TestToolResultImagesReachAClaudeModel(t *testing.T) {
	g := newGateway(t, typicalChain, nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	_, err := g.anthropic(t).Messages.New(context.Background(), screenshotTurn("backup"))
	require.NoError(t, err)
	msgs := sentTo(t, g.an, 0)["messages"].([]any)
	require.Len(t, msgs, 3)
	assert.Equal(t, []any{
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": false, "content": []any{
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}}},
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": false, "content": []any{
			map[string]any{"type": "text", "text": "b.png, 1 of 1"},
			map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": "https://example.com/b.png"}}}},
		map[string]any{"type": "text", "text": "Compare them."},
	}, msgs[2].(map[string]any)["content"])
}

// TestToolResultImagesFallOverFromAnOpenAIModel: an OpenAI model's tool
// messages hold text alone, so a result holding an image is a 400 naming
// the result and the model, never the result without its image nor the
// image as the user's; behind fallback the next model, a Claude model,
// serves it.
func TestToolResultImagesFallOverFromAnOpenAIModel(t *testing.T) {
	g := newGateway(t, `{use: "tracing"}`, nil, nil)
	_, err := g.anthropic(t).Messages.New(context.Background(), screenshotTurn("primary"))
	var ae *anthropic.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, http.StatusBadRequest, ae.StatusCode)
	assert.Contains(t, ae.RawJSON(), "the result of tool call toolu_1 holds an image")
	assert.Contains(t, ae.RawJSON(), "openai gpt-4.1-mini: messages[2]")
	assert.Zero(t, g.oa.requests())

	g = newGateway(t, `{use: "fallback", models: ["primary", "backup"], when: "request.model == 'primary'"}`,
		nil, []reply{{body: transcript(t, "anthropic", "text.sse")}})
	msg, err := g.anthropic(t).Messages.New(context.Background(), screenshotTurn("primary"))
	require.NoError(t, err)
	assert.Equal(t, anthropic.Model("backup"), msg.Model)
	assert.Contains(t, g.an.body(0), `"tool_use_id":"toolu_1","content":[{"type":"image"`)
	assert.Zero(t, g.oa.requests())
}

// The meter's estimate counts an image a tool returned as it counts one
// the user sent.
func TestToolResultImagesAreEstimated(t *testing.T) {
	decode := func(body string) int64 {
		t.Helper()
		var p chatParams
		require.NoError(t, decodeMessages([]byte(body), &p))
		return runtime.EstimateRequest(&p.req)
	}
	const head = `{"model": "backup", "max_tokens": 64, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]}, `
	const img = `{"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}`
	inResult := decode(head + `{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [` + img + `]}]}]}`)
	asUser := decode(head + `{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": ""}, ` + img + `]}]}`)
	without := decode(head + `{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": ""}]}]}`)
	assert.Equal(t, asUser, inResult)
	assert.Equal(t, without+runtime.MaxImageTokens, inResult)
}
