package anthropic_test

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/ssetest"
)

// An absurd usage report stays absurd: a count beyond int64 (1e300) is the
// largest count, not zero, and input counts whose sum passes int64 saturate
// instead of wrapping negative (which the meter counts as unreported), so
// that the meter refuses the call as absurd usage (fail closed) rather
// than estimating it cheap.
func TestAbsurdUsageStaysAbsurd(t *testing.T) {
	for name, usage := range map[string]string{
		"beyond int64":  `"input_tokens":1e300,"cache_read_input_tokens":0`,
		"sum past it":   `"input_tokens":9000000000000000000,"cache_read_input_tokens":9000000000000000000`,
		"output beyond": `"input_tokens":` + "18446744073709551616" + `,"output_tokens":1e19`,
	} {
		body := strings.Replace(ssetest.Transcript(t, "text.sse"), `"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1`, usage, 1)
		require.NotEqual(t, ssetest.Transcript(t, "text.sse"), body)
		s := ssetest.New(t, ssetest.Reply{Body: body})
		ds, err := ssetest.Collect(t, client(t, s), hi())
		require.NoError(t, err, name)
		assert.Equal(t, int64(math.MaxInt64), sum(ds).InputTokens, name)
	}
}
