package serve

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/cputime"
)

// TestManyCallsAreWrittenInLinearTime: the stream writers find the block of
// each call they write in time that does not grow with the calls before it,
// so a response of many calls (a prompt decides how many the model makes)
// is written in time proportional to their number: four times as many take
// under eight times as long. Each was found by a scan of the calls begun.
func TestManyCallsAreWrittenInLinearTime(t *testing.T) {
	for name, write := range map[string]func(n int){
		"openai": func(n int) {
			s := &openAIStream{}
			for i := range n {
				require.False(t, s.begun(i))
				require.True(t, s.begun(i))
			}
		},
		"anthropic": func(n int) {
			s := &anthropicStream{open: -1}
			for i := range n {
				block, begun := s.begin(&s.tools, i)
				require.True(t, begun)
				again, begun := s.begin(&s.tools, i)
				require.False(t, begun)
				require.Equal(t, block, again)
				s.buf = s.buf[:0]
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			run := func(n int) time.Duration { return cputime.Of(func() { write(n) }) }
			run(500) // warm up
			small, large := run(20000), run(80000)
			assert.Less(t, large, 8*small+100*time.Millisecond, "20,000 calls took %v, 80,000 %v", small, large)
		})
	}
}

// Calls that begin out of the order of their index (an upstream's
// fragments, interleaved) are each found in their block.
func TestCallsBegunOutOfOrderKeepTheirBlocks(t *testing.T) {
	s := &anthropicStream{open: -1}
	order := []int{0, 3, 1, 2, 5, 4}
	blocks := map[int]int{}
	for _, i := range order {
		b, begun := s.begin(&s.tools, i)
		require.True(t, begun)
		blocks[i] = b
	}
	for _, i := range order {
		b, begun := s.begin(&s.tools, i)
		require.False(t, begun, "call %d", i)
		assert.Equal(t, blocks[i], b, "call %d", i)
	}
}
