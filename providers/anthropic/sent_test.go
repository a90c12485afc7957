package anthropic

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/runtime"
)

// TestSentBodyMatchesSDK: for every request of TestBodyMatchesSDK, the
// body the client sends upstream (its own encoding, handed to the SDK's
// streaming call) holds the same JSON as the body the SDK's streaming call
// sends for the request in its parameter types and options.
func TestSentBodyMatchesSDK(t *testing.T) {
	newClient := func(url string) (*Client, error) {
		return New(Config{Model: "claude-sonnet-4-5", APIKey: "sk-ant-test", BaseURL: url})
	}
	ssetest.AssertSentLikeSDK(t, ssetest.Transcript(t, "text.sse"), bodyCases(),
		func(url string) (runtime.ModelClient, error) { return newClient(url) },
		func(url string, req *runtime.ChatRequest) error {
			c, err := newClient(url)
			if err != nil {
				return err
			}
			p, opts, err := c.sdkParams(req)
			if err != nil {
				return err
			}
			sdk := anthropic.NewMessageService(option.WithBaseURL(url+"/"), option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(0))
			stream := sdk.NewStreaming(context.Background(), p, opts...)
			for stream.Next() {
			}
			return stream.Close()
		})
}
