package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/providers/openai"
	"github.com/agentc-dev/agentc/runtime"
)

const testKey = "sk-test-0123456789abcdef"

func client(t testing.TB, s *ssetest.Server) *openai.Client {
	t.Helper()
	c, err := openai.New(openai.Config{Model: "gpt-4.1-mini", APIKey: testKey, BaseURL: s.URL + "/v1"})
	require.NoError(t, err)
	return c
}

// collect streams req and returns the deltas and the error.
func hi() runtime.ChatRequest {
	return runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
}

func TestTextStreamReportsUsageAndFinish(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	assert.Equal(t, "Hello! How can I help you today?", ssetest.Text(ds))
	require.Len(t, ds, 10, "nine text deltas, then finish and usage on one")
	last := ds[len(ds)-1]
	assert.Equal(t, runtime.Delta{FinishReason: "stop", Usage: runtime.Usage{InputTokens: 19, OutputTokens: 10}}, last)
	for _, d := range ds[:9] {
		assert.True(t, d.Usage.IsZero() && d.FinishReason == "", "usage and finish ride on the last delta only")
	}

	require.Equal(t, 1, s.Requests())
	var body map[string]any
	require.NoError(t, json.Unmarshal(s.Bodies()[0], &body))
	assert.Equal(t, "gpt-4.1-mini", body["model"], "the provider's model id, not the policy's name")
	assert.Equal(t, true, body["stream"])
	assert.Equal(t, map[string]any{"include_usage": true}, body["stream_options"])
	assert.Equal(t, []any{map[string]any{"role": "user", "content": "hi"}}, body["messages"])
	assert.Equal(t, "Bearer "+testKey, s.Headers()[0].Get("Authorization"))
}

func TestToolCallFragmentsAssemble(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "tool_call.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	calls := ssetest.ToolCalls(ds)
	require.Len(t, calls, 1)
	assert.Equal(t, "call_DdmO9pD3xa9XTPNJ32zg2hcA", calls[0].ID)
	assert.Equal(t, "get_weather", calls[0].Name)
	assert.JSONEq(t, `{"location":"Paris, France","unit":"c"}`, string(calls[0].Arguments))
	assert.Len(t, ds, 13, "the first fragment names the call, eleven carry arguments, then the finish")
	last := ds[len(ds)-1]
	assert.Equal(t, "tool_calls", last.FinishReason)
	assert.Equal(t, runtime.Usage{InputTokens: 1230, OutputTokens: 18, CachedInputTokens: 1024}, last.Usage)
}

// A function name streamed over several chunks is read as OpenAI's own
// client library reads it: the chunks' names joined, not the last one.
func TestAToolNameSplitOverChunksIsJoinedAsTheSDKJoinsIt(t *testing.T) {
	chunks := []string{
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"delete_","arguments":""}}]},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"all_","arguments":"{\"path\":"}}]},"finish_reason":null}]}`,
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"files","arguments":"\"/\"}"}}]},"finish_reason":"tool_calls"}]}`,
	}
	var body strings.Builder
	var sdk oai.ChatCompletionAccumulator
	for _, c := range chunks {
		body.WriteString("data: " + c + "\n\n")
		var chunk oai.ChatCompletionChunk
		require.NoError(t, json.Unmarshal([]byte(c), &chunk))
		require.True(t, sdk.AddChunk(chunk))
	}
	body.WriteString("data: [DONE]\n\n")
	s := ssetest.New(t, ssetest.Reply{Body: body.String()})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	calls := ssetest.ToolCalls(ds)
	require.Len(t, calls, 1)
	want := sdk.Choices[0].Message.ToolCalls[0]
	assert.Equal(t, "delete_all_files", want.Function.Name)
	assert.Equal(t, want.Function.Name, calls[0].Name)
	assert.Equal(t, want.ID, calls[0].ID)
	assert.JSONEq(t, want.Function.Arguments, string(calls[0].Arguments))
}

func TestParallelToolCalls(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "parallel_tool_calls.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	calls := ssetest.ToolCalls(ds)
	require.Len(t, calls, 2)
	assert.Equal(t, []string{"call_a1", "call_b2"}, []string{calls[0].ID, calls[1].ID})
	assert.JSONEq(t, `{"location":"Paris"}`, string(calls[0].Arguments))
	assert.JSONEq(t, `{"location":"Tokyo"}`, string(calls[1].Arguments))
	assert.Equal(t, runtime.Usage{InputTokens: 82, OutputTokens: 51, ReasoningTokens: 24}, ds[len(ds)-1].Usage)
}

