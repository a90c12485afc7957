package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestImagePartsHoldingTextAreTextDocuments: an image part that holds text
// in place of an image (data:text/plain, an SVG: runtime.ContentPart.Attachment),
// which the layers read as text, went as an image block of that media type,
// which the Messages API refuses. It is a plain-text document block holding
// the text the layers read, in a user message and in a tool result alike.
func TestImagePartsHoldingTextAreTextDocuments(t *testing.T) {
	c, err := New(Config{Model: "m"})
	require.NoError(t, err)
	text := runtime.ContentPart{Type: runtime.PartImage, ImageURL: "data:text/plain;name=notes.txt,hello%20you"}
	got, err := c.body(&runtime.ChatRequest{Messages: []runtime.Message{
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "read"}, text,
			{Type: runtime.PartImage, MediaType: "image/svg+xml", Data: []byte("<svg>hi</svg>")}}},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "toolu_1", Name: "t", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "toolu_1", Text: "done"},
			{Type: runtime.PartImage, ToolCallID: "toolu_1", ImageURL: "data:text/plain,from%20the%20tool"}}},
	}})
	require.NoError(t, err)
	var body struct {
		Messages []struct {
			Content []json.RawMessage
		}
	}
	require.NoError(t, json.Unmarshal(got, &body), "%s", got)
	require.Len(t, body.Messages, 3, "%s", got)
	doc := func(s string) string {
		return `{"type":"document","source":{"type":"text","media_type":"text/plain","data":` + string(must(json.Marshal(s))) + `}}`
	}
	user := body.Messages[0].Content
	require.Len(t, user, 3, "%s", got)
	assert.JSONEq(t, doc("hello you"), string(user[1]))
	assert.JSONEq(t, doc("<svg>hi</svg>"), string(user[2]))
	assert.JSONEq(t, `[{"type":"tool_result","tool_use_id":"toolu_1","is_error":false,"content":[{"type":"text","text":"done"},`+doc("from the tool")+`]}]`,
		string(must(json.Marshal(body.Messages[2].Content))))
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestImagePartsHoldingUnreadDataFailTheCall: an image part holding data
// that is neither an image nor UTF-8 text (Latin-1, a PDF, bytes, a data:
// URL without its comma), which no Anthropic block takes, fails the call
// as a permanent error with status 400 naming the message and the part,
// before the provider is called.
func TestImagePartsHoldingUnreadDataFailTheCall(t *testing.T) {
	c, err := New(Config{Model: "m", BaseURL: "http://127.0.0.1:1"})
	require.NoError(t, err)
	for _, p := range []runtime.ContentPart{
		{Type: runtime.PartImage, ImageURL: "data:text/plain;charset=latin1,caf%E9"},
		{Type: runtime.PartImage, ImageURL: "data:application/pdf;base64,JVBERv8="},
		{Type: runtime.PartImage, MediaType: "application/octet-stream", Data: []byte{0, 1, 2}},
		{Type: runtime.PartImage, ImageURL: "data:text/plain"},
	} {
		req := runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "a"}, p}}}}
		err := c.Stream(context.Background(), &req, func(runtime.Delta) bool { return true })
		var ce *runtime.CallError
		require.True(t, errors.As(err, &ce), "%v", err)
		assert.Equal(t, http.StatusBadRequest, ce.Status)
		assert.Equal(t, runtime.KindPermanent, ce.Kind)
		assert.Contains(t, err.Error(), "messages[0]: parts[1]: an image part holding data that is neither an image nor UTF-8 text", p.ImageURL)
	}
}
