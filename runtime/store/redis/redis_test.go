package redis_test

import (
	"testing"

	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func open(t *testing.T) *redis.Store { return storetest.Redis(t) }

func TestPorts(t *testing.T) {
	s := open(t)
	t.Run("KV", func(t *testing.T) { storetest.KV(t, s) })
	t.Run("Leaser", func(t *testing.T) { storetest.Leaser(t, s) })
	t.Run("RateLimiter", func(t *testing.T) { storetest.RateLimiter(t, s) })
	t.Run("Budgeter", func(t *testing.T) { storetest.Budgeter(t, s) })
	t.Run("BudgeterExpiry", func(t *testing.T) { storetest.BudgeterExpiry(t, s) })
	t.Run("Audit", func(t *testing.T) { storetest.Audit(t, s, s.Records) })
}
