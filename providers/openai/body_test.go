package openai

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/runtime"
)

func ptr[T any](v T) *T { return &v }

// bodyCases are requests of every shape the client encodes.
func bodyCases() map[string]runtime.ChatRequest {
	weather := runtime.ToolDef{Name: "get_weather", Description: "The weather <now> & \"here\".",
		Parameters: json.RawMessage(`{ "type": "object",
			"properties": {"city": {"type": "string", "maxLength": 100}, "n": {"type": "integer", "maximum": 1e3}},
			"required": ["city"] }`)}
	return map[string]runtime.ChatRequest{
		"empty":   {},
		"minimal": {Messages: []runtime.Message{{Role: "system", Content: "You are a support agent."}, {Role: "user", Content: "Where is my order A1234?"}}},
		"escapes": {Messages: []runtime.Message{{Role: "developer", Content: "tabs\tquotes\" back\\slash <html> & \u2028 \x01 bad\xff utf-8 é 😀"},
			{Role: "user", Content: "\n"}}},
		"empty user":  {Messages: []runtime.Message{{Role: "user"}}},
		"max tokens":  {MaxTokens: 77, Messages: []runtime.Message{{Role: "user", Content: "hi"}}},
		"tools":       {Tools: []runtime.ToolDef{weather, {Name: "no_params"}, {Name: "null_params", Parameters: json.RawMessage(`null`)}}, ToolChoice: "auto"},
		"tool choice": {Tools: []runtime.ToolDef{weather}, ToolChoice: "get_weather"},
		"custom tools": {Tools: []runtime.ToolDef{weather,
			{Name: "apply_patch", Description: "Edit files.", Custom: &runtime.CustomTool{Format: runtime.CustomGrammar, Syntax: "lark", Definition: `start: "*** Begin Patch" LF`}},
			{Name: "note", Custom: &runtime.CustomTool{Format: runtime.CustomText}}, {Name: "free", Custom: &runtime.CustomTool{}}},
			ToolChoice: "apply_patch",
			Messages: []runtime.Message{{Role: "user", Content: "fix it"},
				{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "call_1", Name: "apply_patch", Arguments: runtime.CustomArgs("*** Begin Patch\n\"x\""), Custom: true},
					{ID: "call_2", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}},
				{Role: "tool", ToolCallID: "call_1", Content: "Done."}, {Role: "tool", ToolCallID: "call_2", Content: "sunny"}}},
		"strict tools, one call at a time": {Tools: []runtime.ToolDef{{Name: "get_weather", Parameters: weather.Parameters, Strict: true,
			CacheControl: &runtime.CacheControl{Type: "ephemeral"}}}, ParallelToolCalls: ptr(false)},
		"parallel calls allowed":  {Tools: []runtime.ToolDef{weather}, ParallelToolCalls: ptr(true)},
		"parallel without tools":  {ParallelToolCalls: ptr(false)},
		"cache control is a hint": {CacheControl: &runtime.CacheControl{Type: "ephemeral"}, Messages: []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "hi", CacheControl: &runtime.CacheControl{Type: "ephemeral", TTL: "1h"}}}}}},
		"required":                {ToolChoice: "required"},
		"none":                    {ToolChoice: "none"},
		"sampling":                {Temperature: ptr(0.7), TopP: ptr(1e-7), Seed: ptr(int64(-42)), Stop: []string{"\n\n", "END"}},
		"zero sampling":           {Temperature: ptr(0.0), TopP: ptr(1e21), Seed: ptr(int64(0))},
		"big float":               {Temperature: ptr(123456789.125)},
		"reasoning effort":        {ReasoningEffort: "high", Messages: []runtime.Message{{Role: "user", Content: "hi"}}},
		"verbosity":               {Verbosity: "low", Messages: []runtime.Message{{Role: "user", Content: "hi"}}},
		"thinking left out": {Messages: []runtime.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Parts: []runtime.ContentPart{
			{Type: runtime.PartRedactedThinking, Signature: "EmwK"}, {Type: runtime.PartThinking, Text: "hmm", Signature: "EqQB"}, {Type: runtime.PartText, Text: "Hello."}}}}},
		"end user":                   {Metadata: map[string]string{"user_id": "u-42", "team": "ops"}},
		"end user ids and cache key": {Metadata: map[string]string{"user_id": "u-42"}, SafetyIdentifier: "h-9f2c", PromptCacheKey: "tenant-7/support"},
		"penalties and bias":         {FrequencyPenalty: ptr(0.5), PresencePenalty: ptr(-1.25), LogitBias: map[string]int{"50256": -100, "1000": 5, "200": 0}},
		"zero penalties":             {FrequencyPenalty: ptr(0.0), PresencePenalty: ptr(0.0), LogitBias: map[string]int{}},
		"image detail": {Messages: []runtime.Message{{Role: "user", Content: "What is this?", Parts: []runtime.ContentPart{
			{Type: runtime.PartImage, ImageURL: "https://example.com/a.png", Detail: "low"},
			{Type: runtime.PartImage, MediaType: "image/png", Data: []byte{0x89, 'P'}, Detail: "high"},
			{Type: runtime.PartImage, ImageURL: "https://example.com/c.png"}}}}},
		"format text": {ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatText}},
		"format json": {ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatJSONObject}},
		"format schema": {ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "answer", Strict: true,
			Schema: json.RawMessage(` {"type": "object", "properties": {"a": {"type": "number"}}} `)}},
		"format schema defaults": {ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatJSONSchema}},
		"images": {Messages: []runtime.Message{
			{Role: "user", Content: "What is this?", Parts: []runtime.ContentPart{
				{Type: runtime.PartText, Text: "And this?"},
				{Type: runtime.PartImage, ImageURL: "https://example.com/a.png"},
				{Type: runtime.PartImage, MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0, 1, 2}}}},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartImage, ImageURL: "data:image/gif;base64,R0lG"}}}}},
		"documents": {Messages: []runtime.Message{{Role: "user", Content: "Summarize.", Parts: []runtime.ContentPart{
			{Type: runtime.PartText, Text: "Notes of Q3.", Document: true},
			{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: "data:application/pdf;base64,JVBERi0=", Filename: "q3.pdf"},
			{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: "data:application/pdf;base64,JVBERi0x"}}}}},
		"images among texts": {Messages: []runtime.Message{{Role: "user", Content: "Two pictures. ", Parts: []runtime.ContentPart{
			{Type: runtime.PartText, Text: "Image A:"}, {Type: runtime.PartImage, ImageURL: "https://example.com/a.png"},
			{Type: runtime.PartText, Text: "Image B: "}, {Type: runtime.PartText, Text: "(a photo)"},
			{Type: runtime.PartImage, MediaType: "image/png", Data: []byte{0x89, 'P'}},
			{Type: runtime.PartImage, ImageURL: "https://example.com/c.png"}, {Type: runtime.PartText, Text: "Which is larger?"}}}}},
		"tool round": {Messages: []runtime.Message{
			{Role: "user", Content: "weather?"},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)},
				{ID: "call_2", Name: "get_weather"}}},
			{Role: "tool", ToolCallID: "call_1", Content: "sunny"},
			{Role: "tool", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_2", Text: "rain"}, {Type: runtime.PartText, Text: "ignored"}}},
			{Role: "tool", Content: "no id"},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_3", Text: "late"}}},
			{Role: "user", Content: "and now?", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_4", Text: "x"}}},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_5", Text: "connection refused", IsError: true},
				{Type: runtime.PartToolResult, ToolCallID: "call_6", Text: "Error: the tool failed", IsError: true}}},
			{Role: "assistant", Content: "It is sunny.", ToolCalls: []runtime.ToolUse{{ID: "call_5", Name: "n", Arguments: json.RawMessage(`{}`)}}},
			{Role: "assistant"}}},
		"names": {Messages: namedTranscript},
	}
}

