package vet_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/providers/anthropic"
)

// TestAnthropicMaxTokens: guard/budget-below-estimate reads an anthropic
// model without max_tokens at the bound its client sends.
func TestAnthropicMaxTokens(t *testing.T) {
	assert.Equal(t, anthropic.DefaultMaxTokens, vet.AnthropicMaxTokens)
}
