package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An upstream's error message of hundreds of KiB (the providers read up to
// 1 MiB of an error body) was relayed whole in the client's error body, as
// were its type and param. The client now gets the first
// maxRelayedMessage bytes, cut on a UTF-8 boundary and marked as cut, and
// a type and a param of at most maxRelayedField; the key the upstream
// echoed, wherever in the text, is not among them, nor is a hint of it.
func TestUpstreamErrorTextIsBoundedWhenRelayed(t *testing.T) {
	hint := openAIKey[:7] + "****" + openAIKey[len(openAIKey)-4:]
	// A key echoed early, a hint of it, then text long enough that the
	// cut falls inside a multi-byte character (é is 2 bytes).
	long := "bad value " + openAIKey + " (" + hint + ") " + strings.Repeat("é", 200<<10) + " tail-" + openAIKey
	typ := strings.Repeat("t", 64<<10)
	param := strings.Repeat("p", 64<<10)
	body := `{"error":{"message":"` + long + `","type":"` + typ + `","param":"` + param + `","code":"invalid_value"}}`
	g := newGateway(t, `{use: "tracing"}`, []reply{{status: 400, body: body}, {status: 400, body: body}}, nil)

	check := func(t *testing.T, msg string) {
		t.Helper()
		assert.LessOrEqual(t, len(msg), maxRelayedMessage, "the message is bounded")
		assert.True(t, utf8.ValidString(msg), "cut on a character's boundary")
		assert.Contains(t, msg, "bad value [redacted]")
		assert.NotContains(t, msg, hint, "a hint of the key is not relayed")
		assert.NotContains(t, msg, "tail-", "the rest is left out")
		assert.Contains(t, msg, "(cut: the message ran ")
	}
	oe := g.openAIErrorOf(t, "primary")
	assert.Equal(t, 400, oe.status)
	check(t, oe.text)
	assert.LessOrEqual(t, len(oe.typ), maxRelayedField)
	assert.LessOrEqual(t, len(oe.param), maxRelayedField)
	assert.True(t, strings.HasPrefix(oe.typ, "ttt"), oe.typ)

	s := g.openai(t).Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	for s.Next() {
	}
	var se *openai.Error
	require.ErrorAs(t, s.Err(), &se)
	check(t, se.Message)
	g.noLeak(t, se.RawJSON())
	assert.Contains(t, g.logs.String(), "tail-[redacted]", "the log keeps the whole error")
}

// The same bound holds for an Anthropic client and for an upstream's error
// event in the middle of a stream.
func TestUpstreamErrorEventIsBoundedWhenRelayed(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	events := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}` + "\n\n" +
		"event: error\n" + `data: {"type":"error","error":{"type":"overloaded_error","message":"` + long + `"}}` + "\n\n"
	g := newGateway(t, `{use: "tracing"}`, nil, []reply{{body: events}, {status: 500, body: `{"type":"error","error":{"type":"api_error","message":"` + long + `"}}`}})

	as := g.anthropic(t).Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	for as.Next() {
	}
	var ae *anthropic.Error
	require.ErrorAs(t, as.Err(), &ae)
	assert.LessOrEqual(t, len(ae.Message), maxRelayedMessage)
	assert.Contains(t, ae.Message, "(cut: the message ran ")

	an := g.anthropicErrorOf(t, "backup")
	assert.Equal(t, 502, an.status)
	assert.LessOrEqual(t, len(an.text), maxRelayedMessage)
	assert.Contains(t, an.text, "(cut: the message ran ")
}

// An upstream MCP tool's failure of hundreds of KiB reaches the MCP client
// bounded as a chat route's upstream error is.
func TestMCPToolErrorIsBoundedWhenRelayed(t *testing.T) {
	long := "tool broke: " + strings.Repeat("é", 100<<10) + " tail"
	srv := mcp.NewServer(&mcp.Implementation{Name: "broken", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "fail", Description: "Fails.", InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: -32000, Message: long}
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	dir := writePolicy(t, fmt.Sprintf("package gw\n\nmcp: servers: up: {url: %q}\n", ts.URL))
	s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)

	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	msg := text(t, res)
	assert.Contains(t, msg, "tool broke: é")
	assert.LessOrEqual(t, len(msg), maxRelayedMessage)
	assert.True(t, utf8.ValidString(msg))
	assert.Contains(t, msg, "(cut: the message ran ")
}
