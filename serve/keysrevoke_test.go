package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// widenKeyArgs changes the key_args of revokePolicy: a change refused as
// starting idempotency records afresh.
func widenKeyArgs(src string) string {
	return strings.Replace(src, `key_args: ["order_id"]`, `key_args: ["order_id", "amount"]`, 1)
}

// TestAKeyRemovedByAReloadThatFailsIsRefused: a reload that removes a key
// is refused or fails for a reason other than a store or an MCP server out
// of reach (a change starting idempotency records afresh, a model's
// variable unset); the key it removes is refused at once all the same, the
// previous policy serving the key it keeps.
func TestAKeyRemovedByAReloadThatFailsIsRefused(t *testing.T) {
	for name, edit := range map[string]func(string) string{
		"refused": widenKeyArgs,
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

// TestMCPSessionsOfARevokedKeyAreClosed: the MCP sessions of a key a
// reload removes are closed at once, whether the reload applies or is
// refused; the sessions of the key it keeps stay open.
func TestMCPSessionsOfARevokedKeyAreClosed(t *testing.T) {
	for name, edit := range map[string]func(string) string{
		"applied": func(src string) string { return src },
		"refused": widenKeyArgs,
	} {
		t.Run(name, func(t *testing.T) {
			upstream, _ := inProcessUpstream(t)
			dir := writePolicy(t, revokePolicy(upstream, true))
			s := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1})
			kept := connectProxy(t, s.url, "agent-key", nil)
			told := make(chan any, 1)
			gone := connectProxyWith(t, s.url, "other-key", nil, &mcp.ClientOptions{
				LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
					select {
					case told <- req.Params.Data:
					default:
					}
				}})
			require.NoError(t, gone.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "error"}))
			live := liveSessionIDs(s.srv.mcp.server)
			require.True(t, live[kept.ID()])
			require.True(t, live[gone.ID()])

			require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(edit(revokePolicy(upstream, false))), 0o644))
			err := s.srv.Reload(context.Background())
			if name == "applied" {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrStateReset)
			}
			live = liveSessionIDs(s.srv.mcp.server)
			assert.False(t, live[gone.ID()], "the revoked key's session is closed")
			assert.True(t, live[kept.ID()], "the kept key's session stays open")
			assert.Contains(t, s.logs.String(), "mcp sessions of revoked keys closed")
			select {
			case data := <-told:
				assert.Contains(t, fmt.Sprint(data), "API key of this session was revoked")
			case <-time.After(10 * time.Second):
				t.Error("the revoked session was not told why it closed")
			}
			res, err := kept.CallTool(context.Background(), &mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
			require.NoError(t, err)
			assert.False(t, res.IsError)
		})
	}
}
