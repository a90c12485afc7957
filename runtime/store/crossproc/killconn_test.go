package crossproc_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// killConns ends, on the server, every connection the replicas opened
// under name: pg_terminate_backend in PostgreSQL, CLIENT KILL in Redis.
func killConns(t *testing.T, b backend, name string) {
	ctx := context.Background()
	if b.kind == "postgres" {
		c, err := pgx.Connect(ctx, storetest.ServerURL(t, storetest.PostgresEnv))
		require.NoError(t, err)
		defer c.Close(ctx)
		var n int
		require.NoError(t, c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, name).Scan(&n))
		require.Positive(t, n)
		return
	}
	opt, err := goredis.ParseURL(storetest.ServerURL(t, storetest.RedisEnv))
	require.NoError(t, err)
	c := goredis.NewClient(opt)
	defer c.Close()
	list, err := c.ClientList(ctx).Result()
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " name="+name+" ") {
			require.NoError(t, c.Do(ctx, "CLIENT", "KILL", "ID", strings.TrimPrefix(strings.Fields(line)[0], "id=")).Err())
			n++
		}
	}
	require.Positive(t, n)
}

// named returns b, its connections named name on the server
// (application_name, client_name), for killConns to find.
func (b backend) named(name string) backend {
	sep := "?"
	if strings.Contains(b.url, "?") {
		sep = "&"
	}
	b.url += sep + map[string]string{"postgres": "application_name=", "redis": "client_name="}[b.kind] + name
	return b
}

// counted is a tool that counts its runs in runs, takes took and returns v.
func counted(runs *atomic.Int32, took time.Duration, v any) runtime.ToolFunc {
	return func(context.Context, *runtime.ToolCall) (any, error) {
		runs.Add(1)
		time.Sleep(took)
		return v, nil
	}
}

// TestKilledConnectionsLeaveNoCallInDoubt: the server ends a replica's
// connections while a side-effecting tool runs under its claim (an
// administrator, a pooler or a failover; the server stays up). The call
// succeeds, its result is published, and a duplicate on another replica
// gets it. In PostgreSQL the publish on a terminated pooled connection
// failed, and the key stayed in doubt for its ttl.
func TestKilledConnectionsLeaveNoCallInDoubt(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			name := storetest.Prefix(t)
			b := b.named(name)
			var runs atomic.Int32
			pay := counted(&runs, 300*time.Millisecond, "paid")
			pls := replicas(t, b, 2, plan.Chains{Tool: []plan.Layer{rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "1s"}`)}},
				map[string]runtime.ToolFunc{"pay": pay})
			req := runtime.ToolRequest{Name: "pay", Args: map[string]any{"order_id": "A1"}}
			done := make(chan error, 1)
			go func() { _, err := pls[0].Tool(tenantCtx("acme", "r1"), req); done <- err }()
			require.Eventually(t, func() bool { return runs.Load() == 1 }, 5*time.Second, time.Millisecond)
			killConns(t, b, name)
			require.NoError(t, <-done)
			r, err := pls[1].Tool(tenantCtx("acme", "r1"), req)
			require.NoError(t, err, "the duplicate gets the published result")
			assert.Equal(t, "paid", r.Value)
			assert.True(t, r.Deduped)
			assert.Equal(t, int32(1), runs.Load())
		})
	}
}

// TestKilledIdleConnectionsRefuseNoCall: the server ends a replica's
// connections while they sit idle in its pool (an administrator, a pooler
// or a restart; the server stays up). The next call is admitted by the
// budget and the rate limit on another connection and charged once: in
// PostgreSQL the reservation and the rate limit's statement were sent on
// the dead connection, failed, and refused the call as store_unavailable.
func TestKilledIdleConnectionsRefuseNoCall(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			name := storetest.Prefix(t)
			b := b.named(name)
			var runs atomic.Int32
			lookup := counted(&runs, 0, "found")
			pls := replicas(t, b, 1, plan.Chains{Tool: []plan.Layer{
				rt.Layer("rate_limit", `{"rate": 1000, "burst": 100, "mode": "reject", "store": "shared"}`),
				rt.Layer("meter", `{"budget": {"calls": 3}, "scope": "global", "store": "shared"}`),
			}}, map[string]runtime.ToolFunc{"lookup": lookup})
			req := runtime.ToolRequest{Name: "lookup", Args: map[string]any{"q": "A1"}}
			for i := range 3 {
				_, err := pls[0].Tool(tenantCtx("acme", "r1"), req)
				require.NoError(t, err, "call %d", i)
				if i < 2 {
					killConns(t, b, name)
					time.Sleep(50 * time.Millisecond) // the ended connections' last words arrive
				}
			}
			assert.Equal(t, int32(3), runs.Load())
			_, err := pls[0].Tool(tenantCtx("acme", "r1"), req)
			var be *runtime.BudgetError
			require.ErrorAs(t, err, &be, "three calls charged, once each")
		})
	}
}
