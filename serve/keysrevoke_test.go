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
)

// revokePolicy is keyArgsPolicy with a second key, other, when withOther.
func revokePolicy(upstream string, withOther bool) string {
	src := keyArgsPolicy(upstream, `["order_id"]`)
	if withOther {
		src = strings.Replace(src, "keys: agent:", fmt.Sprintf("keys: other: {sha256: %q, tenant: \"shop\"}\nkeys: agent:", sha("other-key")), 1)
	}
	return src
}

// TestAKeyRemovedByAReloadThatFailsIsRefused: a reload that removes a key
// is refused or fails for a reason other than a store or an MCP server out
// of reach (a change starting idempotency records afresh, a model's
// variable unset); the key it removes is refused at once all the same, the
// previous policy serving the key it keeps.
func TestAKeyRemovedByAReloadThatFailsIsRefused(t *testing.T) {
	for name, edit := range map[string]func(string) string{
		"refused": func(src string) string {
			return strings.Replace(src, `key_args: ["order_id"]`, `key_args: ["order_id", "amount"]`, 1)
		},
		"failed": func(src string) string {
			return src + "models: one: {provider: \"openai\", model: \"gpt-4.1-mini\", api_key_env: \"AGENTC_TEST_UNSET_KEY\"}\n"
		},
		"a key's variable unset": func(src string) string {
			return src + "keys: third: {env: \"AGENTC_TEST_UNSET_KEY\", tenant: \"shop\"}\n"
		},
	} {
		t.Run(name, func(t *testing.T) {
			upstream, _ := inProcessUpstream(t)
			dir := writePolicy(t, revokePolicy(upstream, true))
			s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
			status := func(key string) int {
				code, _, _ := do(t, "GET", s.url+"/v1/models", key, nil)
				return code
			}
			require.Equal(t, 200, status("other-key"))
			refundOnce(t, s.url, "first")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(edit(revokePolicy(upstream, false))), 0o644))
			require.Error(t, s.srv.Reload(context.Background()))
			assert.Equal(t, 401, status("other-key"), "the key the failed reload removes is refused")
			assert.Equal(t, 200, status("agent-key"), "the previous policy serves the other")
			assert.Contains(t, s.logs.String(), "keys the failed reload removes are refused until it applies")
			assert.Contains(t, s.logs.String(), "keys=[other]")

			require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte("package gw\nmodels: {"), 0o644))
			require.Error(t, s.srv.Reload(context.Background()))
			assert.Equal(t, 401, status("other-key"), "files that do not load keep the refusal")
			assert.Equal(t, 200, status("agent-key"))
			assert.Contains(t, s.logs.String(), "the keys of policy files that do not load are not known")
		})
	}
}
