package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A claim the server applied but whose reply was lost is the attempt's
// when it asks again with its owner nonce.
func TestAClaimWhoseReplyWasLostIsTheAttempts(t *testing.T) {
	direct, s, p := viaProxy(t)
	storetest.LeaserLostReply(t, direct, s, p)
}

// A settlement the server applied but whose reply was lost charges once
// when it is sent again.
func TestASettlementWhoseReplyWasLostChargesOnce(t *testing.T) {
	direct, s, p := viaProxy(t)
	storetest.BudgeterSettleLostReply(t, direct, s, p)
}

// viaProxy returns a store on the test server, the same prefix reached
// through a proxy, and the proxy.
func viaProxy(t *testing.T) (direct, s *redis.Store, p *storetest.Proxy) {
	direct = open(t)
	p = storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	s, err := redis.Open(context.Background(), p.URL, strings.TrimSuffix(direct.Prefix(), ":"), redis.WithTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return direct, s, p
}