func TestErrorEventMidStream(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "error_mid_stream.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Equal(t, "The answer is", ssetest.Text(ds))
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Contains(t, err.Error(), "openai gpt-4.1-mini: stream failed mid-stream after 2 deltas: server_error: The server had an error")
}

func TestErrorEventBeforeOutput(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "error_first.sse")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Empty(t, ds)
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Contains(t, err.Error(), "stream error before any output")
}

// TestErrorEventsCarryTheProvidersDetail: a stream's error event carries
// its type, code and param; a number in place of the code is a status,
// not a code, and a 503 status there says the server is overloaded.
func TestErrorEventsCarryTheProvidersDetail(t *testing.T) {
	for _, tc := range []struct {
		body string
		want wire.Detail
	}{
		{ssetest.Transcript(t, "error_first.sse"), wire.Detail{Provider: "openai", Type: "server_error"}},
		{ssetest.Transcript(t, "error_status_first.sse"), wire.Detail{Provider: "openai"}},
		{`data: {"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}` + "\n\n",
			wire.Detail{Provider: "openai", Type: "invalid_request_error", Code: "context_length_exceeded", Param: "messages", ContextLength: true}},
		{`data: {"error":{"code":503,"message":"upstream busy"}}` + "\n\n", wire.Detail{Provider: "openai", Overloaded: true}},
	} {
		s := ssetest.New(t, ssetest.Reply{Body: tc.body})
		_, err := ssetest.Collect(t, client(t, s), hi())
		require.Error(t, err)
		assert.Equal(t, &tc.want, wire.DetailOf(err), tc.body)
	}
}

func TestHTTPErrorsAreClassified(t *testing.T) {
	ssetest.RunStatusCases(t, testKey, func(t testing.TB, s *ssetest.Server) runtime.ModelClient { return client(t, s) }, hi(), []ssetest.StatusCase{
		ssetest.Case("429 retry-after-ms", 429, map[string]string{"Retry-After-Ms": "20", "Retry-After": "1"}, "429.json", runtime.KindRateLimited, 20*time.Millisecond,
			"openai gpt-4.1-mini: 429 Too Many Requests: rate_limit_exceeded: Rate limit reached"),
		ssetest.Case("429 retry-after seconds", 429, map[string]string{"Retry-After": "2"}, "429.json", runtime.KindRateLimited, 2*time.Second, "429 Too Many Requests"),
		ssetest.Case("400 context length", 400, nil, "400_context_length.json", runtime.KindPermanent, 0, "context_length_exceeded: This model's maximum context length").
			Says(wire.Detail{Provider: "openai", Type: "invalid_request_error", Code: "context_length_exceeded", Param: "messages", ContextLength: true}),
		ssetest.Case("400 unsupported parameter", 400, nil, "400_unsupported_parameter.json", runtime.KindPermanent, 0, "unsupported_parameter: Unsupported parameter").
			Says(wire.Detail{Provider: "openai", Type: "invalid_request_error", Code: "unsupported_parameter", Param: "max_tokens"}),
		ssetest.Case("400 echoing the key", 400, nil, `{"error":{"message":"bad `+testKey+`","type":"invalid_request_error","param":"`+testKey+`","code":"`+testKey+`"}}`,
			runtime.KindPermanent, 0, "[redacted]: bad [redacted]").
			Says(wire.Detail{Provider: "openai", Type: "invalid_request_error", Code: "[redacted]", Param: "[redacted]"}),
		ssetest.Case("503 overloaded", 503, nil, "503_overloaded.json", runtime.KindTransient, 0, "server_error: The engine is currently overloaded").
			Says(wire.Detail{Provider: "openai", Type: "server_error", Overloaded: true}),
		ssetest.Case("vLLM numeric code", 400, nil, `{"error":{"message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":null,"code":400}}`,
			runtime.KindPermanent, 0, "maximum context length").
			Says(wire.Detail{Provider: "openai", Type: "BadRequestError", ContextLength: true}),
		ssetest.Case("401 echoing the key", 401, nil, "401.json", runtime.KindPermanent, 0, "Incorrect API key provided: [redacted]").Refused(),
		// Out of credit: waiting does not cure it (a 429 of its own kind).
		ssetest.Case("429 insufficient_quota", 429, map[string]string{"Retry-After": "20"}, "429_insufficient_quota.json", runtime.KindPermanent, 0, "insufficient_quota: You exceeded your current quota").Refused(),
		ssetest.Case("404 model", 404, nil, "404_model_not_found.json", runtime.KindPermanent, 0, "model_not_found: The model `gpt-4.1-mini` does not exist").Refused(),
		ssetest.Case("403", 403, nil, `{"error":{"message":"x","type":"x"}}`, runtime.KindPermanent, 0, "403 Forbidden").Refused(),
		ssetest.Case("404", 404, nil, `{"error":{"message":"x","type":"x"}}`, runtime.KindPermanent, 0, "404 Not Found").Refused(),
		ssetest.Case("422", 422, nil, `{"error":{"message":"x","type":"x"}}`, runtime.KindPermanent, 0, "422 Unprocessable Entity"),
		ssetest.Case("408", 408, nil, `{"error":{"message":"x","type":"x"}}`, runtime.KindTransient, 0, "408 Request Timeout"),
		ssetest.Case("409", 409, nil, `{"error":{"message":"x","type":"x"}}`, runtime.KindTransient, 0, "409 Conflict"),
		ssetest.Case("500", 500, nil, `{"error":{"message":"x","type":"x"}}`, runtime.KindTransient, 0, "500 Internal Server Error"),
		ssetest.Case("503", 503, nil, `{"error":{"message":"x","type":"x"}}`, runtime.KindTransient, 0, "503 Service Unavailable"),
	})
}

