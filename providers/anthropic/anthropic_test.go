package anthropic_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/providers/anthropic"
	"github.com/agentc-dev/agentc/runtime"
)

const testKey = "sk-ant-test-0123456789abcdef"

func client(t testing.TB, s *ssetest.Server) *anthropic.Client {
	t.Helper()
	c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, BaseURL: s.URL})
	require.NoError(t, err)
	return c
}

func hi() runtime.ChatRequest {
	return runtime.ChatRequest{Model: "backup", Messages: []runtime.Message{{Role: "system", Content: "be kind"}, {Role: "user", Content: "hi"}}}
}

func sum(ds []runtime.Delta) runtime.Usage {
	var u runtime.Usage
	for _, d := range ds {
		u.Add(d.Usage)
	}
	return u
}

func TestTextStream(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", ssetest.Text(ds))
	require.Len(t, ds, 4)
	assert.Equal(t, runtime.Usage{InputTokens: 472}, ds[0].Usage, "message_start's input usage rides on the first delta")
	assert.Equal(t, runtime.Delta{FinishReason: "stop", Usage: runtime.Usage{OutputTokens: 15}}, ds[3])
	assert.Equal(t, runtime.Usage{InputTokens: 472, OutputTokens: 15}, sum(ds))

	var body map[string]any
	require.NoError(t, json.Unmarshal(s.Bodies()[0], &body))
	assert.Equal(t, "claude-sonnet-4-5", body["model"])
	assert.Equal(t, true, body["stream"])
	assert.EqualValues(t, anthropic.DefaultMaxTokens, body["max_tokens"])
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "be kind"}}, body["system"])
	assert.Equal(t, []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "hi"}}}}, body["messages"])
	assert.Equal(t, "Bearer "+testKey, s.Headers()[0].Get("Authorization"), "the SDK sends the key as a bearer token")
	assert.NotEmpty(t, s.Headers()[0].Get("Anthropic-Version"))
}

func TestToolUseBlocksBecomeFragments(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "tool_use.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	assert.Equal(t, "I'll check the weather in both cities.", ssetest.Text(ds))
	calls := ssetest.ToolCalls(ds)
	require.Len(t, calls, 2)
	assert.Equal(t, runtime.ToolUse{ID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "get_weather", Arguments: json.RawMessage(`{"location": "Paris"}`)}, calls[0])
	assert.Equal(t, runtime.ToolUse{ID: "toolu_01VQuyBZGq4pPhHSYH3YYSZr", Name: "get_weather", Arguments: json.RawMessage(`{"location": "Tokyo"}`)}, calls[1])
	last := ds[len(ds)-1]
	assert.Equal(t, "tool_calls", last.FinishReason)
	assert.Equal(t, runtime.Usage{InputTokens: 2334, CachedInputTokens: 2048, OutputTokens: 89}, sum(ds), "cache reads count as input, and as cached")
}

func TestErrorEventMidStream(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "error_mid_stream.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Equal(t, "Once upon a time", ssetest.Text(ds))
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Contains(t, err.Error(), "anthropic claude-sonnet-4-5: stream failed mid-stream after 2 deltas: overloaded_error: Overloaded")
}

func TestErrorEventBeforeOutput(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "error_first.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Empty(t, ds, "message_start alone delivers nothing: the call is not committed")
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Contains(t, err.Error(), "stream error before any output: overloaded_error: Overloaded")
	assert.Equal(t, runtime.Usage{InputTokens: 12}, ce.Usage, "the input message_start announced is billed: the error carries it")
	assert.Equal(t, &wire.Detail{Provider: "anthropic", Type: "overloaded_error", Overloaded: true}, wire.DetailOf(err), "the event's own type")
}

