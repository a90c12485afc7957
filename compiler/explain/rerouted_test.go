package explain_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestReroutedModelsAreNotCountedAsModels: a fallback over a hedge that
// sets every call's model still makes up to two attempts, but they go to
// the hedge's models, not its own: the count says attempts, and whose
// models they reach.
func TestReroutedModelsAreNotCountedAsModels(t *testing.T) {
	consequences := chatConsequences(t, `package p
models: {a: {}, b: {}, c: {}}
chains: chat: [
	{use: "retry", max_attempts: 3},
	{use: "fallback", models: ["a", "c"]},
	{use: "hedge", models: ["a", "b"], delay: "1s"},
]
`)
	assert.Equal(t, []string{
		"a failing call reaches the model up to 12 times (retry 3 attempts × fallback 2 attempts rerouted by hedge × hedge 2 models)",
	}, consequences)
}
