package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/postgres"
)

// A url the client cannot read (from url_env, which vet does not see) is
// refused without quoting the password it holds.
func TestABadURLIsRefusedWithoutItsPassword(t *testing.T) {
	for _, url := range []string{"postgres://agentc:s3cret@127.0.0.1:port/app", "host=db password=s3cret dbname='app", "redis://agentc:s3cret@127.0.0.1/0"} {
		_, err := postgres.Open(context.Background(), url, "")
		require.Error(t, err, url)
		assert.NotContains(t, err.Error(), "s3cret", url)
		assert.Contains(t, err.Error(), "postgres url", url)
	}
}
