package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

func TestFirstSeenRecordsEachKeyOnce(t *testing.T) {
	c := &runtime.ToolCall{}
	keys := []*int{new(int), new(int), new(int), new(int)}
	for _, k := range keys {
		assert.False(t, c.Seen(k))
		assert.True(t, c.FirstSeen(k), "a key new to the call")
	}
	for _, k := range keys {
		assert.True(t, c.Seen(k))
		assert.False(t, c.FirstSeen(k), "a key the call has seen")
	}
	assert.False(t, c.Seen(new(int)))
}

func TestFirstSeenAllocatesNothingForTwoKeys(t *testing.T) {
	a, b := new(int), new(int)
	allocs := testing.AllocsPerRun(100, func() {
		c := runtime.ToolCall{}
		c.FirstSeen(a)
		c.FirstSeen(b)
		if !c.Seen(a) || !c.Seen(b) {
			panic("not recorded")
		}
	})
	require.Zero(t, allocs)
}
