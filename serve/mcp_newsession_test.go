package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMCPNewCallerSessionIsListed: an HTTP upstream restarts with a tool
// poisoned and announces nothing, and no session the proxy holds notices
// (its listing session's stream is still open). A caller that was not
// there before opens its first upstream session on the restarted server:
// the tools are listed on that session and scanned before its first call,
// so the poisoned tool is refused, not called, and withheld.
func TestMCPNewCallerSessionIsListed(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", "sk-test")
	var echo countingEcho
	s, _, restart := lookupThroughScan(t, &echo, "")

	restart(&mcp.Tool{Name: "lookup", Description: poisoned})
	fresh := connectProxy(t, s.url, "agent-key", nil)
	poisonedLookupRefused(t, s, fresh, &echo)
	assert.Empty(t, listedDescriptions(t, fresh), "the poisoned tool is no longer listed")
}

// stdioDescribedPolicy serves the stdio helper (TestMCPStdioHelper), a
// process per tenant, its ping described as the file %[3]q says, through
// a proxy whose chat chain scans the definitions.
const stdioDescribedPolicy = `package gw

models: primary: {provider: "openai", model: "gpt-4.1-mini", base_url: "http://127.0.0.1:1/v1", api_key_env: "AGENTC_TEST_OPENAI_KEY"}
keys: {
	alpha: {sha256: %[1]q, tenant: "alpha"}
	beta: {sha256: %[2]q, tenant: "beta"}
}
mcp: servers: crashy: {command: [%[4]q, "-test.run=^TestMCPStdioHelper$"], env: {AGENTC_TEST_MCP_STDIO: "1", AGENTC_TEST_MCP_DESCRIBE: %[3]q}}
chains: chat: [{use: "security", name: "injection"}]
`

// TestMCPStdioProcessServingTheCallIsListed: a command server runs a
// process per tenant besides the one that lists its tools. A process
// started after the server's program changed (here: the description it
// reads) describes ping poisoned while the listing process still describes
// it clean: the tools are listed on the process that serves the call, and
// scanned, before the call reaches it: a tenant's first process and a
// tenant's process started again after its last exited.
func TestMCPStdioProcessServingTheCallIsListed(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", "sk-test")
	for _, restarted := range []bool{false, true} {
		t.Run(fmt.Sprintf("restarted=%v", restarted), func(t *testing.T) {
			describe := filepath.Join(t.TempDir(), "describe")
			require.NoError(t, os.WriteFile(describe, []byte("Ping."), 0o644))
			s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(stdioDescribedPolicy,
				sha("alpha-key"), sha("beta-key"), describe, os.Args[0]))), WatchInterval: -1})
			alpha := connectProxy(t, s.url, "alpha-key", nil)
			ctx := context.Background()
			if restarted {
				require.Contains(t, callText(t, alpha, "ping", nil), "pong from")
				res, err := alpha.CallTool(ctx, &mcp.CallToolParams{Name: "crash"})
				require.NoError(t, err)
				require.True(t, res.IsError, "the tenant's process exited")
			}

			require.NoError(t, os.WriteFile(describe, []byte(poisoned), 0o644))
			res, err := alpha.CallTool(ctx, &mcp.CallToolParams{Name: "ping"})
			if err == nil {
				require.True(t, res.IsError, "the poisoned ping ran: %s", text(t, res))
				assert.Contains(t, text(t, res), `blocked by mcp: tool "ping" of mcp server "crashy" is not served`)
			} else {
				assert.Contains(t, err.Error(), `unknown tool "ping"`)
			}
			assert.Contains(t, s.logs.String(), "tool=ping server=crashy layer=injection")
			assert.NotContains(t, listedDescriptions(t, alpha), "ping", "the poisoned ping is no longer listed")
		})
	}
}

// TestMCPStdioProcessOfAnotherVersionIsRefused: a command's program
// changes (ping's description, clean) while tenant alpha's process runs.
// Tenant beta's process, started after, describes ping anew: the new
// definition is listed on beta's process, scanned and served, and beta's
// calls run (but the first, which held the generation replaced). Alpha's process, listed again before its call, still
// describes ping as before: its call is refused, not sent, as the
// definition it would run is not the one served.
func TestMCPStdioProcessOfAnotherVersionIsRefused(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", "sk-test")
	describe := filepath.Join(t.TempDir(), "describe")
	require.NoError(t, os.WriteFile(describe, []byte("Ping."), 0o644))
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(stdioDescribedPolicy,
		sha("alpha-key"), sha("beta-key"), describe, os.Args[0]))), WatchInterval: -1})
	alpha := connectProxy(t, s.url, "alpha-key", nil)
	before := callText(t, alpha, "ping", nil)
	require.Contains(t, before, "pong from")

	require.NoError(t, os.WriteFile(describe, []byte("Ping the server twice."), 0o644))
	beta := connectProxy(t, s.url, "beta-key", nil)
	// Beta's first call held the generation serving ping as before, which
	// the new list replaced under it: it is refused, not sent, as any call
	// holding a generation replaced is.
	res, err := beta.CallTool(context.Background(), &mcp.CallToolParams{Name: "ping"})
	require.NoError(t, err)
	require.True(t, res.IsError, "beta's call ran on the definition it did not hold: %s", text(t, res))
	assert.Contains(t, text(t, res), `blocked by mcp: tool "ping" of mcp server "crashy" is not served:`)
	require.Contains(t, callText(t, beta, "ping", nil), "pong from", "beta's process serves the definition it lists")
	assert.Equal(t, "Ping the server twice.", listedDescriptions(t, beta)["ping"])

	res, err = alpha.CallTool(context.Background(), &mcp.CallToolParams{Name: "ping"})
	require.NoError(t, err)
	require.True(t, res.IsError, "alpha's process of the older version ran: %s", text(t, res))
	assert.Contains(t, text(t, res), `blocked by mcp: tool "ping" of mcp server "crashy" is not served on this upstream session`)

	// The process of the older version is let go with the refused call:
	// alpha's retry starts another, of the program as it is now, which
	// serves ping as scanned. Refused calls kept it alive (each counted as
	// a call against -idle), so alpha was refused for as long as it called.
	for range 2 {
		after := callText(t, alpha, "ping", nil)
		assert.Contains(t, after, "pong from", "alpha's retry runs on a process of the version served")
		assert.NotEqual(t, before, after, "not on the process of the older version")
	}
}
