package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestADamagedLeaseRecordIsNotFree: an idempotency record damaged in the
// store (a field lost, a value of another type, a state no build writes)
// may be the claim or the outcome of a call that ran: it is never taken as
// free, which would run the call again. Asked without a takeover, the key
// is in doubt, its grant saying the record is unreadable, or the claim
// fails. A takeover (a retry_safe call) replaces it, in doubt.
func TestADamagedLeaseRecordIsNotFree(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	c := s.Client()
	damage := map[string]func(key string) error{
		"no state":       func(k string) error { return c.HSet(ctx, k, "result", `"refunded"`, "token", "7").Err() },
		"unknown state":  func(k string) error { return c.HSet(ctx, k, "state", "finished", "token", "7").Err() },
		"no lease end":   func(k string) error { return c.HSet(ctx, k, "state", "pending", "token", "7").Err() },
		"a string value": func(k string) error { return c.Set(ctx, k, `{"state":"done"}`, 0).Err() },
	}
	for name, write := range damage {
		t.Run(name, func(t *testing.T) {
			key := "damaged/" + name
			require.NoError(t, write(s.Prefix()+key))
			g, err := s.Acquire(ctx, key, time.Minute, time.Hour, false)
			if name == "a string value" { // WRONGTYPE: the claim fails
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, runtime.LeaseInDoubt, g.Status, "the record is not taken as free")
			assert.Error(t, g.Unreadable)
			g, err = s.Acquire(ctx, key, time.Minute, time.Hour, true)
			require.NoError(t, err)
			assert.Equal(t, runtime.LeaseAcquired, g.Status, "a takeover replaces it")
			assert.True(t, g.InDoubt)
		})
	}
}
