package memoize_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/memoize"
	"github.com/agentc-dev/agentc/runtime"
)

// The key of a chat call covers the images a tool returned and the
// documents a user sent: a key that left one out would serve the answer
// about one screenshot or one PDF for another.
func TestChatKeyCoversResultImagesAndDocuments(t *testing.T) {
	base := func() runtime.ChatRequest {
		return runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{
			{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "t1", Name: "Read"}}},
			{Role: "user", Parts: []runtime.ContentPart{
				{Type: runtime.PartToolResult, ToolCallID: "t1"},
				{Type: runtime.PartImage, ToolCallID: "t1", ImageURL: "data:image/png;base64,AAAA"},
				{Type: runtime.PartText, Text: "notes", Document: true},
				{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: "data:application/pdf;base64,JVBERi0=", Filename: "q3.pdf"}}}}}
	}
	key := func(r runtime.ChatRequest) string {
		b, err := memoize.ChatKeyInput(&r)
		require.NoError(t, err)
		return string(b)
	}
	first := key(base())
	assert.Equal(t, first, key(base()))
	for name, change := range map[string]func(p []runtime.ContentPart){
		"another screenshot":           func(p []runtime.ContentPart) { p[1].ImageURL = "data:image/png;base64,BBBB" },
		"the screenshot as the user's": func(p []runtime.ContentPart) { p[1].ToolCallID = "" },
		"the document as text":         func(p []runtime.ContentPart) { p[2].Document = false },
		"another PDF":                  func(p []runtime.ContentPart) { p[3].ImageURL = "data:application/pdf;base64,JVBERi1=" },
		"another file name":            func(p []runtime.ContentPart) { p[3].Filename = "q4.pdf" },
	} {
		r := base()
		change(r.Messages[1].Parts)
		assert.NotEqual(t, first, key(r), name)
	}
}

// A breakpoint on a text document is a cost hint, but the document is
// not plain text: the key of one is not the key of the other.
func TestChatKeyKeepsTextDocumentWithBreakpoint(t *testing.T) {
	key := func(doc bool) string {
		b, err := memoize.ChatKeyInput(&runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{
			{Type: runtime.PartText, Text: "Summarize."},
			{Type: runtime.PartText, Text: "notes", Document: doc, CacheControl: &runtime.CacheControl{Type: "ephemeral"}}}}}})
		require.NoError(t, err)
		return string(b)
	}
	assert.NotEqual(t, key(false), key(true))
}
