package pii_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

func TestChatScansTextPartsAndToolCallArguments(t *testing.T) {
	parts := []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{
		{Type: runtime.PartImage, ImageURL: "https://x/a.png"},
		{Type: runtime.PartText, Text: "mail me at jane.doe@example.com"}}}}
	_, err := chatPipeline(t, `{}`, &recordingModel{}).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: parts})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b, "block scans text parts")
	assert.Contains(t, b.Message, "email")

	msgs := []runtime.Message{
		parts[0],
		{Role: "assistant", ToolCalls: []runtime.ToolUse{
			{ID: "c1", Name: "send", Arguments: json.RawMessage(`{"to":"jane.doe@example.com","n":1}`)},
			{ID: "c2", Name: "noop", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", ToolCallID: "c1", Content: "sent to jane.doe@example.com"},
	}
	orig, err := json.Marshal(msgs)
	require.NoError(t, err)
	model := &recordingModel{}
	_, err = chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	got := model.seen[0]
	assert.NotContains(t, got[0].Parts[1].Text, "jane.doe@example.com")
	assert.Equal(t, msgs[0].Parts[0], got[0].Parts[0])
	var args map[string]any
	require.NoError(t, json.Unmarshal(got[1].ToolCalls[0].Arguments, &args), "redacted arguments stay valid JSON")
	assert.NotContains(t, args["to"], "jane.doe@example.com")
	assert.Equal(t, 1.0, args["n"])
	assert.JSONEq(t, `{}`, string(got[1].ToolCalls[1].Arguments))
	assert.Equal(t, "sent to [REDACTED:email]", got[2].Content, "tool results are redacted too")
	after, err := json.Marshal(msgs)
	require.NoError(t, err)
	assert.Equal(t, string(orig), string(after), "the caller's messages are untouched")
}

// TestChatRedactAcrossParts: with redact, a value cut across two text parts
// of a message (which the model reads run together) is masked, the text
// around it kept; a card wrapped over two parts as over two lines too.
func TestChatRedactAcrossParts(t *testing.T) {
	text := func(s string) runtime.ContentPart { return runtime.ContentPart{Type: runtime.PartText, Text: s} }
	for _, tt := range []struct {
		name    string
		msg     runtime.Message
		content string
		parts   []string
	}{
		{"card cut in two parts", runtime.Message{Role: "user", Parts: []runtime.ContentPart{text("my card is 4111 1111"), text(" 1111 1111, thanks")}},
			"", []string{"my card is [REDACTED:card]", ", thanks"}},
		{"email cut at the at sign", runtime.Message{Role: "user", Content: "write to jane.doe", Parts: []runtime.ContentPart{text("@example.com please")}},
			"write to [REDACTED:email]", []string{" please"}},
		{"card over three parts", runtime.Message{Role: "tool", ToolCallID: "c1", Parts: []runtime.ContentPart{text("pan 4111"), text("1111"), text("11111111 end")}},
			"", []string{"pan [REDACTED:card]", "", " end"}},
		{"card wrapped over two parts", runtime.Message{Role: "user", Parts: []runtime.ContentPart{text("card 4111 1111"), text("1111 1111")}},
			"", []string{"card [REDACTED:card]", ""}},
		{"each part on its own", runtime.Message{Role: "user", Parts: []runtime.ContentPart{text("ssn 123-45-6789"), text("ok")}},
			"", []string{"ssn [REDACTED:ssn]", "ok"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msgs := []runtime.Message{tt.msg}
			orig, err := json.Marshal(msgs)
			require.NoError(t, err)
			model := &recordingModel{}
			_, err = chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(),
				runtime.ChatRequest{Model: "primary", Messages: msgs})
			require.NoError(t, err)
			got := model.seen[0][0]
			assert.Equal(t, tt.content, got.Content)
			var parts []string
			for _, p := range got.Parts {
				parts = append(parts, p.Text)
			}
			assert.Equal(t, tt.parts, parts)
			after, err := json.Marshal(msgs)
			require.NoError(t, err)
			assert.Equal(t, string(orig), string(after), "the caller's messages are untouched")
		})
	}
}

// A value cut across two consecutive user messages reaches a model whole:
// Anthropic's API merges them into one turn. Redact reads them run
// together, as it reads the parts of one message.
func TestChatRedactAcrossConsecutiveMessages(t *testing.T) {
	msgs := []runtime.Message{
		{Role: "user", Content: "my card is 4111 1111"},
		{Role: "user", Content: "1111 1111, thanks"},
		{Role: "assistant", Content: "noted 4111"},
		{Role: "user", Content: "1111 is not a card"},
	}
	model := &recordingModel{}
	_, err := chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(),
		runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	got := model.seen[0]
	require.Len(t, got, 4)
	assert.Equal(t, "my card is [REDACTED:card]", got[0].Content)
	assert.Equal(t, ", thanks", got[1].Content)
	assert.Equal(t, "noted 4111", got[2].Content, "messages of other roles are not read together")
	assert.Equal(t, "1111 is not a card", got[3].Content)
}

// A value cut across two consecutive user messages is refused in block
// mode, as it is read in redact mode, before the model runs.
func TestChatBlockAcrossConsecutiveMessages(t *testing.T) {
	msgs := []runtime.Message{
		{Role: "user", Content: "my card is 4111 1111"},
		{Role: "user", Content: "1111 1111, thanks"},
	}
	model := &recordingModel{}
	_, err := chatPipeline(t, `{"action":"block"}`, model).Complete(context.Background(),
		runtime.ChatRequest{Model: "primary", Messages: msgs})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Empty(t, model.seen, "the model does not run")
}

// TestChatFieldsTheModelDoesNotRead: the fields a model client receives
// that no model reads are read too, whatever system says (they are the
// caller's). With redact the prompt cache key and the metadata's values
// are masked on the call's copy, and the end user's id, the safety
// identifier and a stop sequence holding personal data refuse the call (a
// masked id would merge end users, a masked stop sequence stop elsewhere);
// with block any of them refuses it.
func TestChatFieldsTheModelDoesNotRead(t *testing.T) {
	hi := []runtime.Message{{Role: "user", Content: "hi"}}
	model := &requestModel{}
	meta := map[string]string{"note": "for ann@example.com", "user_id": "u-1"}
	_, err := chatPipeline(t, `{"action":"redact","system":false}`, model).Complete(context.Background(), runtime.ChatRequest{
		Model: "primary", Messages: hi, PromptCacheKey: "4111 1111 1111 1111", Metadata: meta, SafetyIdentifier: "s-9", Stop: []string{"END"}})
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	assert.Equal(t, "[REDACTED:card]", model.seen[0].PromptCacheKey)
	assert.Equal(t, map[string]string{"note": "for [REDACTED:email]", "user_id": "u-1"}, model.seen[0].Metadata)
	assert.Equal(t, "s-9", model.seen[0].SafetyIdentifier)
	assert.Equal(t, "for ann@example.com", meta["note"], "the caller's map is never modified")

	for _, tt := range []struct {
		config, want string
		req          runtime.ChatRequest
	}{
		{`{"action":"redact"}`, "the end user's id (user, metadata.user_id) holds personal data (email)", runtime.ChatRequest{Metadata: map[string]string{"user_id": "ann@example.com"}}},
		{`{"action":"redact"}`, "the safety identifier (safety_identifier) holds personal data (card)", runtime.ChatRequest{SafetyIdentifier: "4111111111111111"}},
		{`{"action":"redact"}`, "stop sequence 0 (stop, stop_sequences) holds personal data (email)", runtime.ChatRequest{Stop: []string{"ann@example.com"}}},
		{`{}`, "the prompt cache key (prompt_cache_key) contains personal data (card)", runtime.ChatRequest{PromptCacheKey: "4111 1111 1111 1111"}},
		{`{"system":false}`, `metadata "note" contains personal data (email)`, runtime.ChatRequest{Metadata: map[string]string{"note": "ann@example.com"}}},
		{`{}`, "the end user's id (user, metadata.user_id) contains personal data (email)", runtime.ChatRequest{Metadata: map[string]string{"user_id": "ann@example.com"}}},
		{`{}`, `metadata "[REDACTED:email]" contains personal data (email)`, runtime.ChatRequest{Metadata: map[string]string{"ann@example.com": "ann@example.com"}}},
	} {
		model := &requestModel{}
		tt.req.Model, tt.req.Messages = "primary", hi
		_, err := chatPipeline(t, tt.config, model).Complete(context.Background(), tt.req)
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b, tt.want)
		assert.Contains(t, b.Message, tt.want)
		assert.NotContains(t, b.Message, "ann@example.com")
		assert.Empty(t, model.seen, "refused before the model: %s", tt.want)
	}
}

