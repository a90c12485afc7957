package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A host that stops answering holds an operation no longer than the
// store's timeout: the client's attempts to dial it again all fall within
// it, where each had the whole timeout of its own (five dials and the
// pauses between them).
func TestAnOperationOnAVanishedHostFailsWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	opt, err := goredis.ParseURL(storetest.ServerURL(t, storetest.RedisEnv))
	require.NoError(t, err)
	h := &storetest.VanishingHost{}
	opt.Dialer = h.Dial
	s, err := redis.OpenOptions(context.Background(), opt, storetest.Prefix(t), redis.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	storetest.BudgeterOnAVanishedHost(t, s, h, timeout)
	start := time.Now()
	_, _, err = s.Get(context.Background(), "k")
	require.Error(t, err)
	require.Less(t, time.Since(start), timeout+200*time.Millisecond, "a get too")
}

// A call that waits for a pooled connection, then sends its command to a
// server that stopped answering, fails within the store's timeout, where
// the wait and the command each had the whole timeout.
func TestAPoolWaitAndItsCommandShareTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	s, err := redis.Open(context.Background(), withQuery(p.URL, "pool_size=1"), storetest.Prefix(t), redis.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	storetest.BudgeterPoolWait(t, s, p, timeout)
}
