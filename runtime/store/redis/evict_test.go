package redis_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// evictingServer starts a Redis server of the test's own that evicts keys
// under memory pressure (maxmemory 64mb, policy), and returns its URL.
func evictingServer(t *testing.T, policy string) string {
	storetest.ServerURL(t, storetest.RedisEnv) // a Redis is at hand
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--maxmemory", "64mb", "--maxmemory-policy", policy)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	return url
}

// A Redis that evicts keys under memory pressure drops idempotency claims
// and results, and budget ledgers, as a flush does: a duplicate refund runs
// again, a spent budget starts afresh. A layer that needs them kept is
// refused when it builds on such a store, naming the setting; a cache
// (memoize) is not, and neither is an audit trail, a stream without an
// expiry, unless the policy evicts every key (allkeys-*).
func TestAStoreThatEvictsIsRefusedWhereALostKeyRunsACallAgain(t *testing.T) {
	build := func(url string, tool ...plan.Layer) error {
		p := rt.Plan(plan.Chains{Tool: tool})
		p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
		p.Stores = map[string]plan.Store{"shared": {Kind: "redis", URL: url, Prefix: "evict"}}
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{})
		if err == nil {
			require.NoError(t, pl.Close())
		}
		return err
	}
	idem := rt.Layer("idempotent", `{"store":"shared"}`)
	meter := rt.Layer("meter", `{"budget":{"calls":10},"scope":"global","store":"shared"}`)
	memo := rt.Layer("memoize", `{"store":"shared","ttl":"1m"}`)
	audit := rt.Layer("audit", `{"sink":"shared"}`)

	volatile := evictingServer(t, "volatile-lru")
	for _, l := range []plan.Layer{idem, meter} {
		err := build(volatile, l)
		require.Error(t, err, l.Use)
		assert.ErrorContains(t, err, "maxmemory-policy volatile-lru")
		assert.ErrorContains(t, err, "noeviction")
	}
	assert.NoError(t, build(volatile, memo), "a cache may lose its entries")
	assert.NoError(t, build(volatile, audit), "volatile-lru evicts no stream without an expiry")

	all := evictingServer(t, "allkeys-lru")
	err := build(all, audit)
	require.Error(t, err)
	assert.ErrorContains(t, err, "maxmemory-policy allkeys-lru")

	shared := storetest.ServerURL(t, storetest.RedisEnv)
	assert.NoError(t, build(shared, idem, meter, audit), "the test server evicts nothing")
}