// namedTranscript is a group chat: its authors are named on system, user
// and assistant messages; tool messages carry the tool's name, as RunAgent
// sets it.
var namedTranscript = []runtime.Message{
	{Role: "system", Name: "moderator", Content: "Two agents plan a trip."},
	{Role: "developer", Name: "compaction_summary", Content: "Summary of earlier conversation: Lyon."},
	{Role: "user", Name: "alice", Content: "Where do we go?"},
	{Role: "user", Name: "bob", Content: "Look:", Parts: []runtime.ContentPart{{Type: runtime.PartImage, ImageURL: "https://example.com/a.png"}}},
	{Role: "user", Name: "carol", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_0", Text: "late"}}},
	{Role: "assistant", Name: "planner", Content: "Checking.", ToolCalls: []runtime.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Lyon"}`)}}},
	{Role: "tool", Name: "get_weather", ToolCallID: "call_1", Content: "sunny"},
	{Role: "assistant", Name: "critic", Content: "Lyon, then."},
}

// TestBodyNames: the author of a system, user or assistant message is sent
// as its name; a tool message has no name in the API.
func TestBodyNames(t *testing.T) {
	c, err := New(Config{Model: "gpt-4.1-mini"})
	require.NoError(t, err)
	got, err := c.body(&runtime.ChatRequest{Messages: namedTranscript})
	require.NoError(t, err)
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(got, &body))
	var names []any
	for _, m := range body.Messages {
		names = append(names, m["role"], m["name"])
	}
	assert.Equal(t, []any{"system", "moderator", "system", "compaction_summary", "user", "alice", "user", "bob",
		"tool", nil, "assistant", "planner", "tool", nil, "assistant", "critic"}, names, "sent %s", got)
}

// TestBodyKeepsImagesAmongTheirTexts: a user message's texts and images
// are sent in the message's order, so the text that labels an image stays
// next to it (all the text first, then the images, left the model unable
// to tell which label was whose).
func TestBodyKeepsImagesAmongTheirTexts(t *testing.T) {
	c, err := New(Config{Model: "gpt-4.1-mini"})
	require.NoError(t, err)
	req := bodyCases()["images among texts"]
	got, err := c.body(&req)
	require.NoError(t, err)
	var body struct {
		Messages []struct {
			Content []struct {
				Type     string
				Text     string
				ImageURL struct{ URL string } `json:"image_url"`
			}
		}
	}
	require.NoError(t, json.Unmarshal(got, &body), "%s", got)
	require.Len(t, body.Messages, 1)
	var parts []string
	for _, p := range body.Messages[0].Content {
		parts = append(parts, p.Type+" "+p.Text+p.ImageURL.URL)
	}
	assert.Equal(t, []string{"text Two pictures. Image A:", "image_url https://example.com/a.png", "text Image B: (a photo)",
		"image_url data:image/png;base64,iVA=", "image_url https://example.com/c.png", "text Which is larger?"}, parts)
}

// TestBodyMatchesSDK: the body the client encodes holds the same JSON as
// the SDK's encoding of the same request in its parameter types, at the
// OpenAI API and elsewhere.
func TestBodyMatchesSDK(t *testing.T) {
	for _, base := range []string{"", "http://127.0.0.1:9/v1"} {
		c, err := New(Config{Model: "gpt-4.1-mini", BaseURL: base, MaxTokens: 500})
		require.NoError(t, err)
		for name, req := range bodyCases() {
			t.Run(name, func(t *testing.T) {
				got, err := c.body(&req)
				require.NoError(t, err)
				p, err := c.sdkParams(&req)
				require.NoError(t, err)
				ssetest.AssertSameBody(t, got, p, map[string]any{"stream": true}) // NewStreaming sets it
			})
		}
	}
}

// TestBodyErrors: a request the SDK's types could not hold fails with the
// same error.
func TestBodyErrors(t *testing.T) {
	c, err := New(Config{Model: "m"})
	require.NoError(t, err)
	for name, req := range map[string]runtime.ChatRequest{
		"role":       {Messages: []runtime.Message{{Role: "user", Content: "a"}, {Role: "robot"}}},
		"params":     {Tools: []runtime.ToolDef{{Name: "t", Parameters: json.RawMessage(`["a"]`)}}},
		"params bad": {Tools: []runtime.ToolDef{{Name: "t", Parameters: json.RawMessage(`{"a":`)}}},
		"format":     {ResponseFormat: &runtime.ResponseFormat{Type: "yaml"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, want := c.sdkParams(&req)
			require.Error(t, want)
			_, got := c.body(&req)
			require.Error(t, got)
			if name != "params bad" { // encoding/json's error, not compaction's
				assert.Equal(t, want.Error(), got.Error())
			}
		})
	}
	_, err = c.body(&runtime.ChatRequest{Temperature: ptr(math.NaN())})
	assert.ErrorContains(t, err, "temperature: not a finite number")
	// Anthropic's beta features cannot be honoured here: the call fails
	// rather than run without them.
	_, err = c.body(&runtime.ChatRequest{Betas: []string{"interleaved-thinking-2025-05-14"}})
	assert.ErrorContains(t, err, "anthropic-beta: interleaved-thinking-2025-05-14")
	// Nor an image a tool returned: a tool message holds text alone.
	_, err = c.body(&runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{
		{Type: runtime.PartToolResult, ToolCallID: "toolu_1"}, {Type: runtime.PartImage, ToolCallID: "toolu_1", ImageURL: "https://example.com/a.png"}}}}})
	assert.ErrorIs(t, err, runtime.ErrProviderRefused)
	assert.ErrorContains(t, err, "messages[0]: the result of tool call toolu_1 holds an image")
	// Nor more stop sequences than the API's 4 (an Anthropic client's
	// stop_sequences have no such bound): the API would refuse them.
	_, err = c.body(&runtime.ChatRequest{Stop: []string{"a", "b", "c", "d", "e"}})
	assert.ErrorIs(t, err, runtime.ErrProviderRefused)
	assert.ErrorContains(t, err, "5 stop sequences, more than the 4")
	_, err = c.body(&runtime.ChatRequest{Stop: []string{"a", "b", "c", "d"}})
	assert.NoError(t, err)
	// Nor Anthropic's top_k.
	_, err = c.body(&runtime.ChatRequest{TopK: ptr(5)})
	assert.ErrorIs(t, err, runtime.ErrProviderRefused)
	assert.ErrorContains(t, err, "top_k 5")
	// Nor can extended thinking, a token budget: the call fails.
	_, err = c.body(&runtime.ChatRequest{Thinking: &runtime.Thinking{Type: "enabled", BudgetTokens: 2048}})
	assert.ErrorContains(t, err, `extended thinking (thinking type "enabled")`)
	// Nor Anthropic's effort, which bounds the whole answer.
	_, err = c.body(&runtime.ChatRequest{Effort: "high"})
	assert.ErrorIs(t, err, runtime.ErrProviderRefused)
	assert.ErrorContains(t, err, `output_config.effort "high"`)
	// Clearing old tool results would leave out what the model reads:
	// refused. Clearing thinking blocks, which never reach the model,
	// asks for nothing and is left out.
	clearTools := runtime.ContextEdit{Type: runtime.ClearToolUses, Params: json.RawMessage(`{"type":"clear_tool_uses_20250919"}`)}
	clearThinking := runtime.ContextEdit{Type: runtime.ClearThinking, Params: json.RawMessage(`{"type":"clear_thinking_20251015","keep":"all"}`)}
	_, err = c.body(&runtime.ChatRequest{ContextEdits: []runtime.ContextEdit{clearThinking, clearTools}})
	assert.ErrorIs(t, err, runtime.ErrProviderRefused)
	assert.ErrorContains(t, err, "clear_tool_uses_20250919")
	hello := []runtime.Message{{Role: "user", Content: "hi"}}
	plain, err := c.body(&runtime.ChatRequest{Messages: hello})
	require.NoError(t, err)
	got, err := c.body(&runtime.ChatRequest{Messages: hello, ContextEdits: []runtime.ContextEdit{clearThinking}})
	require.NoError(t, err)
	assert.Equal(t, string(plain), string(got))
}