func TestConnectionDroppedMidStream(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse"), DropAfter: 4})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Equal(t, "Hello! How", ssetest.Text(ds))
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Contains(t, err.Error(), "connection dropped mid-stream after 3 deltas")
}

func TestStreamEndingBeforeTheFinishIsTruncated(t *testing.T) {
	events := ssetest.Events(ssetest.Transcript(t, "text.sse"))
	s := ssetest.New(t, ssetest.Reply{Body: strings.Join(events[:4], "")})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Equal(t, "Hello! How", ssetest.Text(ds))
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Contains(t, err.Error(), "the stream ended before the response was complete (after 3 deltas)")
}

func TestConsumerThatStopsClosesTheConnection(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse"), HoldOpen: true})
	c := client(t, s)
	var got []runtime.Delta
	req := hi()
	err := c.Stream(context.Background(), &req, func(d runtime.Delta) bool {
		got = append(got, d)
		return false
	})
	require.NoError(t, err, "a consumer stop is not an error")
	assert.Len(t, got, 1)
	select {
	case <-s.Gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server still holds the stream: the client did not close it")
	}
}

func TestCancelledCallReturnsTheContextError(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse"), HoldOpen: true})
	c := client(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := hi()
	var n int
	err := c.Stream(ctx, &req, func(runtime.Delta) bool {
		if n++; n == 2 {
			cancel()
		}
		return true
	})
	assert.ErrorIs(t, err, context.Canceled)
}

func TestRequestCarriesTheCallModel(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse")})
	temp, topP, seed := 0.2, 0.9, int64(7)
	req := runtime.ChatRequest{
		Model: "primary",
		Messages: []runtime.Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "weather?", Parts: []runtime.ContentPart{{Type: runtime.PartImage, ImageURL: "https://example.com/sky.png"}}},
			{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"Paris"}`)}}},
			{Role: "tool", ToolCallID: "call_1", Content: `{"temp_c":21}`},
		},
		MaxTokens:      64,
		Tools:          []runtime.ToolDef{{Name: "get_weather", Description: "Current weather", Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}`)}},
		ToolChoice:     "get_weather",
		Temperature:    &temp,
		TopP:           &topP,
		Seed:           &seed,
		Stop:           []string{"END"},
		ResponseFormat: &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "weather", Schema: json.RawMessage(`{"type":"object"}`), Strict: true},
	}
	_, err := ssetest.Collect(t, client(t, s), req)
	require.NoError(t, err)
	assert.JSONEq(t, `{
		"model": "gpt-4.1-mini", "stream": true, "stream_options": {"include_usage": true},
		"messages": [
			{"role": "system", "content": "be brief"},
			{"role": "user", "content": [{"type": "text", "text": "weather?"}, {"type": "image_url", "image_url": {"url": "https://example.com/sky.png"}}]},
			{"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris\"}"}}]},
			{"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\":21}"}
		],
		"max_tokens": 64,
		"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
			"parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}],
		"tool_choice": {"type": "function", "function": {"name": "get_weather"}},
		"temperature": 0.2, "top_p": 0.9, "seed": 7, "stop": ["END"],
		"response_format": {"type": "json_schema", "json_schema": {"name": "weather", "schema": {"type": "object"}, "strict": true}}
	}`, string(s.Bodies()[0]))
}

func TestNewNeedsAModel(t *testing.T) {
	_, err := openai.New(openai.Config{})
	assert.ErrorContains(t, err, "no model id")
}