func TestHTTPErrorsAreClassified(t *testing.T) {
	ssetest.RunStatusCases(t, testKey, func(t testing.TB, s *ssetest.Server) runtime.ModelClient { return client(t, s) }, hi(), []ssetest.StatusCase{
		ssetest.Case("529 overloaded", 529, map[string]string{"Retry-After": "3"}, "529.json", runtime.KindTransient, 3*time.Second, "anthropic claude-sonnet-4-5: 529 Overloaded: overloaded_error: Overloaded").
			Says(wire.Detail{Provider: "anthropic", Type: "overloaded_error", Overloaded: true}),
		ssetest.Case("400 context limit", 400, nil, "400_context_limit.json", runtime.KindPermanent, 0, "exceed context limit").
			Says(wire.Detail{Provider: "anthropic", Type: "invalid_request_error", ContextLength: true}),
		ssetest.Case("429", 429, map[string]string{"Retry-After": "12"}, "429.json", runtime.KindRateLimited, 12*time.Second, "429 Too Many Requests: rate_limit_error: This request would exceed"),
		ssetest.Case("400 prompt too long", 400, nil, "400_prompt_too_long.json", runtime.KindPermanent, 0, "prompt is too long").
			Says(wire.Detail{Provider: "anthropic", Type: "invalid_request_error", ContextLength: true}),
		ssetest.Case("401", 401, nil, "401.json", runtime.KindPermanent, 0, "authentication_error: invalid x-api-key").Refused(),
		ssetest.Case("402 billing", 402, nil, "402_billing.json", runtime.KindPermanent, 0, "billing_error: Your credit balance is too low").Refused(),
		ssetest.Case("403 permission", 403, nil, "403_permission.json", runtime.KindPermanent, 0, "permission_error").Refused(),
		ssetest.Case("404 model", 404, nil, "404_not_found.json", runtime.KindPermanent, 0, "not_found_error: model: claude-sonnet-4-0").Refused(),
		ssetest.Case("500", 500, nil, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, runtime.KindTransient, 0, "500 Internal Server Error: api_error"),
	})
}

func TestConnectionDroppedMidStream(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse"), DropAfter: 5})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Equal(t, "Hello! How can", ssetest.Text(ds))
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Contains(t, err.Error(), "mid-stream after 2 deltas")
	assert.Equal(t, runtime.Usage{InputTokens: 472}, sum(ds), "the input rode on the first delta")
	assert.Zero(t, ce.Usage, "the error carries nothing a delta carried, nor an output count the stream never reported")
}

// A stream cut after its message_delta, before message_stop, carries the
// output count the message_delta reported.
func TestConnectionDroppedBeforeMessageStopCarriesTheOutput(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse"), DropAfter: 8})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Equal(t, "Hello! How can I help you today?", ssetest.Text(ds))
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.Usage{InputTokens: 472}, sum(ds))
	assert.Equal(t, runtime.Usage{OutputTokens: 15}, ce.Usage)
}

// A stream cut after message_start, before any delta, carries the input
// it announced, cache reads and writes included, on its error.
func TestConnectionDroppedBeforeOutputCarriesTheInput(t *testing.T) {
	start := `event: message_start
data: {"type":"message_start","message":{"usage":{"input_tokens":30,"cache_read_input_tokens":100,"cache_creation_input_tokens":50,"output_tokens":1}}}

`
	s := ssetest.New(t, ssetest.Reply{Body: start + ssetest.Transcript(t, "text.sse"), DropAfter: 1})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Empty(t, ds)
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Equal(t, runtime.Usage{InputTokens: 180, CachedInputTokens: 100, CacheWriteInputTokens: 50}, ce.Usage)
}

func TestConsumerThatStopsClosesTheConnection(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse"), HoldOpen: true})
	req := hi()
	n := 0
	err := client(t, s).Stream(context.Background(), &req, func(runtime.Delta) bool { n++; return false })
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	select {
	case <-s.Gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server still holds the stream: the client did not close it")
	}
}

