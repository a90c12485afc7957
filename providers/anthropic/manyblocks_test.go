package anthropic_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/cputime"
	"github.com/agentc-dev/agentc/internal/ssetest"
	"github.com/agentc-dev/agentc/runtime"
)

// manyBlocks is a stream of n thinking blocks and n tool_use blocks, all
// begun before any of their deltas, as an upstream may interleave them.
func manyBlocks(n int) string {
	var b strings.Builder
	b.WriteString("event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}` + "\n\n")
	for i := range n {
		fmt.Fprintf(&b, "event: content_block_start\n"+`data: {"type":"content_block_start","index":%d,"content_block":{"type":"thinking","thinking":"","signature":""}}`+"\n\n", 2*i)
		fmt.Fprintf(&b, "event: content_block_start\n"+`data: {"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_%d","name":"get_weather","input":{}}}`+"\n\n", 2*i+1, i)
	}
	for i := range n {
		fmt.Fprintf(&b, "event: content_block_delta\n"+`data: {"type":"content_block_delta","index":%d,"delta":{"type":"thinking_delta","thinking":"t"}}`+"\n\n", 2*i)
		fmt.Fprintf(&b, "event: content_block_delta\n"+`data: {"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":"{}"}}`+"\n\n", 2*i+1)
	}
	b.WriteString("event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":3}}` + "\n\n")
	b.WriteString("event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n")
	return b.String()
}

// TestManyBlocksAreReadInLinearTime: the client found the thinking block
// or tool call of each delta by a scan of the blocks begun (every one of
// them for a thinking delta), so an upstream that begins many blocks
// before their deltas had it spend time growing with their square. Each
// is found in constant time: four times as many blocks take under eight
// times as long, and each delta reaches its block.
func TestManyBlocksAreReadInLinearTime(t *testing.T) {
	run := func(n int) time.Duration {
		s := ssetest.New(t, ssetest.Reply{Body: manyBlocks(n)})
		c := client(t, s)
		var thinking, args int
		req := hi()
		d := cputime.Of(func() {
			err := c.Stream(context.Background(), &req, func(d runtime.Delta) bool {
				if d.Thinking != nil && d.Thinking.Text == "t" {
					require.Equal(t, thinking, d.Thinking.Index)
					thinking++
				}
				for _, tc := range d.ToolCalls {
					if tc.Arguments != "" {
						require.Equal(t, args, tc.Index)
						args++
					}
				}
				return true
			})
			require.NoError(t, err)
		})
		require.Equal(t, n, thinking)
		require.Equal(t, n, args)
		return d
	}
	run(200) // warm up
	small, large := run(10000), run(40000)
	assert.Less(t, large, 8*small+100*time.Millisecond, "10,000 blocks of each kind took %v, 40,000 %v", small, large)
}