func TestFieldOfUnexpectedTypeReadsAsZero(t *testing.T) {
	// A server that sends a field the client reads with another JSON type
	// (a string index, a numeric refusal) loses that field, not the stream.
	body := `data: {"choices":[{"index":0,"delta":{"content":"Hi","refusal":7},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":"0","id":"call_1","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":"2"}}` + "\n\n" +
		"data: [DONE]\n\n"
	s := ssetest.New(t, ssetest.Reply{Body: body})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	assert.Equal(t, "Hi", ssetest.Text(ds))
	calls := ssetest.ToolCalls(ds)
	require.Len(t, calls, 1)
	assert.Equal(t, "call_1", calls[0].ID)
	assert.Equal(t, runtime.Delta{FinishReason: "stop", Usage: runtime.Usage{InputTokens: 3}}, ds[len(ds)-1])
}

func TestMalformedChunkFailsTheStream(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: `data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n" + "data: {\"choices\":[\n\n"})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	assert.Equal(t, "Hi", ssetest.Text(ds))
	ce := ssetest.CallError(t, err, testKey)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
}

func TestCompleteStreamsReuseOneConnection(t *testing.T) {
	// Release waits for the drain (of a complete response: at once) longer
	// than any scheduling delay, so the count does not hang on the load.
	defer wire.SetDrainGrace(5 * time.Second)()
	ssetest.AssertOneConnection(t, func(t testing.TB, s *ssetest.Server) runtime.ModelClient { return client(t, s) },
		ssetest.Transcript(t, "text.sse"), hi(), 20)
}

func TestStreamReturnsPromptlyAfterItsLastDelta(t *testing.T) {
	defer wire.SetDrainWait(3 * time.Second)()
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse"), HoldOpen: true})
	var last time.Time
	req := hi()
	err := client(t, s).Stream(context.Background(), &req, func(d runtime.Delta) bool {
		if d.FinishReason != "" {
			last = time.Now()
		}
		return true
	})
	returned := time.Now()
	require.NoError(t, err)
	require.False(t, last.IsZero(), "the stream ended with its finish reason")
	// The server holds the response for 10 s; the drain that ends it, here
	// after 3 s, runs in the background and must not hold the caller: a
	// caller that waited for it would return 3 s after its last delta, a
	// margin no scheduling delay of a loaded machine reaches.
	assert.Less(t, returned.Sub(last), 1500*time.Millisecond, "Stream returns right after its last delta")
	select {
	case <-s.Gone:
	case <-time.After(8 * time.Second):
		t.Fatal("the held response's connection was not closed")
	}
}

func TestResponseHeldOpenAfterDoneIsLeftPromptly(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse"), HoldOpen: true})
	start := time.Now()
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	assert.Equal(t, "stop", ds[len(ds)-1].FinishReason)
	ssetest.AssertLeftPromptly(t, s, start)
}

// The id the API gave the request (x-request-id) is reported to the
// caller's context.
func TestRequestIDIsReported(t *testing.T) {
	s := ssetest.New(t, ssetest.Reply{Body: ssetest.Transcript(t, "text.sse"), Header: map[string]string{"x-request-id": "req_4f2a9c"}})
	var id string
	ctx := runtime.WithUpstreamRequestID(context.Background(), noteID(func(s string) { id = s }))
	req := hi()
	require.NoError(t, client(t, s).Stream(ctx, &req, func(runtime.Delta) bool { return true }))
	assert.Equal(t, "req_4f2a9c", id)
}

// noteID is a func as runtime.UpstreamRequestIDs.
type noteID func(string)

func (f noteID) NoteUpstreamRequestID(id string) { f(id) }

// A refusal (refusal deltas) ends with finish reason content_filter, as
// Anthropic's refusal does, not stop: the caller and a cache can tell it
// from an answer. Its text is the refusal's.
func TestRefusalEndsAsContentFilter(t *testing.T) {
	body := `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"refusal":"I can't help"},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"refusal":" with that."},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5}}` + "\n\n" +
		"data: [DONE]\n\n"
	s := ssetest.New(t, ssetest.Reply{Body: body})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	assert.Equal(t, "I can't help with that.", ssetest.Text(ds))
	for _, d := range ds {
		assert.Equal(t, d.Text != "", d.Refusal, "the refusal's text is marked as one: %+v", d)
	}
	assert.Equal(t, runtime.Delta{FinishReason: runtime.FinishContentFilter, Usage: runtime.Usage{InputTokens: 9, OutputTokens: 5}}, ds[len(ds)-1])
}

// TestCustomToolCallFragments: a custom tool's call streams as
// custom.name and custom.input fragments; the deltas carry its text,
// marked custom, and the call's arguments are {"input": TEXT}.
func TestCustomToolCallFragments(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-5","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	body := chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_P1","type":"custom","custom":{"name":"apply_patch","input":"*** Begin"}}]}`, "null") +
		chunk(`{"tool_calls":[{"index":0,"custom":{"input":" Patch\n\"é\""}}]}`, "null") +
		chunk(`{}`, `"tool_calls"`) + "data: [DONE]\n\n"
	s := ssetest.New(t, ssetest.Reply{Body: body})
	ds, err := ssetest.Collect(t, client(t, s), hi())
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(ds), 2)
	assert.Equal(t, []runtime.ToolCallDelta{{Index: 0, ID: "call_P1", Name: "apply_patch", Arguments: "*** Begin", Custom: true}}, ds[0].ToolCalls)
	calls := ssetest.ToolCalls(ds)
	require.Len(t, calls, 1)
	assert.True(t, calls[0].Custom)
	in, err := calls[0].CustomInput()
	require.NoError(t, err)
	assert.Equal(t, "*** Begin Patch\n\"é\"", in)
}

