package anthropic

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

// bodyCases are the request shapes the gateway sends.
func bodyCases() map[string]runtime.ChatRequest {
	cc := &runtime.CacheControl{Type: "ephemeral"}
	hour := &runtime.CacheControl{Type: "ephemeral", TTL: "1h"}
	weather := runtime.ToolDef{Name: "get_weather", Description: "The weather of a place.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["location",3],"additionalProperties":false,"$defs":{"a":{"type":"integer","minimum":1.5}}}`)}
	transcript := []runtime.Message{
		{Role: "system", Content: "Be brief."},
		{Role: "developer", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "Cache me.", CacheControl: hour}, {Type: runtime.PartText}}},
		{Role: "user", Content: "What is the weather in \"Paris\"?\n", Parts: []runtime.ContentPart{
			{Type: runtime.PartImage, ImageURL: "https://example.com/a.png"},
			{Type: runtime.PartImage, ImageURL: "data:image/png;base64,iVBORw0KGgo=", CacheControl: cc},
			{Type: runtime.PartImage, MediaType: "image/jpeg", Data: []byte{0xff, 0xd8, 0xff}},
			{Type: runtime.PartText, Text: "Thanks \u2028 <b>&</b>", CacheControl: cc}}},
		{Role: "assistant", Content: "Let me check.", ToolCalls: []runtime.ToolUse{
			{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"location": "Paris"}`)},
			{ID: "toolu_2", Name: "get_weather", CacheControl: cc}}},
		{Role: "tool", ToolCallID: "toolu_1", Content: "18C"},
		{Role: "tool", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "toolu_2", Text: "failed", IsError: true, CacheControl: cc}}},
		{Role: "assistant", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "It is 18C."}, {Type: runtime.PartText}}},
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "toolu_3", Text: "late"}, {Type: runtime.PartText, Text: "And tomorrow?"}}},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "toolu_4", Name: "get_weather", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", ToolCallID: "toolu_4", Content: "20C"},
		{Role: "user"},
	}
	// A tool message whose text is in text parts (an OpenAI client's
	// array content) answers its call with that text.
	partsResult := []runtime.Message{
		{Role: "user", Content: "Weather?"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "toolu_5", Name: "get_weather", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", ToolCallID: "toolu_5", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "18C"}, {Type: runtime.PartText, Text: "sunny"}}},
	}
	hello := []runtime.Message{{Role: "user", Content: "Hello"}}
	thinking := []runtime.Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", Parts: []runtime.ContentPart{
			{Type: runtime.PartRedactedThinking, Signature: "EmwKAhgBEgy3va3pzix/LafPsn4a+oA=="},
			{Type: runtime.PartThinking, Text: "Call \"get_weather\".\n", Signature: "EqQBCgIYAhIM1gbcDa9G/+w=="},
			{Type: runtime.PartText, Text: "Let me check."}},
			ToolCalls: []runtime.ToolUse{{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`)}}},
		{Role: "tool", ToolCallID: "toolu_1", Content: "18C"},
	}
	// Interleaved thinking: thinking, a call, thinking, text, a call; and
	// a call before every part.
	interleaved := []runtime.Message{
		{Role: "user", Content: "Weather in Paris and Lyon?"},
		{Role: "assistant", Parts: []runtime.ContentPart{
			{Type: runtime.PartThinking, Text: "Paris first.", Signature: "EuYBCkQYAiJAQ7nM=="},
			{Type: runtime.PartThinking, Text: "Lyon next.", Signature: "EpMCCkYIBRgCKkDx=="},
			{Type: runtime.PartText, Text: "And Lyon."}},
			ToolCalls: []runtime.ToolUse{
				{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`), PartsAfter: 2},
				{ID: "toolu_2", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Lyon"}`), CacheControl: cc}}},
		{Role: "tool", ToolCallID: "toolu_1", Content: "18C"},
		{Role: "tool", ToolCallID: "toolu_2", Content: "16C"},
		{Role: "assistant", Parts: []runtime.ContentPart{{Type: runtime.PartThinking, Text: "Both known.", Signature: "EqQB=="}},
			ToolCalls: []runtime.ToolUse{{ID: "toolu_3", Name: "get_weather", PartsAfter: 1}}},
		{Role: "tool", ToolCallID: "toolu_3", Content: "20C"},
	}
	// The images a tool returned ride in its result: alone, after its
	// text; a user image after the results stays the user's.
	screenshot := []runtime.Message{
		{Role: "user", Content: "What does it show?"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "toolu_1", Name: "Read"}, {ID: "toolu_2", Name: "Read"}}},
		{Role: "user", Parts: []runtime.ContentPart{
			{Type: runtime.PartToolResult, ToolCallID: "toolu_1"},
			{Type: runtime.PartImage, ToolCallID: "toolu_1", ImageURL: "data:image/png;base64,iVBORw0KGgo="},
			{Type: runtime.PartToolResult, ToolCallID: "toolu_2", Text: "page 1", CacheControl: cc},
			{Type: runtime.PartImage, ToolCallID: "toolu_2", ImageURL: "https://example.com/a.png"},
			{Type: runtime.PartImage, ToolCallID: "toolu_2", MediaType: "image/jpeg", Data: []byte{0xff, 0xd8, 0xff}},
			{Type: runtime.PartImage, ImageURL: "https://example.com/b.png"},
			{Type: runtime.PartText, Text: "Compare."}}},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "toolu_3", Name: "Read"}}},
		{Role: "tool", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "toolu_3"},
			{Type: runtime.PartImage, ToolCallID: "toolu_3", ImageURL: "https://example.com/c.png"}}},
	}
	return map[string]runtime.ChatRequest{
		"tool result images": {Messages: screenshot},
		"documents": {Messages: []runtime.Message{{Role: "user", Content: "Summarize.", Parts: []runtime.ContentPart{
			{Type: runtime.PartText, Text: "Notes of Q3.", Document: true, CacheControl: cc},
			{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: "data:application/pdf;base64,JVBERi0="},
			{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: "https://example.com/q3.pdf", CacheControl: hour}}}}},
		"interleaved":       {Messages: interleaved, MaxTokens: 4096, Thinking: &runtime.Thinking{Type: "enabled", BudgetTokens: 2048}, Tools: []runtime.ToolDef{weather}},
		"plain":             {Messages: hello},
		"results last":      {Messages: transcript[:6]},
		"result parts":      {Messages: partsResult},
		"transcript":        {Messages: transcript, Tools: []runtime.ToolDef{weather}},
		"tools":             {Messages: hello, Tools: []runtime.ToolDef{weather, {Name: "now", Strict: true, CacheControl: cc}, {Name: "noschema", Parameters: json.RawMessage(`{"properties":null,"required":"x"}`)}}},
		"choice auto":       {Messages: hello, Tools: []runtime.ToolDef{weather}, ToolChoice: "auto"},
		"choice none":       {Messages: hello, Tools: []runtime.ToolDef{weather}, ToolChoice: "none", ParallelToolCalls: ptr(false)},
		"choice any":        {Messages: hello, Tools: []runtime.ToolDef{weather}, ToolChoice: "required"},
		"choice tool":       {Messages: hello, Tools: []runtime.ToolDef{weather}, ToolChoice: "get_weather"},
		"serial":            {Messages: hello, Tools: []runtime.ToolDef{weather}, ParallelToolCalls: ptr(false)},
		"serial any":        {Messages: hello, Tools: []runtime.ToolDef{weather}, ToolChoice: "required", ParallelToolCalls: ptr(false)},
		"serial tool":       {Messages: hello, Tools: []runtime.ToolDef{weather}, ToolChoice: "get_weather", ParallelToolCalls: ptr(false)},
		"serial auto":       {Messages: hello, Tools: []runtime.ToolDef{weather}, ToolChoice: "auto", ParallelToolCalls: ptr(false)},
		"parallel":          {Messages: hello, Tools: []runtime.ToolDef{weather}, ParallelToolCalls: ptr(true)},
		"no tools":          {Messages: hello, ParallelToolCalls: ptr(false)},
		"cache":             {Messages: hello, CacheControl: hour},
		"sampling":          {Messages: hello, MaxTokens: 77, Temperature: ptr(0.25), TopP: ptr(1.0), Stop: []string{"\n\nHuman:", "END"}},
		"metadata":          {Messages: hello, Metadata: map[string]string{"user_id": "u-1", "other": "x"}},
		"safety identifier": {Messages: hello, Metadata: map[string]string{"user_id": "u-1"}, SafetyIdentifier: "h-9f2c", PromptCacheKey: "tenant-7"},
		"top_k":             {Messages: hello, TopK: ptr(5), Temperature: ptr(0.5)},
		"neutral penalties": {Messages: hello, FrequencyPenalty: ptr(0.0), PresencePenalty: ptr(0.0), LogitBias: map[string]int{"50256": 0}},
		"image detail": {Messages: []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{
			{Type: runtime.PartImage, ImageURL: "https://example.com/a.png", Detail: "high"}}}}},
		"format":         {Messages: hello, ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "out", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"}}}`)}},
		"format text":    {Messages: hello, ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatText}},
		"thinking":       {Messages: thinking, MaxTokens: 4096, Thinking: &runtime.Thinking{Type: "enabled", BudgetTokens: 2048}, Tools: []runtime.ToolDef{weather}},
		"thinking shown": {Messages: hello, Thinking: &runtime.Thinking{Type: "enabled", BudgetTokens: 1024, Display: "omitted"}},
		"adaptive":       {Messages: hello, Thinking: &runtime.Thinking{Type: "adaptive", Display: "summarized"}},
		"between tools":  {Messages: hello, Thinking: &runtime.Thinking{Type: "between_tools"}},
		"effort":         {Messages: hello, Effort: "xhigh", Thinking: &runtime.Thinking{Type: "adaptive"}},
		"effort format": {Messages: hello, Effort: "low", ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "out",
			Schema: json.RawMessage(`{"type":"object"}`)}},
		"context edits": {Messages: hello, Thinking: &runtime.Thinking{Type: "adaptive"}, ContextEdits: contextEdits(
			`{"type": "clear_thinking_20251015", "keep": "all"}`,
			`{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000}, "keep": {"type": "tool_uses", "value": 3},
			  "clear_at_least": {"type": "input_tokens", "value": 5000}, "exclude_tools": ["web_search"], "clear_tool_inputs": true}`)},
	}
}

