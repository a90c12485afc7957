package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// incompressible returns n bytes of random text, which PostgreSQL cannot
// compress below its index limit.
func incompressible(n int) string {
	s := ""
	for len(s) < n {
		s += rand.Text()
	}
	return s[:n]
}

// A value too long for a btree index (a run id or tool name of 6 kB, a
// key) is refused with an error naming it, its length and PostgreSQL's
// limit, instead of the server's bare "index row size" error.
func TestAValueTooLongToIndexIsNamed(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	long := incompressible(6000)
	tooLong := func(what string) string {
		return fmt.Sprintf("the %s is too long to store (6000 bytes; PostgreSQL indexes at most 2704 bytes of it, compressed)", what)
	}
	check := func(t *testing.T, err error, msg string) {
		t.Helper()
		require.Error(t, err)
		assert.Contains(t, err.Error(), msg)
		var pe *pgconn.PgError
		assert.ErrorAs(t, err, &pe, "the server's error stays wrapped")
	}

	err := s.Append(ctx, runtime.AuditRecord{Time: time.Now(), RunID: long, Tool: "refund", Phase: runtime.PhaseIntent})
	check(t, err, "postgres audit append: "+tooLong("run id"))
	err = s.Append(ctx, runtime.AuditRecord{Time: time.Now(), RunID: "run-1", Tool: long, Phase: runtime.PhaseIntent})
	check(t, err, "postgres audit append: "+tooLong("tool name"))
	_, err = s.AcquireAs(ctx, long, "n1", nil, time.Minute, time.Hour, false)
	check(t, err, "postgres lease: "+tooLong("key"))
	check(t, s.Set(ctx, long, []byte("v"), time.Hour), "postgres set: "+tooLong("key"))
	_, err = s.SetIfAbsent(ctx, long, []byte("v"), time.Hour)
	check(t, err, "postgres set-if-absent: "+tooLong("key"))
	_, _, err = s.Allow(ctx, long, time.Second, 1, 0)
	check(t, err, "postgres rate limit: "+tooLong("key"))
	_, err = s.Reserve(ctx, long, "r1", runtime.BudgetLimits{}, time.Hour)
	check(t, err, "postgres budget reserve: "+tooLong("key"))

	// Under the limit, the same run id and key are stored.
	fits := incompressible(2000)
	require.NoError(t, s.Append(ctx, runtime.AuditRecord{Time: time.Now(), RunID: fits, Tool: fits, Phase: runtime.PhaseIntent}))
	g, err := s.Acquire(ctx, fits, time.Minute, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseAcquired, g.Status)
}
