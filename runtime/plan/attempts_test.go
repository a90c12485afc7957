package plan_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// The model calls of a chain are the product of the attempts of its
// retries and the models of its fallbacks and hedges; a retry without
// max_attempts makes the default three.
func TestModelCalls(t *testing.T) {
	layer := func(use, config string) plan.Layer { return plan.Layer{Use: use, Config: json.RawMessage(config)} }
	assert.Equal(t, 1, plan.ModelCalls(nil))
	assert.Equal(t, 1, plan.ModelCalls([]plan.Layer{layer("log", `{}`), layer("retry", `{"max_attempts":1}`)}))
	assert.Equal(t, 24, plan.ModelCalls([]plan.Layer{
		layer("retry", `{}`),
		layer("fallback", `{"models":["a","b"]}`),
		layer("compaction", `{"max_tokens":10}`),
		layer("hedge", `{"models":["a","b","c","d"]}`),
	}))
	assert.Equal(t, plan.MaxCalls+1, plan.ModelCalls([]plan.Layer{
		layer("retry", `{"max_attempts":1000}`), layer("retry", `{"max_attempts":1000}`), layer("retry", `{"max_attempts":1000}`),
	}), "saturated, never wrapped")
}
