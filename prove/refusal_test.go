package prove_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/prove"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

func init() {
	runtime.Register(runtime.Module{
		ID:     "provetest.retry_failures",
		Stages: []plan.Stage{plan.StageChat},
		Traits: []runtime.Trait{runtime.TraitReinvokes},
		Doc:    "re-invokes the model after any failure before a delta, up to three attempts: it retries what is permanent too",
		New:    func() runtime.Middleware { return &retryFailures{} },
	})
}

// retryFailures is a hand-written retry that tells no failure from
// another: a provider's refusal of the key is sent again.
type retryFailures struct{}

func (*retryFailures) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		var err error
		for range 3 {
			start := c.Deltas
			err = next(ctx, c, yield)
			if err == nil || c.Deltas > start || runtime.Classify(err) != runtime.ClassFailure {
				return err
			}
		}
		return err
	}
}

const twoModels = `models: {primary: {usd_per_mtok_in: 1, usd_per_mtok_out: 1}, backup: {usd_per_mtok_in: 1, usd_per_mtok_out: 1}}
`

// A retry that sends a call again after its provider refused the key is
// found with the refused outcome: the shortest script is the refusal and
// the answer the retry gets from the same provider.
func TestRetryOfARefusedCall(t *testing.T) {
	r := explorePolicy(t, twoModels+`chains: chat: [{use: "provetest.retry_failures"}]`, 2)
	require.NotEmpty(t, r.Violations, "a retried refusal is found")
	v := r.Violations[0]
	assert.Equal(t, prove.NoRetryAfterRefusal, v.Invariant)
	assert.Equal(t, []string{"refused", "ok"}, v.Script)
	assert.Contains(t, v.Message, "was invoked again after its provider refused the call")
}

// The builtin retry does not retry a refusal and the builtin fallback
// falls over on it, to another model: both prove clean.
func TestBuiltinRetryAndFallbackOnARefusal(t *testing.T) {
	r := explorePolicy(t, twoModels+`chains: chat: [
	{use: "fallback", models: ["primary", "backup"]},
	{use: "retry", max_attempts: 3, initial_delay: "10ms"},
]`, 3)
	assert.Empty(t, violated(r))
}
