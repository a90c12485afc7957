package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestPermanentFailureIsNotRetriedByTheSDKs: an upstream that refused the
// gateway's key (401) or its model id (404) failed the call with a 502
// of kind permanent but without x-should-retry: false, so the OpenAI and
// Anthropic SDKs, which retry a 5xx, sent it again twice, each time with
// the refused key. A permanent failure carries x-should-retry: false; a
// transient one does not.
func TestPermanentFailureIsNotRetriedByTheSDKs(t *testing.T) {
	for _, r := range []struct {
		name     string
		provider string
		reply    reply
		retry    bool
	}{
		{"openai key refused", "openai", reply{status: 401, body: transcript(t, "openai", "401.json")}, false},
		{"openai model unknown", "openai", reply{status: 404, body: transcript(t, "openai", "404_model_not_found.json")}, false},
		{"anthropic key refused", "anthropic", reply{status: 401, body: transcript(t, "anthropic", "401.json")}, false},
		{"anthropic model unknown", "anthropic", reply{status: 404, body: transcript(t, "anthropic", "404_not_found.json")}, false},
		{"openai overloaded", "openai", reply{status: 503, body: transcript(t, "openai", "503_overloaded.json")}, true},
	} {
		t.Run(r.name, func(t *testing.T) {
			replies := []reply{r.reply, r.reply, r.reply}
			var g *gateway
			if r.provider == "openai" {
				g = newGateway(t, `{use: "tracing"}`, replies, nil)
			} else {
				g = newGateway(t, `{use: "tracing"}`, nil, replies)
			}
			code, h, body := do(t, "POST", g.url+"/v1/chat/completions", clientKey,
				[]byte(`{"model": "`+map[string]string{"openai": "primary", "anthropic": "backup"}[r.provider]+`", "messages": [{"role": "user", "content": "hi"}]}`))
			require.GreaterOrEqual(t, code, http.StatusInternalServerError, body)
			if r.retry {
				assert.Empty(t, h.Get("x-should-retry"), body)
				return
			}
			assert.Equal(t, "false", h.Get("x-should-retry"), body)
			// The SDKs take it at its word: one call, not three.
			up := g.oa
			if r.provider == "openai" {
				c := openai.NewClient(option.WithBaseURL(g.url+"/v1/"), option.WithAPIKey(clientKey), option.WithMaxRetries(2))
				_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
				require.Error(t, err)
			} else {
				up = g.an
				c := anthropic.NewClient(anthropicoption.WithBaseURL(g.url+"/"), anthropicoption.WithAPIKey(clientKey), anthropicoption.WithMaxRetries(2))
				_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "backup", MaxTokens: 16,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
				require.Error(t, err)
			}
			assert.Equal(t, 2, up.requests(), "the SDK sent the refused call again")
		})
	}
}

// TestAnInDoubtCallIsNotRetriedByTheSDKs: a call answered 409 in_doubt
// (it may have made its effect) carried no x-should-retry: false, and the
// OpenAI and Anthropic SDKs retry a 409, so a call the answer says not to
// send again before checking was sent again by the client's own library.
func TestAnInDoubtCallIsNotRetriedByTheSDKs(t *testing.T) {
	inDoubt := fmt.Errorf("tool: %w", &runtime.InDoubtError{Layer: "idempotent", Tool: "charge", IdempotencyKey: "k"})
	for _, a := range []api{apiOpenAI, apiAnthropic} {
		rec := httptest.NewRecorder()
		x := &exchange{ResponseWriter: rec, r: httptest.NewRequest("POST", "/v1/chat/completions", nil), api: a}
		x.failErr(inDoubt)
		assert.Equal(t, http.StatusConflict, rec.Code, rec.Body.String())
		assert.Equal(t, "false", rec.Header().Get("x-should-retry"), "api %d", a)
	}
	// A refusal asking to come back later is left to the SDKs' judgement.
	rec := httptest.NewRecorder()
	x := &exchange{ResponseWriter: rec, r: httptest.NewRequest("POST", "/v1/chat/completions", nil), api: apiOpenAI}
	x.failErr(&runtime.BreakerOpenError{Layer: "breaker"})
	assert.Empty(t, rec.Header().Get("x-should-retry"), rec.Body.String())
}
