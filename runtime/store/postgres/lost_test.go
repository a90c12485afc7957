package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A claim the server committed but whose answer was lost is the attempt's
// when it asks again with its owner nonce.
func TestAClaimWhoseReplyWasLostIsTheAttempts(t *testing.T) {
	direct := open(t)
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
	s, err := postgres.Open(context.Background(), p.URL, direct.Schema(), postgres.WithTimeout(2*time.Second))
	require.NoError(t, err)
	defer s.Close()
	storetest.LeaserLostReply(t, direct, s, p)
}