func TestRequestCarriesTheCallModel(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse")})
	temp := 0.3
	req := runtime.ChatRequest{
		Model: "backup",
		Messages: []runtime.Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "weather in Paris and Tokyo?", Parts: []runtime.ContentPart{{Type: runtime.PartImage, MediaType: "image/png", Data: []byte("PNG")}}},
			{Role: "assistant", Content: "Checking.", ToolCalls: []runtime.ToolUse{
				{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`)},
				{ID: "toolu_2", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Tokyo"}`)}}},
			{Role: "tool", ToolCallID: "toolu_1", Content: `{"temp_c":21}`},
			{Role: "tool", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "toolu_2", Text: "refused by policy", IsError: true}}},
		},
		MaxTokens:   256,
		Tools:       []runtime.ToolDef{{Name: "get_weather", Description: "Current weather", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"],"additionalProperties":false}`)}},
		ToolChoice:  "required",
		Temperature: &temp,
		Stop:        []string{"END"},
		Metadata:    map[string]string{"user_id": "u-42"},
	}
	_, err := ssetest.Collect(t, client(t, s), req)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 256, "temperature": 0.3,
		"system": [{"type": "text", "text": "be brief"}],
		"messages": [
			{"role": "user", "content": [{"type": "text", "text": "weather in Paris and Tokyo?"},
				{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "UE5H"}}]},
			{"role": "assistant", "content": [{"type": "text", "text": "Checking."},
				{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}},
				{"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"location": "Tokyo"}}]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "{\"temp_c\":21}"}], "is_error": false},
				{"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "refused by policy"}], "is_error": true}]}
		],
		"tools": [{"name": "get_weather", "description": "Current weather",
			"input_schema": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"], "additionalProperties": false}}],
		"tool_choice": {"type": "any"},
		"stop_sequences": ["END"],
		"metadata": {"user_id": "u-42"}
	}`, string(s.Bodies()[0]))
}

func TestCompleteStreamsReuseOneConnection(t *testing.T) {
	ssetest.AssertOneConnection(t, func(t testing.TB, s *ssetest.Server) runtime.ModelClient { return client(t, s) },
		ssetest.Transcript(t, "text.sse"), hi(), 20)
}

func TestFieldOfUnexpectedTypeReadsAsZero(t *testing.T) {
	// A field the client reads sent with another JSON type is lost, not
	// the stream.
	body := "event: message_start\n" + `data: {"type":"message_start","message":{"usage":{"input_tokens":"12","output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}` + "\n\n" +
		"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}` + "\n\n" +
		"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
	s := ssetest.New(t, ssetest.Reply{Body: body})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	assert.Equal(t, "Hi", ssetest.Text(ds))
	assert.Equal(t, runtime.Usage{OutputTokens: 2}, sum(ds))
	assert.Equal(t, "stop", ds[len(ds)-1].FinishReason)
}

// TestCarriedFields: a strict tool, prompt-cache breakpoints (request,
// system, text, image, tool_use, tool_result, tool), one tool call at a
// time and beta features reach the API as its own fields and header; the
// stop sequence the model stopped at, the tokens written to the cache and
// the request's id come back.
func TestCarriedFields(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "stop_sequence.sse"), Header: map[string]string{"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"}})
	eph := &runtime.CacheControl{Type: "ephemeral"}
	hour := &runtime.CacheControl{Type: "ephemeral", TTL: "1h"}
	req := runtime.ChatRequest{Model: "backup", CacheControl: eph, ParallelToolCalls: ptr(false), Betas: []string{"a-2025-01-01", "b-2025-02-02"},
		Tools: []runtime.ToolDef{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`), Strict: true, CacheControl: hour}},
		Messages: []runtime.Message{
			{Role: "system", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "be kind"}, {Type: runtime.PartText, Text: "be brief", CacheControl: hour}}},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "count", CacheControl: eph},
				{Type: runtime.PartImage, ImageURL: "https://example.com/a.png", CacheControl: eph}}},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{}`), CacheControl: eph}}},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "toolu_1", Text: "sunny", CacheControl: eph}}},
		}}
	var id string
	ctx := runtime.WithUpstreamRequestID(context.Background(), noteID(func(s string) { id = s }))
	var ds []runtime.Delta
	require.NoError(t, client(t, s).Stream(ctx, &req, func(d runtime.Delta) bool { ds = append(ds, d); return true }))
	last := ds[len(ds)-1]
	assert.Equal(t, "stop", last.FinishReason)
	assert.Equal(t, "FOUR", last.StopSequence)
	assert.Equal(t, runtime.Usage{InputTokens: 1820, CachedInputTokens: 300, CacheWriteInputTokens: 1500, OutputTokens: 6}, sum(ds))
	assert.Equal(t, "req_011CSHoEeqs5C35K2UUqR7Fy", id)

	assert.Equal(t, "a-2025-01-01,b-2025-02-02", s.Headers()[0].Get("Anthropic-Beta"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(s.Bodies()[0], &body))
	ephJSON, hourJSON := map[string]any{"type": "ephemeral"}, map[string]any{"type": "ephemeral", "ttl": "1h"}
	assert.Equal(t, ephJSON, body["cache_control"])
	assert.Equal(t, map[string]any{"type": "auto", "disable_parallel_tool_use": true}, body["tool_choice"])
	tool := body["tools"].([]any)[0].(map[string]any)
	assert.Equal(t, true, tool["strict"])
	assert.Equal(t, hourJSON, tool["cache_control"])
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "be kind"}, map[string]any{"type": "text", "text": "be brief", "cache_control": hourJSON}}, body["system"])
	msgs := body["messages"].([]any)
	block := func(m, b int) map[string]any {
		return msgs[m].(map[string]any)["content"].([]any)[b].(map[string]any)
	}
	for _, at := range [][2]int{{0, 0}, {0, 1}, {1, 0}, {2, 0}} {
		assert.Equal(t, ephJSON, block(at[0], at[1])["cache_control"], "message %d block %d", at[0], at[1])
	}
}

