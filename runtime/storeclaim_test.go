package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// claimedRedis is a redis kind whose stores the policy declares without a
// prefix (so the policy claims them), opened in a namespace the test
// chooses rather than the server's default.
const claimedRedis = "test.claimed-redis"

var claimedIn = storetest.NamespacedRedis(claimedRedis)

// TestAPooledStoreIsNotClaimedAgainByTheSamePolicy: a new version of a
// policy built on the store its previous version holds open (a reload)
// does not need the store to answer when the policy claiming it is the
// same: the store already holds that policy's state, and a change that
// leaves the store alone (a key revoked) applies while the store is down.
// Another policy built on it still claims it, and is refused once the
// store answers.
func TestAPooledStoreIsNotClaimedAgainByTheSamePolicy(t *testing.T) {
	proxy := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	claimedIn(storetest.Prefix(t))
	pool := runtime.NewStorePool()
	build := func(policy, budget string) (*runtime.Pipeline, error) {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":`+budget+`},"scope":"global","store":"shared"}`)}})
		p.Policy = policy
		p.Stores = map[string]plan.Store{"shared": {Kind: claimedRedis, URL: proxy.URL}}
		return runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel()}, StorePool: pool})
	}
	first, err := build("billing", "10")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, first.Close()) })

	proxy.Cut()
	next, err := build("billing", "20")
	require.NoError(t, err, "the same policy, on the store the previous version holds, builds while the store is down")
	require.NoError(t, next.Close())
	_, err = build("support", "10")
	require.ErrorContains(t, err, `store "shared" (`+claimedRedis+`): record the policy whose state it holds`, "another policy claims the store")

	proxy.Restore()
	_, err = build("support", "10")
	require.ErrorContains(t, err, `holds the state of policy "billing"; policy "support" would share`)
	again, err := build("billing", "30")
	require.NoError(t, err)
	require.NoError(t, again.Close())
	assert.Equal(t, 1, pool.Open())
}
