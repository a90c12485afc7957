package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestAPermanentStoreFailureIsNotRetried: a layer refuses a call because
// its store failed; the refusal was transient whatever the store said, so a
// retry outside asked again, and again, a store that will fail the same way
// (a table dropped or not granted, a constraint). The store's own error
// decides: a server's refusal of another class (here a connection lost) is
// still transient.
func TestAPermanentStoreFailureIsNotRetried(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	_, err := s.Pool().Exec(ctx, "DROP TABLE "+pgx.Identifier{s.Schema()}.Sanitize()+".lease CASCADE")
	require.NoError(t, err)
	_, err = s.Acquire(ctx, "k", time.Minute, time.Hour, false)
	require.Error(t, err)
	refusal := runtime.StoreRefusal("idempotent", "idempotency store: cannot claim the call; the call did not run", err)
	assert.False(t, runtime.IsTransient(refusal), "undefined table: %v", err)
	assert.False(t, runtime.RetriesSame(refusal))
	assert.True(t, runtime.DidNotRun(refusal), "the call did not run")
	assert.Equal(t, string(runtime.KindStoreUnavailable), runtime.KindOf(refusal))

	require.NoError(t, s.Close())
	_, err = s.Acquire(ctx, "k", time.Minute, time.Hour, false)
	require.Error(t, err)
	assert.True(t, runtime.IsTransient(runtime.StoreRefusal("idempotent", "idempotency store: cannot claim the call; the call did not run", err)), "closed: %v", err)
}

// TestACachedPlanChangedIsTransient: a statement the driver prepared and
// cached fails once its table changed shape (a newer build's migration
// under a replica still running): "cached plan must not change result
// type", of the class 0A (feature not supported). The driver drops the
// statement then, so the same statement asked again passes: the failure
// is not permanent, and a layer's refusal for it may be retried.
func TestACachedPlanChangedIsTransient(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	conn, err := s.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	table := pgx.Identifier{s.Schema(), "shape"}.Sanitize()
	_, err = conn.Exec(ctx, "CREATE TABLE "+table+" (a integer)")
	require.NoError(t, err)
	query := func() error {
		rows, err := conn.Query(ctx, "SELECT * FROM "+table+" WHERE $1::integer = 1", 1)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}
	require.NoError(t, query())
	_, err = conn.Exec(ctx, "ALTER TABLE "+table+" ADD COLUMN b integer")
	require.NoError(t, err)
	err = query()
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "0A000", pe.Code, "%v", err)
	refusal := runtime.StoreRefusal("idempotent", "idempotency store: cannot claim the call; the call did not run", err)
	assert.False(t, runtime.PermanentStoreError(err), "%v", err)
	assert.True(t, runtime.IsTransient(refusal), "%v", err)
	require.NoError(t, query(), "asked again, it passes")
}