func BenchmarkBody(b *testing.B) {
	c, err := New(Config{Model: "gpt-4.1-mini"})
	require.NoError(b, err)
	req := bodyCases()["minimal"]
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			p, _ := c.sdkParams(&req)
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := c.body(&req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestBodyRunsTextPartsTogether: a message's adjacent text parts were
// sent joined by line breaks, while a guard's m.content reads them run
// together, as a Claude model reads separate text blocks: "wire" and
// " transfer" (across a prompt-cache breakpoint, or in a system message)
// reached the model as "wire\n transfer". They are sent as the guard reads
// them (runtime.Message.RunsOn): run together, and on a new line where a
// tool call stood between them or in a tool message, one result.
func TestBodyRunsTextPartsTogether(t *testing.T) {
	c, err := New(Config{Model: "gpt-4.1-mini"})
	require.NoError(t, err)
	text := func(s string) runtime.ContentPart { return runtime.ContentPart{Type: runtime.PartText, Text: s} }
	breakpoint := text("wire")
	breakpoint.CacheControl = &runtime.CacheControl{Type: "ephemeral"}
	req := runtime.ChatRequest{Messages: []runtime.Message{
		{Role: "system", Parts: []runtime.ContentPart{text("wire"), text(" transfer")}},
		{Role: "user", Parts: []runtime.ContentPart{breakpoint, text(" transfer")}},
		{Role: "assistant", Parts: []runtime.ContentPart{text("wire"), text("transfer")},
			ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{}`), PartsAfter: 1}}},
		{Role: "tool", ToolCallID: "c1", Parts: []runtime.ContentPart{text("wire"), text("transfer")}},
	}}
	got, err := c.body(&req)
	require.NoError(t, err)
	var body struct{ Messages []struct{ Content string } }
	require.NoError(t, json.Unmarshal(got, &body), "%s", got)
	var contents []string
	for _, m := range body.Messages {
		contents = append(contents, m.Content)
	}
	assert.Equal(t, []string{"wire transfer", "wire transfer", "wire\ntransfer", "wire\ntransfer"}, contents)
}
