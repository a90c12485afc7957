package openai_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/providers/openai"
	"github.com/agentc-dev/agentc/runtime"
)

// benchDeltas is the number of content chunks of the benchmark transcripts.
const benchDeltas = 64

// chunk is one chunk of a stream in the API's format (the shape of
// testdata/text.sse), its delta and finish reason given as JSON.
func chunk(delta, finish string) string {
	return `data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741569952,` +
		`"model":"gpt-4.1-mini-2025-04-14","service_tier":"default","system_fingerprint":"fp_6ec83003ad","choices":[{"index":0,` +
		`"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}],"usage":null}` + "\n\n"
}

const usageChunk = `data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741569952,` +
	`"model":"gpt-4.1-mini-2025-04-14","service_tier":"default","system_fingerprint":"fp_6ec83003ad","choices":[],` +
	`"usage":{"prompt_tokens":19,"completion_tokens":64,"total_tokens":83,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},` +
	`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}` + "\n\n" +
	"data: [DONE]\n\n"

// textStream is a transcript of n text chunks, then the finish and usage
// chunks.
func textStream(n int) string {
	var b strings.Builder
	b.WriteString(chunk(`{"role":"assistant","content":"","refusal":null}`, "null"))
	for i := range n {
		fmt.Fprintf(&b, "%s", chunk(fmt.Sprintf(`{"content":" token%d"}`, i), "null"))
	}
	b.WriteString(chunk(`{}`, `"stop"`))
	b.WriteString(usageChunk)
	return b.String()
}

// toolStream is a transcript of a tool call whose arguments arrive in n
// fragments (after the chunk that names the call), then the finish and
// usage chunks.
func toolStream(n int) string {
	var b strings.Builder
	b.WriteString(chunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA",`+
		`"type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null}`, "null"))
	for i := range n {
		frag := `\"k` + fmt.Sprint(i) + `\":1,`
		switch i {
		case 0:
			frag = `{` + frag
		case n - 1:
			frag = `\"k` + fmt.Sprint(i) + `\":1}`
		}
		b.WriteString(chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"`+frag+`"}}]}`, "null"))
	}
	b.WriteString(chunk(`{}`, `"tool_calls"`))
	b.WriteString(usageChunk)
	return b.String()
}

// benchRequest is the request of the benchmarks: a system and a user
// message, the same in the SDK's terms and in the runtime's.
var benchRequest = runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{
	{Role: "system", Content: "You are a support agent."}, {Role: "user", Content: "Where is my order A1234?"}}}

func sdkParams() oa.ChatCompletionNewParams {
	return oa.ChatCompletionNewParams{
		Model:         "gpt-4.1-mini",
		Messages:      []oa.ChatCompletionMessageParamUnion{oa.SystemMessage("You are a support agent."), oa.UserMessage("Where is my order A1234?")},
		StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)},
	}
}

// sdkStream streams the benchmark request with the bare SDK and reads what
// a caller needs of each chunk: the text, the tool-call fragments, the
// finish reason and the usage. It returns the bytes of text and arguments.
func sdkStream(ctx context.Context, c *oa.Client) (int, error) {
	stream := c.Chat.Completions.NewStreaming(ctx, sdkParams())
	defer stream.Close()
	n := 0
	var finish string
	var usage int64
	for stream.Next() {
		ch := stream.Current()
		usage += ch.Usage.PromptTokens + ch.Usage.CompletionTokens
		for i := range ch.Choices {
			n += len(ch.Choices[i].Delta.Content)
			for k := range ch.Choices[i].Delta.ToolCalls {
				n += len(ch.Choices[i].Delta.ToolCalls[k].Function.Arguments)
			}
			if ch.Choices[i].FinishReason != "" {
				finish = ch.Choices[i].FinishReason
			}
		}
	}
	if finish == "" || usage == 0 {
		return n, fmt.Errorf("no finish or usage: %v", stream.Err())
	}
	return n, stream.Err()
}

// transcript is a named transcript of the benchmarks.
type transcript struct{ name, transcript string }

// deltaTranscripts are the transcripts of benchDeltas deltas.
var deltaTranscripts = []transcript{
	{"text-64", textStream(benchDeltas)},
	{"tool-args-64", toolStream(benchDeltas)},
}

func streamCases(tb testing.TB, transcripts ...transcript) []ssetest.StreamCase {
	var out []ssetest.StreamCase
	for _, tc := range transcripts {
		tr := ssetest.NewTransport(tc.transcript)
		sdk := oa.NewClient(option.WithBaseURL("http://127.0.0.1:9/v1/"), option.WithHTTPClient(tr.Client()),
			option.WithMaxRetries(0), option.WithAPIKey(testKey))
		c, err := openai.New(openai.Config{Model: "gpt-4.1-mini", APIKey: testKey, BaseURL: "http://127.0.0.1:9/v1", HTTPClient: tr.Client()})
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, ssetest.StreamCase{Name: tc.name, Client: c, Request: benchRequest,
			Bare: func(ctx context.Context) (int, error) { return sdkStream(ctx, &sdk) }})
	}
	return out
}

// BenchmarkStream streams the same transcript, served from memory, with
// the bare SDK and through the client, which turns it into runtime deltas.
// Its text-0 case, a stream of no content, is the request's side: building
// and sending it, and reading the events that open and end the answer.
func BenchmarkStream(b *testing.B) {
	ssetest.BenchStreams(b, streamCases(b, append(deltaTranscripts, transcript{"text-0", textStream(0)})...))
}

// BenchmarkStreamAdded alternates the two and reports what the client adds
// per delta (added-ns/delta, added-allocs/delta).
func BenchmarkStreamAdded(b *testing.B) {
	ssetest.BenchAdded(b, benchDeltas, streamCases(b, deltaTranscripts...))
}

// TestStreamAllocsPerDelta pins the client's allocation budget: at most
// two allocations per delta beyond what the SDK itself allocates to read
// the same stream.
func TestStreamAllocsPerDelta(t *testing.T) {
	ssetest.AssertAllocsPerDelta(t, benchDeltas, 2, streamCases(t, deltaTranscripts...))
}
