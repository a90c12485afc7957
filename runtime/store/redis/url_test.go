package redis_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/redis"
)

// A url the client cannot read (from url_env, which vet does not see) is
// refused naming the problem, never quoting the password it holds.
func TestABadURLIsRefusedWithoutItsPassword(t *testing.T) {
	for _, url := range []string{"redis://:s3cret@127.0.0.1:port/0", "redis://agentc:s3cret@127.0.0.1:6379/0?foo=bar", "postgres://agentc:s3cret@127.0.0.1/0"} {
		_, err := redis.Open(context.Background(), url, "")
		require.Error(t, err, url)
		assert.NotContains(t, err.Error(), "s3cret", url)
		assert.Contains(t, err.Error(), "redis url", url)
	}
}
