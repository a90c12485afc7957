package serve

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// A plan whose key env holds the key itself (vet refuses such a policy, a
// plan written by hand is not vetted) fails to load without printing it.
func TestKeyEnvHoldingAKeyIsNotPrinted(t *testing.T) {
	unset := func(string) (string, bool) { return "", false }
	_, err := newKeyring(map[string]plan.Key{"app": {Env: "sk_live_0123456789abcdefgh"}}, unset)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "sk_live_0123456789abcdefgh")
	assert.Contains(t, err.Error(), `key "app": the environment variable its env names is not set`)

	_, err = newKeyring(map[string]plan.Key{"app": {Env: "SUPPORT_KEY"}}, unset)
	require.EqualError(t, err, `key "app": environment variable SUPPORT_KEY is not set`)
}