// refusedAndMasked asserts that msgs are refused before the model runs in block mode, and
// returns what the model is sent in redact mode.
func refusedAndMasked(t *testing.T, msgs []runtime.Message) []runtime.Message {
	t.Helper()
	model := &recordingModel{}
	_, err := chatPipeline(t, `{"action":"block"}`, model).Complete(context.Background(),
		runtime.ChatRequest{Model: "primary", Messages: msgs})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Empty(t, model.seen, "the model does not run")

	model = &recordingModel{}
	_, err = chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(),
		runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	return model.seen[0]
}

// A value cut among three pieces or more, between pieces that glue
// themselves to its ends when read run together ("order 12" and "7 done"
// make the card's digits a longer number), is found: block refuses it and
// redact masks it.
func TestChatValueCutAmongGluedPieces(t *testing.T) {
	got := refusedAndMasked(t, []runtime.Message{
		{Role: "user", Content: "order 12"},
		{Role: "user", Content: "4111 1111 "},
		{Role: "user", Content: "1111 1111"},
		{Role: "user", Content: "7 done"},
	})
	var sent strings.Builder
	for _, m := range got {
		sent.WriteString(m.Content)
	}
	assert.NotContains(t, sent.String(), "4111 1111 1111 1111")
	assert.Contains(t, sent.String(), "[REDACTED:card]")
}

