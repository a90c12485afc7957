package compiler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// TestTheDigestKeySettingCarriesOnlyItsVariablesName: the plan holds
// settings.digest_key_env, the variable's name, and never its value, even
// when the variable is set while the policy compiles; a name that is not
// an environment variable's is refused.
func TestTheDigestKeySettingCarriesOnlyItsVariablesName(t *testing.T) {
	const key = "compile-test-digest-key-0123456789abcdef"
	t.Setenv("AGENTC_DIGEST_KEY", key)
	dir := writePolicy(t, `package p

settings: digest_key_env: "AGENTC_DIGEST_KEY"
`)
	c, err := Compile(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	require.Empty(t, c.Diagnostics)
	b, err := plan.Encode(c.Plan)
	require.NoError(t, err)
	assert.NotContains(t, string(b), key)
	back, err := plan.Decode("mem", b)
	require.NoError(t, err, "the plan schema accepts the setting")
	assert.Equal(t, "AGENTC_DIGEST_KEY", back.Settings.DigestKeyEnv)

	bad := writePolicy(t, `package p

settings: digest_key_env: "not a variable"
`)
	c, err = Compile(context.Background(), []string{bad}, Options{})
	require.NoError(t, err)
	require.NotEmpty(t, c.Diagnostics, "a name no variable can have is refused")
	assert.Contains(t, c.Diagnostics[0].String(), "settings.digest_key_env")
}
