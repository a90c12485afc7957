package redis_test

import (
	"context"
	"fmt"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestAClaimFromBeforeAFlushMatchesNoneAfterIt flushes the store's keys
// while a claim is held, as FLUSHDB or a restart without persistence does:
// the same key claimed again gets a token the earlier holder does not have,
// so that holder can neither publish its result onto the new claim nor
// release it while its call runs.
func TestAClaimFromBeforeAFlushMatchesNoneAfterIt(t *testing.T) {
	s := storetest.Redis(t)
	ctx := context.Background()
	key := storetest.Key(t, "refund")
	before, err := s.Acquire(ctx, key, time.Minute, time.Hour, true)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, before.Status)

	keys, err := s.Client().Keys(ctx, s.Prefix()+"*").Result()
	require.NoError(t, err)
	require.NoError(t, s.Client().Del(ctx, keys...).Err())

	after, err := s.Acquire(ctx, key, time.Minute, time.Hour, true)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, after.Status)
	assert.Greater(t, after.Token, before.Token, "tokens do not start again after a flush")

	require.NoError(t, s.Release(ctx, key, before.Token))
	ok, err := s.Publish(ctx, key, before.Token, []byte(`"before"`), time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "the earlier holder does not publish onto the new claim")
	g, err := s.Acquire(ctx, key, time.Minute, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status, "the new claim is still held")

	ok, err = s.Publish(ctx, key, after.Token, []byte(`"after"`), time.Hour)
	require.NoError(t, err)
	assert.True(t, ok)
	g, err = s.Acquire(ctx, key, time.Minute, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, `"after"`, string(g.Result))
}

// TestStoreIdentity: the processes that open a prefix of a server's
// database share one identity; the same prefix in another database is
// another store, and so is the prefix once flushed.
func TestStoreIdentity(t *testing.T) {
	s := storetest.Redis(t)
	ctx := context.Background()
	url := storetest.ServerURL(t, storetest.RedisEnv)
	prefix := strings.TrimSuffix(s.Prefix(), ":")
	open := func(url string) *redis.Store {
		o, err := redis.Open(ctx, url, prefix)
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = o.Client().Del(ctx, o.Prefix()+"store-identity").Err()
			_ = o.Close()
		})
		return o
	}
	opt, err := goredis.ParseURL(url)
	require.NoError(t, err)
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	u.Path = fmt.Sprintf("/%d", (opt.DB+1)%16)
	storetest.StoreID(t, s,
		func() runtime.SharedLeaser { return open(url) },
		open(u.String()),
		func() runtime.SharedLeaser {
			keys, err := s.Client().Keys(ctx, s.Prefix()+"*").Result()
			require.NoError(t, err)
			require.NoError(t, s.Client().Del(ctx, keys...).Err())
			return s
		})
}
