package serve

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The upstream's request id comes back to the client as a response header:
// an upstream's id of hundreds of KiB (its response headers are read up to
// 10 MiB) was relayed whole. An id longer than maxRequestID, or holding a
// byte that is not visible ASCII, is not an id a provider gives: it is not
// relayed. One of the providers' form still is.
func TestUpstreamRequestIDIsBounded(t *testing.T) {
	long := "req_" + strings.Repeat("7", 300<<10)
	oaLong := reply{body: transcript(t, "openai", "text.sse"), header: map[string]string{"x-request-id": long}}
	oaOdd := reply{body: transcript(t, "openai", "text.sse"), header: map[string]string{"x-request-id": "req_4f2a9c with words"}}
	oaFine := reply{body: transcript(t, "openai", "text.sse"), header: map[string]string{"x-request-id": "req_" + strings.Repeat("a", maxRequestID-4)}}
	anLong := reply{body: transcript(t, "anthropic", "text.sse"), header: map[string]string{"request-id": long}}
	g := newGateway(t, `{use: "tracing"}`, []reply{oaLong, oaOdd, oaFine}, []reply{anLong})

	params := openai.ChatCompletionNewParams{Model: "primary", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	for _, want := range []string{"", "", "req_" + strings.Repeat("a", maxRequestID-4)} {
		var raw *http.Response
		_, err := g.openai(t).Chat.Completions.New(context.Background(), params, option.WithResponseInto(&raw))
		require.NoError(t, err)
		assert.Equal(t, want, raw.Header.Get("x-request-id"))
	}

	var raw *http.Response
	stream := g.anthropic(t).Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}, anthropicoption.WithResponseInto(&raw))
	for stream.Next() {
	}
	require.NoError(t, stream.Err())
	assert.Empty(t, raw.Header.Get("request-id"))
	assert.Less(t, headerBytes(raw.Header), 4096)
}

// headerBytes is the size of h's values.
func headerBytes(h http.Header) int {
	n := 0
	for _, vs := range h {
		for _, v := range vs {
			n += len(v)
		}
	}
	return n
}

// The upstream's id of a request it refused comes back too: the case its
// support asks for it. Whole and streamed, on both routes.
func TestUpstreamRequestIDOnErrors(t *testing.T) {
	refused := func(status int, id string) reply {
		return reply{status: status, header: map[string]string{"x-request-id": id, "request-id": id},
			body: `{"type":"error","error":{"type":"invalid_request_error","message":"no"}}`}
	}
	g := newGateway(t, `{use: "tracing"}`, []reply{refused(400, "req_oa_1"), refused(429, "req_oa_2")},
		[]reply{refused(400, "req_an_1"), refused(429, "req_an_2")})
	for i, stream := range []bool{false, true} {
		oa := fmt.Sprintf(`{"model":"primary","stream":%t,"messages":[{"role":"user","content":"hi"}]}`, stream)
		code, h, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey, []byte(oa))
		require.GreaterOrEqual(t, code, 400, body)
		assert.Equal(t, fmt.Sprintf("req_oa_%d", i+1), h.Get("x-request-id"), body)

		an := fmt.Sprintf(`{"model":"backup","max_tokens":64,"stream":%t,"messages":[{"role":"user","content":"hi"}]}`, stream)
		code, h, body = do(t, "POST", g.url+"/v1/messages", clientKey, []byte(an), "anthropic-version", "2023-06-01")
		require.GreaterOrEqual(t, code, 400, body)
		assert.Equal(t, fmt.Sprintf("req_an_%d", i+1), h.Get("request-id"), body)
	}
}
