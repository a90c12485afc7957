package openai

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/runtime"
)

// TestSentBodyMatchesSDK: for every request of TestBodyMatchesSDK, the
// body the client sends upstream holds the same JSON as the body the
// SDK's own streaming call sends for the request in its parameter types.
func TestSentBodyMatchesSDK(t *testing.T) {
	newClient := func(url string) (*Client, error) {
		return New(Config{Model: "gpt-4.1-mini", APIKey: "sk-test", BaseURL: url + "/v1", MaxTokens: 500})
	}
	ssetest.AssertSentLikeSDK(t, ssetest.Transcript(t, "text.sse"), bodyCases(),
		func(url string) (runtime.ModelClient, error) { return newClient(url) },
		func(url string, req *runtime.ChatRequest) error {
			c, err := newClient(url)
			if err != nil {
				return err
			}
			p, err := c.sdkParams(req)
			if err != nil {
				return err
			}
			sdk := openai.NewChatCompletionService(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
			stream := sdk.NewStreaming(context.Background(), p)
			for stream.Next() {
			}
			return stream.Close()
		})
}
