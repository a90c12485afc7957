package serve

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/compiler/vet"
)

// vet proves a when true for every caller from the max_tokens the gateway
// admits (guard/caller-controlled-when): the two bounds are one.
func TestVetKnowsTheMaxTokensServeAdmits(t *testing.T) {
	assert.Equal(t, MaxOutputTokens, vet.CallerMaxTokens)
}
