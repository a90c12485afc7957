package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestADamagedLeaseRecordIsUnreadable: an idempotency record damaged in
// the table (a state no build writes, a claim without its lease end) was
// found in doubt, or held, without saying why, where Redis and SQLite say
// the record is unreadable. Asked without a takeover, it is in doubt and
// its grant says it is unreadable; a takeover (a retry_safe call)
// replaces it, in doubt, and its outcome is published.
func TestADamagedLeaseRecordIsUnreadable(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	damage := map[string]string{
		"unknown state":         `INSERT INTO %s.lease (key, state, token, until) VALUES ($1, 'finished', 7, clock_timestamp() - interval '1 hour')`,
		"unknown state, future": `INSERT INTO %s.lease (key, state, token, until) VALUES ($1, 'finished', 7, clock_timestamp() + interval '1 hour')`,
		"empty state":           `INSERT INTO %s.lease (key, state, token, until) VALUES ($1, '', 7, clock_timestamp() - interval '1 hour')`,
		"no lease end":          `INSERT INTO %s.lease (key, state, token) VALUES ($1, 'pending', 7)`,
	}
	for name, stmt := range damage {
		t.Run(name, func(t *testing.T) {
			key := "damaged/" + name
			_, err := s.Pool().Exec(ctx, fmt.Sprintf(stmt, pgx.Identifier{s.Schema()}.Sanitize()), key)
			require.NoError(t, err)
			g, err := s.Acquire(ctx, key, time.Minute, time.Hour, false)
			require.NoError(t, err)
			assert.Equal(t, runtime.LeaseInDoubt, g.Status, "the record is not taken as free, nor as held")
			require.Error(t, g.Unreadable)
			g, err = s.AcquireAs(ctx, key, "", nil, time.Minute, time.Hour, true)
			require.NoError(t, err)
			assert.Equal(t, runtime.LeaseAcquired, g.Status, "a takeover replaces it")
			assert.True(t, g.InDoubt)
			ok, err := s.Publish(ctx, key, g.Token, []byte(`"refunded"`), time.Hour)
			require.NoError(t, err)
			assert.True(t, ok, "the claim taken over publishes its outcome")
			g, err = s.Acquire(ctx, key, time.Minute, time.Hour, false)
			require.NoError(t, err)
			assert.Equal(t, runtime.LeaseDone, g.Status)
		})
	}
}

// TestADamagedRecordTakenOverIsAClaimAtOnce: a takeover of a damaged
// record renewed its token and lease end in one statement and repaired
// its state in another. Between the two, the claim granted looked damaged
// and held, and another retry_safe caller of the key, finding it so,
// deleted it and claimed the key itself: the call ran twice at once. The
// takeover repairs the state in the statement that grants the claim.
func TestADamagedRecordTakenOverIsAClaimAtOnce(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	schema := pgx.Identifier{s.Schema()}.Sanitize()
	_, err := s.Pool().Exec(ctx, fmt.Sprintf(`INSERT INTO %s.lease (key, state, token, until) VALUES ('k', 'finished', 7, clock_timestamp() - interval '1 hour')`, schema))
	require.NoError(t, err)
	// The statement a takeover makes, alone.
	var status int
	err = s.Pool().QueryRow(ctx, fmt.Sprintf(`SELECT status FROM %s.lease_acquire_noted('k', '', NULL, 60000000, 3600000000, true)`, schema)).Scan(&status)
	require.NoError(t, err)
	require.Equal(t, int(runtime.LeaseAcquired), status, "taken over")
	var state string
	require.NoError(t, s.Pool().QueryRow(ctx, fmt.Sprintf(`SELECT state FROM %s.lease WHERE key = 'k'`, schema)).Scan(&state))
	assert.Equal(t, "pending", state, "the claim taken over is a claim as soon as it is granted")
	g, err := s.AcquireAs(ctx, "k", "", nil, time.Minute, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status, "another caller waits for the claim")
}