// A request without the fields sends none of them.
func TestCarriedFieldsAbsent(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse")})
	req := hi()
	req.Tools = []runtime.ToolDef{{Name: "get_weather"}}
	req.ParallelToolCalls = ptr(true)
	_, err := ssetest.Collect(t, client(t, s), req)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(s.Bodies()[0], &body))
	assert.NotContains(t, body, "cache_control")
	assert.NotContains(t, body, "tool_choice")
	assert.NotContains(t, body["tools"].([]any)[0], "strict")
	assert.Empty(t, s.Headers()[0].Get("Anthropic-Beta"))
}

func ptr[T any](v T) *T { return &v }

// noteID is a func as runtime.UpstreamRequestIDs.
type noteID func(string)

func (f noteID) NoteUpstreamRequestID(id string) { f(id) }

// The status decides the kind; x-should-retry is the provider's word on a
// retry of the same model, carried as the error's hint; a failure that is
// not retried carries no delay.
func TestRetryHeadersOfAnErrorResponse(t *testing.T) {
	ssetest.RunStatusCases(t, testKey, func(t testing.TB, s *ssetest.Server) runtime.ModelClient { return client(t, s) }, hi(), []ssetest.StatusCase{
		ssetest.Case("500 x-should-retry false", 500, map[string]string{"X-Should-Retry": "false"}, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, runtime.KindTransient, 0, "500 Internal Server Error: api_error").Hinted(runtime.RetryNo),
		ssetest.Case("429 x-should-retry false", 429, map[string]string{"X-Should-Retry": "false", "Retry-After": "5"}, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, runtime.KindRateLimited, 5e9, "429 Too Many Requests: rate_limit_error").Hinted(runtime.RetryNo),
		ssetest.Case("400 x-should-retry true", 400, map[string]string{"X-Should-Retry": "true"}, `{"type":"error","error":{"type":"invalid_request_error","message":"x"}}`, runtime.KindPermanent, 0, "400 Bad Request").Hinted(runtime.RetryYes),
		ssetest.Case("400 retry-after", 400, map[string]string{"Retry-After": "5"}, `{"type":"error","error":{"type":"invalid_request_error","message":"x"}}`, runtime.KindPermanent, 0, "400 Bad Request"),
	})
}

// A paused turn (pause_turn) is not a finished answer: its finish reason
// says so instead of stop.
func TestPausedTurnIsNotAStop(t *testing.T) {
	body := `event: message_start
data: {"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Searching"}}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"pause_turn","stop_sequence":null},"usage":{"output_tokens":3}}

event: message_stop
data: {"type":"message_stop"}

`
	s := ssetest.New(t, ssetest.Reply{Body: body})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	require.NotEmpty(t, ds)
	assert.Equal(t, anthropic.FinishPauseTurn, ds[len(ds)-1].FinishReason)
	assert.Equal(t, runtime.Usage{InputTokens: 10, OutputTokens: 3}, sum(ds))
}

// A refusal's stop_details explain it: the explanation arrives as text
// marked the model's refusal (runtime.Delta.Refusal), after the text the
// model wrote before it was stopped, so that a caller (an OpenAI client of
// the gateway, in message.refusal) reads why. Without an explanation
// (null) nothing is added.
func TestRefusalExplanation(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "refusal.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	var text, refusal string
	for _, d := range ds {
		if d.Refusal {
			refusal += d.Text
		} else {
			text += d.Text
		}
	}
	assert.Equal(t, "Here is how to", text)
	assert.Equal(t, "The request asks for help writing malware.", refusal)
	assert.Equal(t, runtime.FinishContentFilter, ds[len(ds)-1].FinishReason)
	assert.Equal(t, runtime.Usage{InputTokens: 25, OutputTokens: 9}, sum(ds))

	body := strings.Replace(ssetest.Transcript(t, "refusal.sse"), `"explanation":"The request asks for help writing malware."`, `"explanation":null`, 1)
	s = ssetest.New(t, ssetest.Reply{Body: body})
	ds, err = ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	for _, d := range ds {
		assert.False(t, d.Refusal, "no explanation, no refusal text")
	}
	assert.Equal(t, runtime.FinishContentFilter, ds[len(ds)-1].FinishReason)
}

