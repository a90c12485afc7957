package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// lockRow holds the row of table whose key is key in a transaction of
// another connection until the test ends (or release is called).
func lockRow(t *testing.T, s *postgres.Store, table, key string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.ServerURL(t, storetest.PostgresEnv))
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM "+s.Schema()+"."+table+" WHERE key = $1 FOR UPDATE) l", key).Scan(&n))
	require.Equal(t, 1, n, "the row to lock exists")
	done := false
	release = func() {
		if !done {
			done = true
			_ = tx.Rollback(ctx)
			_ = conn.Close(ctx)
		}
	}
	t.Cleanup(release)
	return release
}

// A row lock held by another session makes a budget reservation and an
// idempotency claim fail within the store's timeout, and the server rolls
// the abandoned statement back: nothing is reserved or claimed once the
// lock goes.
func TestAnOperationBlockedOnARowLockFailsWithinTheTimeout(t *testing.T) {
	const timeout = 600 * time.Millisecond
	s := storetest.Postgres(t, postgres.WithTimeout(timeout))
	assert.Equal(t, timeout, s.Timeout())
	ctx := context.Background()
	calls := int64(10)
	lim := runtime.BudgetLimits{Calls: &calls}

	t.Run("budget", func(t *testing.T) {
		_, err := s.Reserve(ctx, "ledger", "r0", lim, 0)
		require.NoError(t, err)
		require.NoError(t, s.Settle(ctx, "ledger", "r0", runtime.Ledger{Calls: 1}, 0))
		release := lockRow(t, s, "ledger", "ledger")
		start := time.Now()
		_, err = s.Reserve(ctx, "ledger", "r1", lim, 0)
		took := time.Since(start)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "postgres budget reserve")
		assert.Less(t, took, timeout+200*time.Millisecond, "bounded by the timeout")
		release()
		var n int
		require.NoError(t, s.Pool().QueryRow(ctx, "SELECT count(*) FROM "+s.Schema()+".reservation WHERE key = 'ledger'").Scan(&n))
		assert.Zero(t, n, "the abandoned reservation was rolled back")
		_, err = s.Reserve(ctx, "ledger", "r2", lim, 0)
		assert.NoError(t, err, "the store serves again once the lock is gone")
	})

	t.Run("idempotency", func(t *testing.T) {
		g, err := s.Acquire(ctx, "refund", time.Minute, time.Hour, false)
		require.NoError(t, err)
		require.Equal(t, runtime.LeaseAcquired, g.Status)
		lockRow(t, s, "lease", "refund")
		start := time.Now()
		_, err = s.Acquire(ctx, "refund", time.Minute, time.Hour, false)
		took := time.Since(start)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "postgres lease")
		assert.Less(t, took, timeout+200*time.Millisecond)
	})
}

// Through a meter, the blocked reservation fails the call closed: the
// model is never called, and the error names the layer.
func TestAMeterFailsClosedWhenItsStoreTimesOut(t *testing.T) {
	const timeout = 500 * time.Millisecond
	s := storetest.Postgres(t, postgres.WithTimeout(timeout))
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":10},"store":"shared","scope":"global"}`)}})
	p.Stores = map[string]plan.Store{"shared": {Kind: "postgres", URL: "unused"}}
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}}, rt.Response{Deltas: []string{"y"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"shared": s}})
	require.NoError(t, err)
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	lockRow(t, s, "ledger", "agentc/meter/chat/meter/global")
	start := time.Now()
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	took := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "budget store unavailable; the call did not run")
	assert.Equal(t, "meter", runtime.LayerOf(err))
	assert.Less(t, took, timeout+200*time.Millisecond)
	assert.Equal(t, 1, model.Calls(), "the call did not run")
}

// A store declared with a timeout is opened with it: a meter over a store
// declared with 300ms fails within it; a timeout that is not a positive
// duration is refused when the store is opened. The server is told to
// abandon statements at four fifths of the timeout.
func TestTheDeclaredTimeoutIsApplied(t *testing.T) {
	url := storetest.ServerURL(t, storetest.PostgresEnv)
	s := storetest.Postgres(t, postgres.WithTimeout(1500*time.Millisecond))
	var st string
	require.NoError(t, s.Pool().QueryRow(context.Background(), "SHOW statement_timeout").Scan(&st))
	assert.Equal(t, "1200ms", st, "four fifths of the timeout")

	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":10},"store":"shared","scope":"global"}`)}})
	p.Stores = map[string]plan.Store{"shared": {Kind: "postgres", URL: url, Prefix: s.Schema(), Timeout: "300ms"}}
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}}, rt.Response{Deltas: []string{"y"}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	lockRow(t, s, "ledger", "agentc/meter/chat/meter/global")
	start := time.Now()
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	took := time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, 500*time.Millisecond, "the declared 300ms, not the default")

	p.Stores["shared"] = plan.Store{Kind: "postgres", URL: url, Timeout: "0s"}
	_, err = runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel()}})
	assert.ErrorContains(t, err, `timeout "0s": want a positive duration`)
}

// Closing a store whose server stopped answering, after a statement timed
// out there, returns within the store's timeout instead of the driver's
// 15 s wait for each such connection: a host's shutdown or reload is not
// held by it.
func TestCloseOnAStalledServerReturnsWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	keeper := storetest.Postgres(t)
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
	s, err := postgres.Open(context.Background(), p.URL, keeper.Schema(), postgres.WithTimeout(timeout))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Set(ctx, "k", []byte("v"), time.Minute))
	p.Stall()
	require.Error(t, s.Set(ctx, "k", []byte("w"), time.Minute))
	start := time.Now()
	err = s.Close()
	assert.Less(t, time.Since(start), timeout+500*time.Millisecond, "bounded by the timeout")
	assert.ErrorContains(t, err, "did not close within")
}
