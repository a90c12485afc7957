package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
