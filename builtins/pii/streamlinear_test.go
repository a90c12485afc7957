package pii_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/cputime"
	"github.com/agentc-dev/agentc/runtime"
)

// TestStreamedLineStaysLinear: a line the layer holds until its line break, streamed a
// few bytes a delta (a model writes a few bytes a token, and whoever writes the prompt
// decides that it writes no line break), costs time proportional to its length: four
// times as many deltas take under eight times as long. The held text was searched for its
// last line break at every delta (10,000 deltas, 400 KB, took over a second).
func TestStreamedLineStaysLinear(t *testing.T) {
	model := &chunkModel{}
	for _, config := range []string{`{"action":"redact"}`, `{"action":"block"}`} {
		pl := chatPipeline(t, config, model)
		run := func(n int) time.Duration {
			model.deltas = []string{"Card: 4111 1111 1111 1111 "}
			for range n {
				model.deltas = append(model.deltas, strings.Repeat("word ", 8))
			}
			var got strings.Builder
			d := cputime.Of(func() {
				_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary",
					Messages: []runtime.Message{{Role: "user", Content: "hi"}}},
					func(d runtime.Delta) bool { got.WriteString(d.Text); return true })
				if config == `{"action":"block"}` {
					var b *runtime.BlockedError
					require.ErrorAs(t, err, &b)
				} else {
					require.NoError(t, err)
				}
			})
			assert.NotContains(t, got.String(), "4111")
			return d
		}
		run(500) // warm up
		small, large := run(2500), run(10000)
		assert.Less(t, large, 8*small+100*time.Millisecond, "%s: 2,500 deltas took %v, 10,000 %v", config, small, large)
	}
}