// contextEdits decodes context management edits from their JSON objects.
func contextEdits(objects ...string) []runtime.ContextEdit {
	edits := make([]runtime.ContextEdit, len(objects))
	for i, o := range objects {
		if err := edits[i].UnmarshalJSON([]byte(o)); err != nil {
			panic(err)
		}
	}
	return edits
}

// TestBodyMatchesSDK: the body the client encodes is, member for member,
// the one the SDK encodes from the same request in its parameter types
// (with the sampling parameters its options set).
func TestBodyMatchesSDK(t *testing.T) {
	c, err := New(Config{Model: "claude-sonnet-4-5"})
	require.NoError(t, err)
	for name, req := range bodyCases() {
		t.Run(name, func(t *testing.T) {
			got, err := c.body(&req)
			require.NoError(t, err)
			p, _, err := c.sdkParams(&req)
			require.NoError(t, err)
			set := map[string]any{"stream": true} // NewStreaming sets it
			if req.Temperature != nil {
				set["temperature"] = *req.Temperature // the options' WithJSONSet
			}
			if req.TopP != nil {
				set["top_p"] = *req.TopP
			}
			if req.TopK != nil {
				set["top_k"] = float64(*req.TopK)
			}
			ssetest.AssertSameBody(t, got, p, set)
		})
	}
}

