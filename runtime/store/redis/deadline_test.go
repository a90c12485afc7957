package redis_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// vanishingHost dials the test server until the host goes away; from then
// on the connections open are cut and a new one hangs until its caller
// gives up, as a host that stopped answering leaves a SYN unanswered.
type vanishingHost struct {
	addr  string
	gone  atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

func (h *vanishingHost) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	if h.gone.Load() {
		<-ctx.Done()
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, h.addr)
	if err == nil {
		h.mu.Lock()
		h.conns = append(h.conns, c)
		h.mu.Unlock()
	}
	return c, err
}

func (h *vanishingHost) goAway() {
	h.gone.Store(true)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		_ = c.Close()
	}
	h.conns = nil
}

// A host that stops answering holds an operation no longer than the
// store's timeout: the client's attempts to dial it again all fall within
// it, where each had the whole timeout of its own (five dials and the
// pauses between them).
func TestAnOperationOnAVanishedHostFailsWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ctx := context.Background()
	opt, err := goredis.ParseURL(storetest.ServerURL(t, storetest.RedisEnv))
	require.NoError(t, err)
	h := &vanishingHost{addr: opt.Addr}
	opt.Dialer = h.dial
	s, err := redis.OpenOptions(ctx, opt, storetest.Prefix(t), redis.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	calls := int64(10)
	lim := runtime.BudgetLimits{Calls: &calls}
	_, err = s.Reserve(ctx, "ledger", "r0", lim, 0)
	require.NoError(t, err)

	h.goAway()
	for i := range 3 {
		start := time.Now()
		_, err = s.Reserve(ctx, "ledger", "r1", lim, 0)
		took := time.Since(start)
		require.Error(t, err, "reserve %d", i)
		assert.Contains(t, err.Error(), "redis budget reserve")
		assert.Less(t, took, timeout+200*time.Millisecond, "reserve %d: bounded by the store's timeout", i)
	}
	start := time.Now()
	_, _, err = s.Get(ctx, "k")
	require.Error(t, err)
	assert.Less(t, time.Since(start), timeout+200*time.Millisecond, "a get too")
}

// A call that waits for a pooled connection, then sends its command to a
// server that stopped answering, fails within the store's timeout: the
// wait and the command share it, where each had the whole timeout.
func TestAPoolWaitAndItsCommandShareTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ctx := context.Background()
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	s, err := redis.Open(ctx, withQuery(p.URL, "pool_size=1"), storetest.Prefix(t), redis.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	calls := int64(10)
	lim := runtime.BudgetLimits{Calls: &calls}
	_, err = s.Reserve(ctx, "ledger", "r0", lim, 0)
	require.NoError(t, err, "the scripts are loaded")

	p.Stall()
	first := make(chan error, 1)
	go func() { _, err := s.Reserve(ctx, "ledger", "r1", lim, 0); first <- err }()
	time.Sleep(50 * time.Millisecond) // the first call holds the only connection
	start := time.Now()
	_, err = s.Reserve(ctx, "ledger", "r2", lim, 0)
	took := time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, timeout+200*time.Millisecond, "the wait for the connection and the command: bounded by the store's timeout")
	require.Error(t, <-first)
}
