package runtime_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/runtime"
)

// redisReply is a Redis server's error reply as its client returns it.
type redisReply string

func (e redisReply) Error() string { return string(e) }
func (redisReply) RedisError()     {}

// TestPermanentStoreErrorLeavesPassingFailuresTransient: only a store's
// answer that asking again fails the same way is permanent; a failure
// that may pass (the connection, a server shutting down or starting, a
// deadlock, a serialization failure, a statement cancelled, a cached plan
// its table's new shape broke, a replica or a loading server) is not, so
// a layer's refusal for it is still retried.
func TestPermanentStoreErrorLeavesPassingFailuresTransient(t *testing.T) {
	refusal := func(err error) error {
		return runtime.StoreRefusal("meter", "budget store unavailable; the call did not run", fmt.Errorf("postgres budget: %w", err))
	}
	for code, permanent := range map[string]bool{
		"28P01": true, "42P01": true, "42501": true, "3D000": true, "3F000": true, "22P02": true, "23505": true, "54000": true,
		"08006": false, "08001": false, "40001": false, "40P01": false, "57P01": false, "57P03": false, "57014": false,
		"53300": false, "55P03": false, "25006": false, "0A000": false, "XX000": false, "58030": false,
	} {
		err := &pgconn.PgError{Code: code, Message: "the server's words"}
		assert.Equal(t, permanent, runtime.PermanentStoreError(err), code)
		assert.Equal(t, !permanent, runtime.IsTransient(refusal(err)), code)
	}
	for reply, permanent := range map[string]bool{
		"NOAUTH Authentication required.": true, "WRONGPASS invalid username-password pair or user is disabled.": true,
		"NOPERM User x has no permissions to run the 'evalsha' command":     true,
		"WRONGTYPE Operation against a key holding the wrong kind of value": true,
		"READONLY You can't write against a read only replica.":             false,
		"LOADING Redis is loading the dataset in memory":                    false, "BUSY Redis is busy running a script.": false,
		"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.": false,
		"TRYAGAIN Multiple keys request during rehashing of slot":                          false, "CLUSTERDOWN The cluster is down": false,
		"ERR max number of clients reached": false, "OOM command not allowed when used memory > 'maxmemory'.": false,
	} {
		err := redisReply(reply)
		assert.Equal(t, permanent, runtime.PermanentStoreError(err), reply)
		assert.Equal(t, !permanent, runtime.IsTransient(refusal(err)), reply)
	}
}
