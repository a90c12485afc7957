package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// openNamed opens the test server under application_name name, in a
// schema of the test's own, so that the test can end its connections.
func openNamed(t *testing.T, name string) *postgres.Store {
	t.Helper()
	direct := open(t)
	s, err := postgres.Open(context.Background(), storetest.ServerURL(t, storetest.PostgresEnv)+"&application_name="+name, direct.Schema())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// terminateIdle ends, on the server, the idle connections opened under
// name (a proxy or a restart that cut them while they sat in the pool).
func terminateIdle(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, storetest.ServerURL(t, storetest.PostgresEnv))
	require.NoError(t, err)
	defer c.Close(ctx)
	var n int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND state = 'idle'`, name).Scan(&n))
	require.Positive(t, n)
	// The backends are gone before the next statement is sent.
	require.Eventually(t, func() bool {
		var left int
		require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, name).Scan(&left))
		return left == 0
	}, 5*time.Second, 10*time.Millisecond)
}

// A statement is not sent on a pooled connection the server ended while
// it sat idle: it would fail although it never reached the server, and a
// reservation or a rate limit's decision cannot be sent again (one whose
// statement ran would count twice). It is sent on another, once.
func TestNoStatementIsSentOnAnEndedIdleConnection(t *testing.T) {
	name := storetest.Prefix(t)
	s := openNamed(t, name)
	ctx := context.Background()
	calls := int64(2)
	lim := runtime.BudgetLimits{Calls: &calls, Lease: time.Minute}
	refusal, err := s.Reserve(ctx, "k", "a", lim, 0)
	require.NoError(t, err)
	require.Nil(t, refusal)
	terminateIdle(t, name)
	refusal, err = s.Reserve(ctx, "k", "b", lim, 0)
	require.NoError(t, err, "the server is up")
	require.Nil(t, refusal)
	refusal, err = s.Reserve(ctx, "k", "c", lim, 0)
	require.NoError(t, err)
	require.NotNil(t, refusal, "two calls reserved, once each")
	assert.Equal(t, "calls", refusal.Resource)

	_, ok, err := s.Allow(ctx, "r", time.Hour, 2, 0)
	require.NoError(t, err)
	require.True(t, ok)
	terminateIdle(t, name)
	_, ok, err = s.Allow(ctx, "r", time.Hour, 2, 0)
	require.NoError(t, err, "the server is up")
	require.True(t, ok)
	_, ok, err = s.Allow(ctx, "r", time.Hour, 2, 0)
	require.NoError(t, err)
	assert.False(t, ok, "two calls let through, once each")

	terminateIdle(t, name)
	require.NoError(t, s.Settle(ctx, "k", "a", runtime.Ledger{Calls: 1}, 0))
	l, err := s.LedgerOf(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(1), l.Calls)
}
