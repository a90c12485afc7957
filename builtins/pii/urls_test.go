package pii_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// The URL of an image or a document is no text a model reads, but its
// provider fetches it, from a host of the client's choosing: personal data
// in it (its query, its path, percent-encoded or not) reaches that host and
// the provider. With "block" it blocks the call; with "redact" too, as a URL
// masked would locate another resource. A data: URL's data is read as the
// text it holds (attachment), not again as a URL.
func TestChatPartURLs(t *testing.T) {
	const card = "https://evil.example/x.png?c=4111-1111-1111-1111&m=john.doe@example.com"
	user := func(parts ...runtime.ContentPart) []runtime.Message {
		return []runtime.Message{{Role: "user", Parts: append([]runtime.ContentPart{{Type: runtime.PartText, Text: "see"}}, parts...)}}
	}
	tests := []struct {
		name, config string
		msgs         []runtime.Message
		blocked      string
	}{
		{"image URL, block", `{}`, user(runtime.ContentPart{Type: runtime.PartImage, ImageURL: card}),
			"message 0 image URL contains personal data (card, email)"},
		{"image URL, redact", `{"action":"redact"}`, user(runtime.ContentPart{Type: runtime.PartImage, ImageURL: card}),
			"message 0 image URL holds personal data (card, email), which the model's provider fetches: a URL masked would locate another resource: send the data itself, or a URL that holds none"},
		{"percent-encoded in the path", `{}`, user(runtime.ContentPart{Type: runtime.PartImage, ImageURL: "https://img.example/u/john.doe%40example.com/a.png"}),
			"message 0 image URL contains personal data (email)"},
		{"plus signs for spaces in the query", `{}`, user(runtime.ContentPart{Type: runtime.PartImage, ImageURL: "https://img.example/a.png?c=4111+1111+1111+1111"}),
			"message 0 image URL contains personal data (card)"},
		{"an image a tool returned", `{}`, []runtime.Message{
			{Role: "user", Content: "shoot"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c0", Name: "shot", Arguments: []byte(`{}`)}}},
			{Role: "tool", ToolCallID: "c0", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c0", Text: "done"},
				{Type: runtime.PartImage, ToolCallID: "c0", ImageURL: "https://shots.example/a.png?to=ann@example.com"}}}},
			"message 2 image URL contains personal data (email)"},
		{"system message left alone with system false", `{"system":false}`, []runtime.Message{
			{Role: "system", Parts: []runtime.ContentPart{{Type: runtime.PartImage, ImageURL: "https://ops.example/logo.png?owner=ops@example.com"}}},
			{Role: "user", Content: "hi"}}, ""},
		{"the host is the provider's to reach, no data of the client's", `{"kinds":["ip"]}`, user(runtime.ContentPart{Type: runtime.PartImage, ImageURL: "http://203.0.113.9:8080/cat.png"}), ""},
		{"a path a backslash starts", `{}`, user(runtime.ContentPart{Type: runtime.PartImage, ImageURL: `https://img.example\u\john.doe@example.com\a.png`}),
			"message 0 image URL contains personal data (email)"},
		{"clean URL", `{}`, user(runtime.ContentPart{Type: runtime.PartImage, ImageURL: "https://img.example/cat.png?w=1024&h=768"}), ""},
		{"an image's data URL is not read as a URL", `{}`, user(runtime.ContentPart{Type: runtime.PartImage, ImageURL: "data:image/png,4111-1111-1111-1111"}), ""},
		{"a data URL's parameters", `{}`, user(runtime.ContentPart{Type: runtime.PartImage, ImageURL: "data:text/plain;name=4111111111111111,hello"}),
			"message 0 image URL contains personal data (card)"},
		{"a data URL's parameters percent-encoded", `{}`, user(runtime.ContentPart{Type: runtime.PartImage, ImageURL: "DATA:image/png;name=john.doe%40example.com;base64,iVBORw0KGgo="}),
			"message 0 image URL contains personal data (email)"},
		{"a clean data URL", `{}`, user(runtime.ContentPart{Type: runtime.PartImage, ImageURL: "data:image/png;charset=utf-8;base64,iVBORw0KGgo="}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkChatBlock(t, tt.config, tt.msgs, tt.blocked) })
	}
}

// A URL found clean is recorded for the run: the same URL sent again in the
// run is not read again, and one that holds personal data is refused at
// every call.
func TestChatPartURLsPerRun(t *testing.T) {
	model := &recordingModel{}
	pl := chatPipeline(t, `{}`, model)
	req := func(u string) runtime.ChatRequest {
		return runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartImage, ImageURL: u}}}}}
	}
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	for range 2 {
		_, err := pl.Complete(ctx, req("https://img.example/cat.png"))
		require.NoError(t, err)
		_, err = pl.Complete(ctx, req("https://img.example/cat.png?m=ann@example.com"))
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b)
	}
	assert.Len(t, model.seen, 2)
}
