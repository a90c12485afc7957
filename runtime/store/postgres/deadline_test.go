package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A host that stops answering holds an operation no longer than the
// store's timeout, connecting again included.
func TestAnOperationOnAVanishedHostFailsWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	keeper := storetest.Postgres(t)
	cfg, err := pgxpool.ParseConfig(storetest.ServerURL(t, storetest.PostgresEnv))
	require.NoError(t, err)
	h := &storetest.VanishingHost{}
	cfg.ConnConfig.DialFunc = h.Dial
	s, err := postgres.OpenConfig(context.Background(), cfg, keeper.Schema(), postgres.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	storetest.BudgeterOnAVanishedHost(t, s, h, timeout)
}

// A call that waits for a pooled connection, then sends its statement to
// a server that stopped answering, fails within the store's timeout.
func TestAPoolWaitAndItsStatementShareTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	keeper := storetest.Postgres(t)
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
	s, err := postgres.Open(context.Background(), p.URL+"&pool_max_conns=1", keeper.Schema(), postgres.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	storetest.BudgeterPoolWait(t, s, p, timeout)
}
