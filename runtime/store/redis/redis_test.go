package redis_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func open(t *testing.T) *redis.Store {
	t.Helper()
	url := storetest.ServerURL(t, storetest.RedisEnv)
	s, err := redis.Open(context.Background(), url, storetest.Prefix(t))
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := s.Client().Keys(ctx, s.Prefix()+"*").Result()
		if len(keys) > 0 {
			s.Client().Del(ctx, keys...)
		}
		_ = s.Close()
	})
	return s
}

func TestPorts(t *testing.T) {
	s := open(t)
	t.Run("KV", func(t *testing.T) { storetest.KV(t, s) })
	t.Run("Leaser", func(t *testing.T) { storetest.Leaser(t, s) })
	t.Run("RateLimiter", func(t *testing.T) { storetest.RateLimiter(t, s) })
	t.Run("Budgeter", func(t *testing.T) { storetest.Budgeter(t, s) })
	t.Run("Audit", func(t *testing.T) { storetest.Audit(t, s, s.Records) })
}
