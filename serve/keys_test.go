package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// Every key whose variable is unset is named at once.
func TestKeyringNamesEveryUnsetVariable(t *testing.T) {
	unset := func(string) (string, bool) { return "", false }
	_, err := newKeyring(map[string]plan.Key{"app": {Env: "SUPPORT_KEY"}, "ops": {Env: "OPS_KEY"}, "demo": {SHA256: strings.Repeat("ab", 32)}}, unset)
	require.EqualError(t, err, "key \"app\": environment variable SUPPORT_KEY is not set\nkey \"ops\": environment variable OPS_KEY is not set")
}

// A gateway told that its listener is on a network address (RequireKeys)
// refuses a policy without keys, at start and at a reload, which keeps the
// keyed policy serving: a reload that drops the last key would otherwise
// open the operator's providers to every caller that reaches the address.
func TestRequireKeysRefusesAKeylessPolicy(t *testing.T) {
	g := newGateway(t, typicalChain, []reply{{body: transcript(t, "openai", "text.sse")}}, nil,
		func(o *Options) { o.RequireKeys = true })
	policy := filepath.Join(g.dir, "policy.cue")
	src, err := os.ReadFile(policy)
	require.NoError(t, err)
	keyed := fmt.Sprintf(`keys: app: {sha256: "%s", tenant: "acme"}`, sha(clientKey))
	require.Contains(t, string(src), keyed)
	keyless := strings.Replace(string(src), keyed, "", 1)
	require.NoError(t, os.WriteFile(policy, []byte(keyless), 0o644))

	err = g.srv.Reload(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "declares no keys")
	assert.Contains(t, g.logs.String(), "declares no keys")
	code, _, body := do(t, "POST", g.url+"/v1/chat/completions", "", chatBody("primary", "Hello", false))
	assert.Equal(t, 401, code, "the keyed policy still serves: %s", body)

	_, err = New(context.Background(), Options{Source: cueSource(g.dir), WatchInterval: -1, RequireKeys: true,
		LookupEnv: func(string) (string, bool) { return "", false }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "declares no keys")

	s, err := New(context.Background(), Options{Source: cueSource(g.dir), WatchInterval: -1,
		LookupEnv: func(string) (string, bool) { return "", false }})
	require.NoError(t, err, "without RequireKeys a keyless policy serves every caller, as documented")
	require.NoError(t, s.Close())
}

// Two keys that are the same secret (two variables holding it, a hash
// written twice) would admit its holder as whichever of them the keyring
// compared last, the tenant of the other key's budgets and runs: the load
// fails, naming both keys and neither the secret nor its variable's value.
func TestKeysHoldingTheSameSecretFailTheLoad(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"A_KEY": "shared-secret", "B_KEY": "shared-secret", "C_KEY": "other"}[k]
		return v, ok
	}
	_, err := newKeyring(map[string]plan.Key{"alice": {Env: "A_KEY", Tenant: "bank-a"}, "bob": {Env: "B_KEY", Tenant: "bank-b"},
		"carol": {Env: "C_KEY"}}, env)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `keys "alice" and "bob" are the same key`)
	assert.NotContains(t, err.Error(), "shared-secret")

	_, err = newKeyring(map[string]plan.Key{"alice": {SHA256: sha("k")}, "bob": {SHA256: strings.ToUpper(sha("k"))}}, env)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `keys "alice" and "bob" are the same key`)

	_, err = newKeyring(map[string]plan.Key{"alice": {SHA256: sha("shared-secret")}, "bob": {Env: "B_KEY"}}, env)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `keys "alice" and "bob" are the same key`)

	kr, err := newKeyring(map[string]plan.Key{"alice": {Env: "A_KEY"}, "carol": {Env: "C_KEY"}}, env)
	require.NoError(t, err)
	assert.Equal(t, 2, kr.tenants())
}

// A variable read from a file often ends with a newline (a Kubernetes
// secret, `$(cat key)` kept whole): a header's value is read without the
// spaces around it, so the key so held is compared without them, or it
// would never match and every request would be refused.
func TestKeyVariableIsReadWithoutSurroundingSpace(t *testing.T) {
	env := func(k string) (string, bool) {
		v, ok := map[string]string{"A_KEY": "alice-key\n", "BLANK": " \n\t"}[k]
		return v, ok
	}
	kr, err := newKeyring(map[string]plan.Key{"alice": {Env: "A_KEY"}}, env)
	require.NoError(t, err)
	k, ok := kr.match("alice-key")
	require.True(t, ok)
	assert.Equal(t, "alice", k.name)
	_, ok = kr.match("alice-key\n")
	assert.False(t, ok, "a presented key is trimmed before it is compared, never matched with the newline")

	_, err = newKeyring(map[string]plan.Key{"blank": {Env: "BLANK"}}, env)
	require.EqualError(t, err, `key "blank": environment variable BLANK is not set`, "a variable of spaces holds no key")
}
