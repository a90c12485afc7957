package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cardPNG is a PNG whose text chunk holds a card number.
var cardPNG = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x00\x00\x00\x00"),
	"tEXtComment\x00card 4111 1111 1111 1111 here\x00"...)

// TestMCPMaskedMediaResultIsValidContent: an upstream result of an image,
// audio and an embedded blob whose data holds a card number, beside ones
// that hold none, passes pii's "redact". The masked data is no longer
// base64: the result was relayed as one text content holding the whole
// result's JSON, with that JSON as its structured content too. The client
// gets the contents in their places, each of a valid type: the clean ones
// as they were, each masked one a text saying what it was and why it is
// not relayed, and no structured content the upstream did not send.
func TestMCPMaskedMediaResultIsValidContent(t *testing.T) {
	clean := []byte("\x89PNG\r\n\x1a\nclean\x00")
	srv := mcp.NewServer(&mcp.Implementation{Name: "media", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "fetch", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "two images"},
				&mcp.ImageContent{MIMEType: "image/png", Data: cardPNG},
				&mcp.ImageContent{MIMEType: "image/png", Data: clean},
				&mcp.AudioContent{MIMEType: "audio/wav", Data: cardPNG},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///card.bin", MIMEType: "application/octet-stream", Blob: cardPNG}},
			}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: media: url: %q
chains: tool: [{use: "pii", action: "redact"}]
`, ts.URL))), WatchInterval: -1})
	cs := connectProxy(t, s.url, "", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fetch", Arguments: map[string]any{}})
	require.NoError(t, err)
	raw, err := json.Marshal(res)
	require.NoError(t, err)
	require.False(t, res.IsError, string(raw))
	assert.NotContains(t, string(raw), "4111 1111 1111 1111")
	assert.Nil(t, res.StructuredContent, "the upstream sent none: %s", raw)
	require.Len(t, res.Content, 5, string(raw))

	var wire struct {
		Content []map[string]any `json:"content"`
	}
	require.NoError(t, json.Unmarshal(raw, &wire))
	for i, c := range wire.Content {
		assert.NotEmpty(t, c["type"], "content %d has a type: %s", i, raw)
		if c["type"] == "image" || c["type"] == "audio" {
			assert.NotEmpty(t, c["mimeType"], "content %d has a media type: %s", i, raw)
		}
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); assert.True(t, ok, string(raw)) {
		assert.Equal(t, "two images", tc.Text)
	}
	if img, ok := res.Content[2].(*mcp.ImageContent); assert.True(t, ok, "the clean image is relayed: %s", raw) {
		assert.Equal(t, clean, img.Data)
		assert.Equal(t, "image/png", img.MIMEType)
	}
	for i, what := range map[int]string{1: "image/png image content", 3: "audio/wav audio content", 4: `resource "file:///card.bin" content`} {
		tc, ok := res.Content[i].(*mcp.TextContent)
		if assert.True(t, ok, "content %d, masked, is a text: %s", i, raw) {
			assert.Contains(t, tc.Text, what, "content %d", i)
			assert.Contains(t, tc.Text, "masked", "content %d", i)
		}
	}
}

// TestMCPContentAfterTheChain: a content whose type or media type a mask
// emptied goes out as a text, never with an empty type: a text as its
// text, binary data as the placeholder; a type no tool result carries as
// its JSON.
func TestMCPContentAfterTheChain(t *testing.T) {
	for _, c := range []struct {
		item any
		want string
	}{
		{map[string]any{"type": "", "text": "key [REDACTED:aws-access-key-id]"}, "key [REDACTED:aws-access-key-id]"},
		{map[string]any{"type": "", "mimeType": "", "data": "[REDACTED:aws-access-key-id]"},
			"[image or audio content not relayed: a layer of the tool chain masked its data, and it is no longer valid MCP content]"},
		{map[string]any{"type": "", "resource": map[string]any{"uri": ":///b", "blob": "[REDACTED:card]"}},
			`[resource ":///b" content not relayed: a layer of the tool chain masked its data, and it is no longer valid MCP content]`},
		{map[string]any{"type": "image", "mimeType": "", "data": "iVBORw0K"},
			"[image content not relayed: a layer of the tool chain masked its data, and it is no longer valid MCP content]"},
		{map[string]any{"type": "tool_use", "id": "1", "name": "x", "input": map[string]any{}}, `{"id":"1","input":{},"name":"x","type":"tool_use"}`},
		{"loose", `"loose"`},
	} {
		got := mcpContent(c.item)
		tc, ok := got.(*mcp.TextContent)
		if assert.True(t, ok, "%v: %T", c.item, got) {
			assert.Equal(t, c.want, tc.Text)
		}
	}
	img := mcpContent(map[string]any{"type": "image", "mimeType": "image/png", "data": "iVBORw0K"})
	assert.Equal(t, &mcp.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG\r\n")}, img)
}