func TestBodyErrors(t *testing.T) {
	c, err := New(Config{Model: "m"})
	require.NoError(t, err)
	for name, req := range map[string]runtime.ChatRequest{
		"role":   {Messages: []runtime.Message{{Role: "user", Content: "a"}, {Role: "robot"}}},
		"params": {Tools: []runtime.ToolDef{{Name: "t", Parameters: json.RawMessage(`["a"]`)}}},
		"format": {ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Schema: json.RawMessage(`[1]`)}},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, want := c.sdkParams(&req)
			require.Error(t, want)
			_, got := c.body(&req)
			require.Error(t, got)
			assert.Equal(t, want.Error(), got.Error())
		})
	}
	_, err = c.body(&runtime.ChatRequest{Temperature: ptr(math.NaN())})
	assert.ErrorContains(t, err, "temperature: not a finite number")
	_, err = c.body(&runtime.ChatRequest{Messages: []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "x", Name: "t", Arguments: json.RawMessage(`{"a":`)}}}}})
	assert.ErrorContains(t, err, "arguments are not JSON")
	// Arguments that are JSON but no object (OpenAI's API takes any
	// string) cannot be a tool_use input: the request is refused as one
	// the model cannot honour, not sent to be refused upstream.
	for _, args := range []string{`["Lyon"]`, `"Lyon"`, `null`, ` 42`} {
		_, err = c.body(&runtime.ChatRequest{Messages: []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "call_1", Name: "t", Arguments: json.RawMessage(args)}}}}})
		assert.ErrorIs(t, err, runtime.ErrProviderRefused, args)
		assert.ErrorContains(t, err, "tool call call_1: arguments are JSON but not an object", args)
	}
	_, err = c.body(&runtime.ChatRequest{Messages: []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "call_1", Name: "t", Arguments: json.RawMessage(` {"a": 1}`)}}}}})
	assert.NoError(t, err)
	// An image of a tool result whose result is not before it (a layer
	// left the result out) fails the call rather than be lost.
	_, err = c.body(&runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{
		{Type: runtime.PartText, Text: "a"}, {Type: runtime.PartImage, ToolCallID: "toolu_1", ImageURL: "https://example.com/a.png"}}}}})
	assert.ErrorContains(t, err, "messages[0]: an image of the result of tool call toolu_1 does not follow that result")
	// OpenAI's penalties and logit bias would change the answer, and the
	// API has neither: refused, naming the field and its value.
	for req, want := range map[*runtime.ChatRequest]string{
		{FrequencyPenalty: ptr(0.5)}:               "frequency_penalty 0.5",
		{PresencePenalty: ptr(-1.0)}:               "presence_penalty -1",
		{LogitBias: map[string]int{"50256": -100}}: "logit_bias",
	} {
		_, err = c.body(req)
		assert.ErrorIs(t, err, runtime.ErrProviderRefused, want)
		assert.ErrorContains(t, err, want)
	}
}