// Anthropic's API sends every system message, wherever it sits, as a block
// of the one system prompt: a value cut across two system messages apart
// reaches the model whole, and is refused in block mode and masked in
// redact mode.
func TestChatValueCutAcrossSystemMessagesApart(t *testing.T) {
	got := refusedAndMasked(t, []runtime.Message{
		{Role: "system", Content: "the card on file is 4111 1111"},
		{Role: "user", Content: "hello"},
		{Role: "system", Content: " 1111 1111"},
	})
	assert.Equal(t, "the card on file is [REDACTED:card]", got[0].Content)
	assert.Equal(t, "hello", got[1].Content)
	assert.Empty(t, strings.TrimSpace(got[2].Content))
}

// A value cut across a tool result and the user's text after it reaches a
// Claude model whole: Anthropic's API sends the result as a tool_result
// block of the user turn, before the user's text. Redact masks it and block
// refuses it, whether the call holds a tool message and a user message
// (OpenAI's shape) or one user message with a tool_result part and a text
// part (Anthropic's); a value cut across the assistant's text and the tool
// result after it is in two turns, read apart.
func TestChatAcrossAToolResultAndTheUsersText(t *testing.T) {
	call := runtime.ToolUse{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{}`)}
	for name, msgs := range map[string][]runtime.Message{
		"a tool message": {{Role: "user", Content: "look"}, {Role: "assistant", ToolCalls: []runtime.ToolUse{call}},
			{Role: "tool", ToolCallID: "c1", Content: "card on file 4111 1111"}, {Role: "user", Content: "1111 1111, thanks"}},
		"a tool_result part": {{Role: "user", Content: "look"}, {Role: "assistant", ToolCalls: []runtime.ToolUse{call}},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c1", Text: "card on file 4111 1111"},
				{Type: runtime.PartText, Text: "1111 1111, thanks"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			model := &recordingModel{}
			_, err := chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(),
				runtime.ChatRequest{Model: "primary", Messages: msgs})
			require.NoError(t, err)
			var texts []string
			for _, m := range model.seen[0][2:] {
				texts = append(texts, m.Content)
				for _, p := range m.Parts {
					texts = append(texts, p.Text)
				}
			}
			joined := strings.Join(texts, "")
			assert.NotContains(t, joined, "1111", "%q", texts)
			assert.Contains(t, joined, "card on file [REDACTED:card]")
			assert.Contains(t, joined, ", thanks")

			model = &recordingModel{}
			_, err = chatPipeline(t, `{"action":"block"}`, model).Complete(context.Background(),
				runtime.ChatRequest{Model: "primary", Messages: msgs})
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Empty(t, model.seen, "the model does not run")
		})
	}
	msgs := []runtime.Message{{Role: "user", Content: "look"}, {Role: "assistant", Content: "card 4111 1111", ToolCalls: []runtime.ToolUse{call}},
		{Role: "tool", ToolCallID: "c1", Content: "1111 1111"}}
	model := &recordingModel{}
	_, err := chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(),
		runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, "card 4111 1111", model.seen[0][1].Content)
	assert.Equal(t, "1111 1111", model.seen[0][2].Content)
}

// A card one piece of a turn holds whole, which that piece read alone does not hold (a row of
// four groups joined by tabs is a table's), is masked where the piece before names a card.
func TestChatCardNamedByThePieceBefore(t *testing.T) {
	call := runtime.ToolUse{ID: "c1", Name: "lookup", Arguments: json.RawMessage(`{}`)}
	msgs := []runtime.Message{{Role: "user", Content: "look"}, {Role: "assistant", ToolCalls: []runtime.ToolUse{call}},
		{Role: "tool", ToolCallID: "c1", Content: "card on file:"}, {Role: "user", Content: "4111\t1111\t1111\t1111"}}
	model := &recordingModel{}
	_, err := chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(),
		runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, "card on file:", model.seen[0][2].Content)
	assert.Equal(t, "[REDACTED:card]", model.seen[0][3].Content)
}