// A message_delta whose cumulative usage reports more input than the
// message_start did (cache reads a server tool's turn added) is counted
// whole: the input a meter compares with a long-context tier's threshold
// is the final one, cache reads and writes included, not the first
// report's.
func TestFinalUsageReportAboveTheFirst(t *testing.T) {
	body := "event: message_start\n" + `data: {"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}` + "\n\n" +
		"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":10,"cache_read_input_tokens":150000,"cache_creation_input_tokens":60000,"output_tokens":5}}` + "\n\n" +
		"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
	s := ssetest.New(t, ssetest.Reply{Body: body})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	assert.Equal(t, runtime.Usage{InputTokens: 210_010, CachedInputTokens: 150_000, CacheWriteInputTokens: 60_000, OutputTokens: 5}, sum(ds))
}

// An upstream that sends one event of endless data lines is read only up
// to the event bound (the SDK's decoder, which reads the stream, bounds no
// event).
func TestEndlessEventIsCut(t *testing.T) {
	ssetest.AssertEndlessEventCut(t, testKey, newClient(t), hi(), "event: message_start\n"+
		`data: {"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}`+"\n\n"+
		"event: content_block_delta\n")
}

// A stream of keep-alives only is held until the caller's deadline.
func TestKeepAlivesOnlyEndAtTheCallersDeadline(t *testing.T) {
	ssetest.AssertHeldByKeepAlives(t, newClient(t), hi())
}

func newClient(t *testing.T) func(string) runtime.ModelClient {
	return func(url string) runtime.ModelClient {
		c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, BaseURL: url})
		require.NoError(t, err)
		return c
	}
}

// An absurd usage report stays absurd: a count beyond int64 (1e300) is the
// largest count, not zero, and input counts whose sum passes int64 saturate
// instead of wrapping negative, so
// that the meter refuses the call as absurd usage (fail closed) rather
// than estimating it cheap.
func TestAbsurdUsageStaysAbsurd(t *testing.T) {
	for name, usage := range map[string]string{
		"beyond int64":  `"input_tokens":1e300,"cache_read_input_tokens":0`,
		"sum past it":   `"input_tokens":9000000000000000000,"cache_read_input_tokens":9000000000000000000`,
		"output beyond": `"input_tokens":` + "18446744073709551616" + `,"output_tokens":1e19`,
	} {
		body := strings.Replace(ssetest.Transcript(t, "text.sse"), `"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1`, usage, 1)
		require.NotEqual(t, ssetest.Transcript(t, "text.sse"), body)
		s := ssetest.New(t, ssetest.Reply{Body: body})
		ds, err := ssetest.Collect(t, client(t, s), hi())
		require.NoError(t, err, name)
		assert.Equal(t, int64(1<<63-1), sum(ds).InputTokens, name)
	}
}

// TestNoRedirectToAnotherOrigin: the request carries the key and the
// prompt; a redirect to another origin is not followed, by the client's own
// HTTP client nor by a copy of the host's, and the host's is left as it is.
func TestNoRedirectToAnotherOrigin(t *testing.T) {
	ssetest.AssertNoRedirectElsewhere(t, testKey, newClient(t), hi())
	host := &http.Client{}
	ssetest.AssertNoRedirectElsewhere(t, testKey, func(url string) runtime.ModelClient {
		c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, BaseURL: url, HTTPClient: host})
		require.NoError(t, err)
		return c
	}, hi())
	assert.Nil(t, host.CheckRedirect, "the host's client is not changed")
}

// TestAcceptedThenFailedIsCharged: a stream cut before its first event, or
// a whole message answered to a streaming request, was billed the prompt
// (and what the answer reports).
func TestAcceptedThenFailedIsCharged(t *testing.T) {
	ssetest.AssertAcceptedThenFailedIsCharged(t, testKey, newClient(t), hi(),
		`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":80,"cache_read_input_tokens":20,"output_tokens":50}}`,
		runtime.Usage{InputTokens: 100, OutputTokens: 50, CachedInputTokens: 20})
}

func TestRequestIDOnError(t *testing.T) {
	ssetest.AssertRequestIDOnError(t, newClient(t), hi(), "request-id")
}

func TestStreamContentTypes(t *testing.T) {
	ssetest.AssertStreamContentTypes(t, newClient(t), hi())
}
