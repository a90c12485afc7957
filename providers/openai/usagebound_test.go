package openai_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
)

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
		assert.Equal(t, int64(math.MaxInt64), last.Usage.InputTokens, n)
		assert.Equal(t, int64(2), last.Usage.OutputTokens, n)
	}
}