func BenchmarkBody(b *testing.B) {
	c, err := New(Config{Model: "claude-sonnet-4-5"})
	require.NoError(b, err)
	req := runtime.ChatRequest{Messages: []runtime.Message{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "Hello! What can you do?"}}}
	b.Run("client", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.body(&req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, _, err := c.sdkParams(&req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A tool message whose text is in text parts reaches Claude with that text,
// not as an empty tool_result.
func TestToolMessageTextParts(t *testing.T) {
	got := caseBody(t, "result parts")
	var body struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(got, &body))
	require.Len(t, body.Messages, 3)
	assert.JSONEq(t, `{"type":"tool_result","tool_use_id":"toolu_5","is_error":false,"content":[{"type":"text","text":"18C\nsunny"}]}`, string(body.Messages[2].Content[0]))
}

// An assistant message of interleaved thinking goes upstream in its order,
// each block byte for byte: thinking, tool_use, thinking, text, tool_use.
func TestInterleavedThinkingSentInItsOrder(t *testing.T) {
	b := caseBody(t, "interleaved")
	assert.Contains(t, string(b), `{"role":"assistant","content":[`+
		`{"type":"thinking","thinking":"Paris first.","signature":"EuYBCkQYAiJAQ7nM=="},`+
		`{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"Paris"}},`+
		`{"type":"thinking","thinking":"Lyon next.","signature":"EpMCCkYIBRgCKkDx=="},`+
		`{"type":"text","text":"And Lyon."},`+
		`{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"location":"Lyon"},"cache_control":{"type":"ephemeral"}}]}`)
	assert.Contains(t, string(b), `{"role":"assistant","content":[`+
		`{"type":"tool_use","id":"toolu_3","name":"get_weather","input":{}},{"type":"thinking","thinking":"Both known.","signature":"EqQB=="}]}`)
}

// caseBody returns the body the client encodes for the request of
// bodyCases named name.
func caseBody(t *testing.T, name string) []byte {
	t.Helper()
	c, err := New(Config{Model: "claude-sonnet-4-5"})
	require.NoError(t, err)
	req := bodyCases()[name]
	b, err := c.body(&req)
	require.NoError(t, err)
	return b
}
