package memoize_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/memoize"
	"github.com/agentc-dev/agentc/runtime"
)

// The reasoning controls and the thinking blocks sent back change what the
// model answers: requests that differ by one of them have different keys.
func TestChatKeyInputCoversThinking(t *testing.T) {
	base := func() runtime.ChatRequest {
		return runtime.ChatRequest{Model: "m", Messages: []runtime.Message{
			{Role: "user", Content: "hi"},
			{Role: "assistant", Parts: []runtime.ContentPart{
				{Type: runtime.PartThinking, Text: "think", Signature: "sig-1"},
				{Type: runtime.PartText, Text: "hello"},
			}},
			{Role: "user", Content: "again"},
		}}
	}
	key := func(r runtime.ChatRequest) string {
		b, err := memoize.ChatKeyInput(&r)
		require.NoError(t, err)
		return string(b)
	}
	seen := map[string]string{key(base()): "base"}
	for name, edit := range map[string]func(*runtime.ChatRequest){
		"thinking enabled":  func(r *runtime.ChatRequest) { r.Thinking = &runtime.Thinking{Type: "enabled", BudgetTokens: 2048} },
		"thinking budget":   func(r *runtime.ChatRequest) { r.Thinking = &runtime.Thinking{Type: "enabled", BudgetTokens: 4096} },
		"thinking adaptive": func(r *runtime.ChatRequest) { r.Thinking = &runtime.Thinking{Type: "adaptive"} },
		"thinking display": func(r *runtime.ChatRequest) {
			r.Thinking = &runtime.Thinking{Type: "adaptive", Display: "omitted"}
		},
		"reasoning effort": func(r *runtime.ChatRequest) { r.ReasoningEffort = "high" },
		"signature":        func(r *runtime.ChatRequest) { r.Messages[1].Parts[0].Signature = "sig-2" },
		"thinking text":    func(r *runtime.ChatRequest) { r.Messages[1].Parts[0].Text = "thought" },
		"redacted": func(r *runtime.ChatRequest) {
			r.Messages[1].Parts[0] = runtime.ContentPart{Type: runtime.PartRedactedThinking, Signature: "sig-1"}
		},
	} {
		r := base()
		edit(&r)
		k := key(r)
		_, dup := seen[k]
		assert.False(t, dup, "%s: same key as %s", name, seen[k])
		seen[k] = name
	}
}

// Where a tool call sits among its message's texts is what the model
// reads: it keys the call, a breakpoint on one of the texts does not.
func TestChatKeyKeepsTheOrderOfCalls(t *testing.T) {
	key := func(after int, bp *runtime.CacheControl) string {
		req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"},
			{Role: "assistant", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "a", CacheControl: bp}, {Type: runtime.PartText, Text: "b"}},
				ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "search", Arguments: []byte(`{}`), PartsAfter: after}}}}}
		b, err := memoize.ChatKeyInput(&req)
		require.NoError(t, err)
		return string(b)
	}
	bp := &runtime.CacheControl{Type: "ephemeral"}
	assert.Equal(t, key(1, nil), key(1, bp), "a breakpoint changes no key")
	assert.NotEqual(t, key(1, nil), key(0, nil), "a call between the texts is another request")
	assert.NotEqual(t, key(1, bp), key(0, bp))
}
