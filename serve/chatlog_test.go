package serve

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChatLogLineOfARefusedProposal: the chat chain's log line of a request
// the gateway answers 403, because the tool chain refuses the call the
// model proposed, says outcome blocked, as the access log's status does,
// whole response and stream alike; the line of a call it relays says ok.
func TestChatLogLineOfARefusedProposal(t *testing.T) {
	refused := oaToolCallSSE("refund", `{"amount":500}`)
	admitted := oaToolCallSSE("refund", `{"amount":5}`)
	g := newGatewayWith(t, proposalDecls, `{use: "log"}`, []reply{{body: refused}, {body: refused}, {body: admitted}}, nil)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "primary",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")},
		Tools:    []openai.ChatCompletionToolUnionParam{proposalTool("refund")}}
	_, err := g.openai(t).Chat.Completions.New(ctx, params)
	var oerr *openai.Error
	require.True(t, errors.As(err, &oerr), "%v", err)
	assert.Equal(t, http.StatusForbidden, oerr.StatusCode)
	stream := g.openai(t).Chat.Completions.NewStreaming(ctx, params)
	for stream.Next() {
	}
	require.Error(t, stream.Err())
	_, err = g.openai(t).Chat.Completions.New(ctx, params)
	require.NoError(t, err)

	var outcomes []string
	for _, l := range strings.Split(g.logs.String(), "\n") {
		if !strings.Contains(l, `msg="agentc chat"`) {
			continue
		}
		_, rest, _ := strings.Cut(l, " outcome=")
		outcome, _, _ := strings.Cut(rest, " ")
		outcomes = append(outcomes, outcome)
		if outcome == "blocked" {
			assert.Contains(t, l, "error_kind=blocked", l)
			assert.Contains(t, l, `layer \"refund_limit\"`, l)
		}
	}
	assert.Equal(t, []string{"blocked", "blocked", "ok"}, outcomes)
}
