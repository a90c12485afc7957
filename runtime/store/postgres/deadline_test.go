package postgres_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A host that stops answering holds an operation no longer than the
// store's timeout: its connections are cut and a new one hangs until the
// operation gives up, as a host gone leaves a SYN unanswered.
func TestAnOperationOnAVanishedHostFailsWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ctx := context.Background()
	keeper := storetest.Postgres(t)
	cfg, err := pgxpool.ParseConfig(storetest.ServerURL(t, storetest.PostgresEnv))
	require.NoError(t, err)
	var (
		gone  atomic.Bool
		mu    sync.Mutex
		conns []net.Conn
	)
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if gone.Load() {
			<-ctx.Done()
			return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}
	s, err := postgres.OpenConfig(ctx, cfg, keeper.Schema(), postgres.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	calls := int64(10)
	lim := runtime.BudgetLimits{Calls: &calls}
	_, err = s.Reserve(ctx, "ledger", "r0", lim, 0)
	require.NoError(t, err)

	gone.Store(true)
	mu.Lock()
	for _, c := range conns {
		_ = c.Close()
	}
	mu.Unlock()
	for i := range 3 {
		start := time.Now()
		_, err = s.Reserve(ctx, "ledger", "r1", lim, 0)
		took := time.Since(start)
		require.Error(t, err, "reserve %d", i)
		assert.Less(t, took, timeout+200*time.Millisecond, "reserve %d: bounded by the store's timeout", i)
	}
}

// A call that waits for a pooled connection, then sends its statement to a
// server that stopped answering, fails within the store's timeout.
func TestAPoolWaitAndItsStatementShareTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	ctx := context.Background()
	keeper := storetest.Postgres(t)
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
	s, err := postgres.Open(ctx, p.URL+"&pool_max_conns=1", keeper.Schema(), postgres.WithTimeout(timeout))
	require.NoError(t, err)
	calls := int64(10)
	lim := runtime.BudgetLimits{Calls: &calls}
	_, err = s.Reserve(ctx, "ledger", "r0", lim, 0)
	require.NoError(t, err)

	p.Stall()
	first := make(chan error, 1)
	go func() { _, err := s.Reserve(ctx, "ledger", "r1", lim, 0); first <- err }()
	time.Sleep(50 * time.Millisecond) // the first call holds the only connection
	start := time.Now()
	_, err = s.Reserve(ctx, "ledger", "r2", lim, 0)
	took := time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, timeout+200*time.Millisecond, "the wait for the connection and the statement: bounded by the store's timeout")
	require.Error(t, <-first)
	_ = s.Close()
}
