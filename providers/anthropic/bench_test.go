package anthropic_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	an "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/providers/anthropic"
	"github.com/agentc-dev/agentc/runtime"
)

// benchDeltas is the number of content deltas of the benchmark transcripts.
const benchDeltas = 64

func event(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

const messageStart = `{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant",` +
	`"content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,` +
	`"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`

// stream is a transcript (in the shape of testdata/text.sse) of one
// content block that start opens and n content_block_delta events of
// delta(i) fill, ended with stop.
func stream(start string, n int, delta func(int) string, stop string) string {
	var b strings.Builder
	b.WriteString(event("message_start", messageStart))
	b.WriteString(event("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+start+`}`))
	for i := range n {
		b.WriteString(event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":`+delta(i)+`}`))
	}
	b.WriteString(event("content_block_stop", `{"type":"content_block_stop","index":0}`))
	b.WriteString(event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":64}}`))
	b.WriteString(event("message_stop", `{"type":"message_stop"}`))
	return b.String()
}

// textStream is a transcript of n text deltas.
func textStream(n int) string {
	return stream(`{"type":"text","text":""}`, n, func(i int) string {
		return fmt.Sprintf(`{"type":"text_delta","text":" token%d"}`, i)
	}, "end_turn")
}

// toolStream is a transcript of a tool_use block whose input arrives in n
// fragments.
func toolStream(n int) string {
	return stream(`{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}`, n, func(i int) string {
		frag := `\"k` + fmt.Sprint(i) + `\":1,`
		switch i {
		case 0:
			frag = `{` + frag
		case n - 1:
			frag = `\"k` + fmt.Sprint(i) + `\":1}`
		}
		return `{"type":"input_json_delta","partial_json":"` + frag + `"}`
	}, "tool_use")
}

// benchRequest is the request of the benchmarks: a system and a user
// message, the same in the SDK's terms and in the runtime's.
var benchRequest = runtime.ChatRequest{Model: "backup", Messages: []runtime.Message{
	{Role: "system", Content: "You are a support agent."}, {Role: "user", Content: "Where is my order A1234?"}}}

// sdkStream streams the benchmark request with the bare SDK and reads what
// a caller needs of each event: the text, the tool input fragments, the
// stop reason and the usage. It returns the bytes of text and input.
func sdkStream(ctx context.Context, c *an.Client) (int, error) {
	stream := c.Messages.NewStreaming(ctx, an.MessageNewParams{
		Model: "claude-sonnet-4-5", MaxTokens: anthropic.DefaultMaxTokens,
		System:   []an.TextBlockParam{{Text: "You are a support agent."}},
		Messages: []an.MessageParam{an.NewUserMessage(an.NewTextBlock("Where is my order A1234?"))},
	})
	defer stream.Close()
	n := 0
	var stop string
	var usage int64
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			usage += ev.Message.Usage.InputTokens
		case "content_block_delta":
			n += len(ev.Delta.Text) + len(ev.Delta.PartialJSON)
		case "message_delta":
			stop = string(ev.Delta.StopReason)
			usage += ev.Usage.OutputTokens
		}
	}
	if stop == "" || usage == 0 {
		return n, fmt.Errorf("no stop reason or usage: %v", stream.Err())
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
		sdk := an.NewClient(option.WithBaseURL("http://127.0.0.1:9/"), option.WithHTTPClient(tr.Client()),
			option.WithMaxRetries(0), option.WithAPIKey(testKey))
		c, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: testKey, BaseURL: "http://127.0.0.1:9", HTTPClient: tr.Client()})
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
