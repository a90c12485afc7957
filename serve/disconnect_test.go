package serve

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A client that goes away, mid-stream or before any output, is the
// caller's doing, not the upstream's: behind a breaker that opens on one
// failure, the next call still goes to the same model, and the call that
// was abandoned is not moved to the fallback's next model.
func TestClientDisconnectIsNoUpstreamFailure(t *testing.T) {
	for _, tc := range []struct {
		name      string
		holdAfter int
		stream    bool
	}{{"mid-stream", 4, true}, {"before any output", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			gate := make(chan struct{})
			defer close(gate)
			text := transcript(t, "openai", "text.sse")
			g := newGateway(t, `{use: "fallback", models: ["primary", "backup"]},
	{use: "retry", max_attempts: 1, breaker: {failures: 1, cooldown: "1m"}}`,
				[]reply{{body: text, gate: gate, holdAfter: tc.holdAfter}, {body: text}}, []reply{{body: transcript(t, "anthropic", "text.sse")}})
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "POST", g.url+"/v1/chat/completions", strings.NewReader(string(chatBody("primary", "Hello", tc.stream))))
			req.Header.Set("Authorization", "Bearer "+clientKey)
			done := make(chan struct{})
			go func() {
				defer close(done)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				r := bufio.NewReader(resp.Body)
				for {
					line, err := r.ReadString('\n')
					if err != nil || strings.Contains(line, `"content":"Hello"`) {
						break
					}
				}
				cancel()
			}()
			if !tc.stream {
				require.Eventually(t, func() bool { return g.oa.requests() == 1 }, 5*time.Second, 5*time.Millisecond)
				cancel()
			}
			<-done
			select {
			case <-g.oa.gone:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream request was not cancelled")
			}
			require.Eventually(t, func() bool { return strings.Contains(g.logs.String(), "status=499") }, 5*time.Second, 10*time.Millisecond)

			c, err := g.openai(t).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}})
			require.NoError(t, err)
			assert.Equal(t, "primary", c.Model, "the breaker stayed closed")
			assert.Equal(t, 2, g.oa.requests())
			assert.Equal(t, 0, g.an.requests(), "the abandoned call did not fall over")
		})
	}
}
