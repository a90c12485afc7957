package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A role allowed fewer connections than two replicas' pools (pgx's default
// size, max(4, CPUs), each) failed most concurrent operations with "too
// many connections for role" (SQLSTATE 53300) although connections of the
// pool sat idle a few milliseconds later: the pool opens a new connection
// while below its size, and returned the server's refusal. An operation
// the server refuses a connection for now waits, within its timeout, for
// one of the pool's to be free.
func TestAConnectionLimitBelowThePoolsWaitsForAConnection(t *testing.T) {
	admin := storetest.Postgres(t)
	role := storetest.Prefix(t) + "_role"
	ctx := context.Background()
	_, err := admin.Pool().Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN CONNECTION LIMIT 3`, role))
	require.NoError(t, err)
	var db string
	require.NoError(t, admin.Pool().QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	_, err = admin.Pool().Exec(ctx, fmt.Sprintf(`GRANT CREATE ON DATABASE %s TO %s`, pgx.Identifier{db}.Sanitize(), role))
	require.NoError(t, err)
	schema := storetest.Prefix(t) + "_lim"
	t.Cleanup(func() {
		_, _ = admin.Pool().Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_, _ = admin.Pool().Exec(ctx, fmt.Sprintf(`REVOKE CREATE ON DATABASE %s FROM %s`, pgx.Identifier{db}.Sanitize(), role))
		_, _ = admin.Pool().Exec(ctx, "DROP ROLE IF EXISTS "+role)
	})
	u, err := url.Parse(storetest.ServerURL(t, storetest.PostgresEnv))
	require.NoError(t, err)
	u.User = url.User(role)
	q := u.Query()
	q.Set("pool_max_conns", "4") // pgx's default on a machine of up to 4 CPUs
	u.RawQuery = q.Encode()

	var replicas []*postgres.Store
	for range 2 {
		s, err := postgres.Open(ctx, u.String(), schema, postgres.WithTimeout(10*time.Second))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		replicas = append(replicas, s)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := replicas[i%2]
			key := fmt.Sprintf("k%d", i)
			if err := s.Set(ctx, key, []byte("v"), time.Minute); err != nil {
				errs <- err
				return
			}
			_, _, err := s.Get(ctx, key)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if !assert.NoError(t, err) {
			failed++
		}
	}
	assert.Zero(t, failed, "every operation waited for a connection")
}