// An upstream that sends one event of endless data lines is read only up
// to the event bound.
func TestEndlessEventIsCut(t *testing.T) {
	ssetest.AssertEndlessEventCut(t, testKey, newClient(t), hi(), "")
}

// A stream of keep-alives only is held until the caller's deadline.
func TestKeepAlivesOnlyEndAtTheCallersDeadline(t *testing.T) {
	ssetest.AssertHeldByKeepAlives(t, newClient(t), hi())
}

func newClient(t *testing.T) func(string) runtime.ModelClient {
	return func(url string) runtime.ModelClient {
		c, err := openai.New(openai.Config{Model: "gpt-4.1-mini", APIKey: testKey, BaseURL: url + "/v1"})
		require.NoError(t, err)
		return c
	}
}

// A usage count beyond int64 (1e300) is absurd usage, not no usage: it
// reaches the meter as the largest count, which the meter refuses as
// absurd (fail closed), where reading it as zero would let the runtime
// estimate a cheap call.
func TestUsageBeyondInt64IsTheLargestCount(t *testing.T) {
	for _, n := range []string{"1e300", "9223372036854775808", "1e19"} {
		body := `data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}` + "\n\n" +
			`data: {"choices":[],"usage":{"prompt_tokens":` + n + `,"completion_tokens":2}}` + "\n\n" +
			"data: [DONE]\n\n"
		s := ssetest.New(t, ssetest.Reply{Body: body})
		ds, err := ssetest.Collect(t, client(t, s), hi())
		require.NoError(t, err, n)
		last := ds[len(ds)-1]
		assert.Equal(t, int64(1<<63-1), last.Usage.InputTokens, n)
		assert.Equal(t, int64(2), last.Usage.OutputTokens, n)
	}
}

// TestNoRedirectToAnotherOrigin: the request carries the key and the
// prompt; a redirect to another origin is not followed, by the client's own
// HTTP client nor by a copy of the host's, and the host's is left as it is.
func TestNoRedirectToAnotherOrigin(t *testing.T) {
	ssetest.AssertNoRedirectElsewhere(t, testKey, newClient(t), hi())
	host := &http.Client{}
	ssetest.AssertNoRedirectElsewhere(t, testKey, func(url string) runtime.ModelClient {
		c, err := openai.New(openai.Config{Model: "gpt-4.1-mini", APIKey: testKey, BaseURL: url + "/v1", HTTPClient: host})
		require.NoError(t, err)
		return c
	}, hi())
	assert.Nil(t, host.CheckRedirect, "the host's client is not changed")
}

// TestAcceptedThenFailedIsCharged: a stream cut before its first event, or
// a whole chat.completion answered to a streaming request, was billed the
// prompt (and what the answer reports).
func TestAcceptedThenFailedIsCharged(t *testing.T) {
	ssetest.AssertAcceptedThenFailedIsCharged(t, testKey, newClient(t), hi(),
		`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":20}}}`,
		runtime.Usage{InputTokens: 100, OutputTokens: 50, CachedInputTokens: 20})
}

func TestRequestIDOnError(t *testing.T) {
	ssetest.AssertRequestIDOnError(t, newClient(t), hi(), "x-request-id")
}

func TestStreamContentTypes(t *testing.T) {
	ssetest.AssertStreamContentTypes(t, newClient(t), hi())
}
