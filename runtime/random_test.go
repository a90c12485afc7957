package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/runtime"
)

func TestSeededRandomRepeats(t *testing.T) {
	a, b, c := runtime.NewSeededRandom(1), runtime.NewSeededRandom(1), runtime.NewSeededRandom(2)
	var sa, sb, sc []int64
	for i := 0; i < 16; i++ {
		sa, sb, sc = append(sa, a.Int64N(1000)), append(sb, b.Int64N(1000)), append(sc, c.Int64N(1000))
	}
	assert.Equal(t, sa, sb, "one seed, one sequence")
	assert.NotEqual(t, sa, sc, "another seed, another sequence")
	for _, v := range sa {
		assert.True(t, v >= 0 && v < 1000)
	}
}
