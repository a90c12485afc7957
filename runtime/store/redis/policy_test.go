package redis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// unprefixed is a redis kind whose stores the policy declares without a
// prefix, opened in the namespace of the test (not the server's default)
// so that the test leaves the default one alone.
const unprefixed = "redis-unprefixed-test"

var unprefixedIn = storetest.NamespacedRedis(unprefixed)

// Two policies pointed at one store without a prefix would share their
// budgets, rate limits and idempotency keys: the second is refused. The
// replicas of one policy, and a new version of it, share the store; a
// prefix is a namespace chosen on purpose.
func TestAStoreWithoutPrefixHoldsOnePolicy(t *testing.T) {
	s := open(t)
	namespace := strings.TrimSuffix(s.Prefix(), ":")
	unprefixedIn(namespace)
	url := storetest.ServerURL(t, storetest.RedisEnv)
	build := func(policy, prefix, budget string) error {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":`+budget+`},"scope":"global","store":"shared"}`)}})
		p.Policy = policy
		p.Stores = map[string]plan.Store{"shared": {Kind: unprefixed, URL: url, Prefix: prefix}}
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel()}})
		if err == nil {
			require.NoError(t, pl.Close())
		}
		return err
	}
	require.NoError(t, build("billing", "", "10"), "the first policy records itself")
	require.NoError(t, build("billing", "", "10"), "a replica of it")
	require.NoError(t, build("billing", "", "20"), "a new version of it")
	err := build("support", "", "10")
	require.Error(t, err, "another policy")
	assert.ErrorContains(t, err, `store "shared" (`+unprefixed+`, no prefix) holds the state of policy "billing"; policy "support" would share`)
	assert.ErrorContains(t, err, "give each policy its own prefix")
	require.NoError(t, build("support", namespace, "10"), "a prefix set on purpose is not checked")
	v, found, err := s.Get(context.Background(), runtime.PolicyKey)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "billing", string(v))
}
