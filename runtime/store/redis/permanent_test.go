package redis_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestAPermanentStoreFailureIsNotRetried: a layer refuses a call because
// its store failed; the refusal was transient whatever the store said, so a
// retry outside asked again a server that refused the credentials, or a
// key of another type. The store's own error decides.
func TestAPermanentStoreFailureIsNotRetried(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	refusal := func(err error) error {
		return runtime.StoreRefusal("idempotent", "idempotency store: cannot claim the call; the call did not run", err)
	}
	require.NoError(t, s.Client().Set(ctx, s.Prefix()+"k", "a string", 0).Err())
	_, err := s.Acquire(ctx, "k", time.Minute, time.Hour, false)
	require.Error(t, err)
	assert.False(t, runtime.IsTransient(refusal(err)), "wrong type: %v", err)
	assert.True(t, runtime.DidNotRun(refusal(err)), "the call did not run")

	u, err := url.Parse(storetest.ServerURL(t, storetest.RedisEnv))
	require.NoError(t, err)
	u.User = url.UserPassword("agentc-nobody", "wrong")
	bad, err := redis.Open(ctx, u.String(), storetest.Prefix(t))
	if err == nil {
		t.Cleanup(func() { _ = bad.Close() })
		_, err = bad.Acquire(ctx, "k", time.Minute, time.Hour, false)
	}
	require.Error(t, err)
	assert.False(t, runtime.IsTransient(refusal(err)), "wrong password: %v", err)

	require.NoError(t, s.Close())
	_, err = s.Acquire(ctx, "k2", time.Minute, time.Hour, false)
	require.Error(t, err)
	assert.True(t, runtime.IsTransient(refusal(err)), "closed: %v", err)
}
