package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestMCPStdioUpstreamEnvironment: a command server inherited the whole
// environment of agentc serve, the providers' keys and the virtual keys'
// variables with it; it gets the few variables a program needs to run
// (PATH, HOME...) and what its env declares, a ${NAME} there read from
// the gateway's environment and scrubbed from the server's results as a
// header's value is.
func TestMCPStdioUpstreamEnvironment(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-provider-key-of-the-gateway")
	t.Setenv("AGENTC_TEST_GATEWAY_ONLY", "not for the upstream")
	gateway := map[string]string{"AGENTC_TEST_PASSED_TOKEN": "passed-token-value"}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: envy: {command: [%q, "-test.run=^TestMCPStdioHelper$"], env: {
	AGENTC_TEST_MCP_STDIO: "1"
	GITHUB_TOKEN: "${AGENTC_TEST_PASSED_TOKEN}"
	LOG_LEVEL: "debug"
	PRICE: "$$5"
}}
`, os.Args[0]))), WatchInterval: -1, LookupEnv: func(k string) (string, bool) { v, ok := gateway[k]; return v, ok }})
	cs := connectProxy(t, s.url, "", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "env"})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))

	inherited := []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}
	if goruntime.GOOS == "windows" {
		inherited = []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PROCESSOR_ARCHITECTURE",
			"SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE", "PROGRAMFILES"}
	}
	want := []string{"AGENTC_TEST_MCP_STDIO=1", "GITHUB_TOKEN=[redacted]", "LOG_LEVEL=debug", "PRICE=$5"}
	for _, k := range inherited {
		if v, ok := os.LookupEnv(k); ok {
			want = append(want, k+"="+v)
		}
	}
	got := strings.Split(text(t, res), "\n")
	assert.ElementsMatch(t, want, got, "the child's environment is the inherited few and its env, nothing else")
	for _, kv := range got {
		assert.NotContains(t, kv, "sk-provider-key-of-the-gateway")
		assert.NotContains(t, kv, "AGENTC_TEST_GATEWAY_ONLY")
	}
}

// TestMCPStdioUpstreamEnvUnset: a command server's env naming a variable
// the gateway lacks, or holding a malformed reference, fails the load,
// naming the server, the entry and the variable, as a header's does.
func TestMCPStdioUpstreamEnvUnset(t *testing.T) {
	dir := writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: gh: {command: [%q, "-test.run=^TestMCPStdioHelper$"], env: {
	AGENTC_TEST_MCP_STDIO: "1"
	GITHUB_TOKEN: "${AGENTC_TEST_UNSET_TOKEN}"
}}
`, os.Args[0]))
	_, err := New(context.Background(), Options{Source: cueSource(dir), Logger: slog.New(slog.DiscardHandler),
		LookupEnv: func(string) (string, bool) { return "", false }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `mcp server "gh": env GITHUB_TOKEN: environment variable AGENTC_TEST_UNSET_TOKEN is not set`)

	// A $ that is no reference is refused as a header's is ($$ writes one).
	dir = writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: gh: {command: [%q, "-test.run=^TestMCPStdioHelper$"], env: {AGENTC_TEST_MCP_STDIO: "1", PS1: "$ "}}
`, os.Args[0]))
	_, err = New(context.Background(), Options{Source: cueSource(dir), Logger: slog.New(slog.DiscardHandler),
		LookupEnv: func(string) (string, bool) { return "", false }})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `mcp server "gh": env PS1: offset 0: a $ that is neither ${NAME} nor $$`)
}

// TestCommandEnvSkipsFunctions: an inherited variable whose value is a
// shell function definition (what bash exports, and what Shellshock
// smuggled) is not passed on.
func TestCommandEnvSkipsFunctions(t *testing.T) {
	t.Setenv("TERM", "() { :; }; echo pwned")
	env, err := commandEnv(nil, func(string) (string, bool) { return "", false }, &secrets{})
	require.NoError(t, err)
	for _, kv := range env {
		assert.False(t, strings.HasPrefix(kv, "TERM="), kv)
	}
}

// TestMCPStdioUpstreamStderrScrubbed: a command server that writes on its
// standard error a credential its env read (a debug dump of its
// environment, a failed login quoting its token) does not put it in the
// gateway's log.
func TestMCPStdioUpstreamStderrScrubbed(t *testing.T) {
	logs := &rt.LogBuffer{}
	gateway := map[string]string{"AGENTC_TEST_PASSED_TOKEN": "passed-token-value"}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: envy: {command: [%q, "-test.run=^TestMCPStdioHelper$"], env: {
	AGENTC_TEST_MCP_STDIO: "1"
	AGENTC_TEST_MCP_STDERR: "login failed with ${AGENTC_TEST_PASSED_TOKEN}\n"
}}
`, os.Args[0]))), WatchInterval: -1, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		LookupEnv: func(k string) (string, bool) { v, ok := gateway[k]; return v, ok }})
	cs := connectProxy(t, s.url, "", nil)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ping"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "login failed with") }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, logs.String(), `"line":"login failed with [redacted]"`)
	assert.NotContains(t, logs.String(), "passed-token-value")
}

// TestMCPStdioUpstreamStderrMultilineSecret: a credential of several
// lines (a PEM key) that a command server writes on its standard error
// reaches the log as lines, none of which holds the whole value; each of
// its lines of minSecretLine bytes or more is scrubbed from them. A line
// cut at maxStderrLine in the middle of a credential shows none of it.
func TestMCPStdioUpstreamStderrMultilineSecret(t *testing.T) {
	const pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\nMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3S\n-----END PRIVATE KEY-----"
	logs := &rt.LogBuffer{}
	gateway := map[string]string{"AGENTC_TEST_PASSED_KEY": pem, "AGENTC_TEST_PASSED_TOKEN": "passed-token-value"}
	long := strings.Repeat("x", maxStderrLine-6)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: envy: {command: [%q, "-test.run=^TestMCPStdioHelper$"], env: {
	AGENTC_TEST_MCP_STDIO: "1"
	SIGNING_TOKEN: "${AGENTC_TEST_PASSED_TOKEN}"
	AGENTC_TEST_MCP_STDERR: "using key ${AGENTC_TEST_PASSED_KEY}\n%s${AGENTC_TEST_PASSED_TOKEN}\nstderr done\n"
	TLS_PRIVATE_KEY: "${AGENTC_TEST_PASSED_KEY}"
}, session: "shared"} // one process: its lines once
`, os.Args[0], long))), WatchInterval: -1, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		LookupEnv: func(k string) (string, bool) { v, ok := gateway[k]; return v, ok }})
	cs := connectProxy(t, s.url, "", nil)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ping"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "stderr done") }, 10*time.Second, 10*time.Millisecond)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec struct{ Msg, Line string }
		require.NoError(t, json.Unmarshal([]byte(l), &rec))
		if rec.Msg == "mcp server stderr" {
			got = append(got, rec.Line)
		}
	}
	require.Len(t, got, 7, "the key's five lines, the long line and the last")
	assert.Equal(t, []string{"using key [redacted]", "[redacted]", "[redacted]", "[redacted]", "[redacted]"}, got[:5])
	assert.True(t, strings.HasPrefix(got[5], long), "the long line is logged up to the credential")
	assert.True(t, got[5] == long, "no part of the credential cut at the bound: %q", got[5][len(long)-10:])
	assert.Equal(t, "stderr done", got[6])
}

// TestMCPStdioUpstreamEnvSettingsNotScrubbed: a command server's env
// passes ordinary settings (a log level, a directory) as well as
// credentials; only a credential is scrubbed from its results: an entry
// or a variable named as one's (token, secret, password, API key,
// credential, a KEY or AUTH word), or a value of a known credential shape
// (a GitHub token, a PEM private key). A log level of "info" scrubbed
// would turn "more information" into "more [redacted]rmation", and a
// directory scrubbed every path under it.
func TestMCPStdioUpstreamEnvSettingsNotScrubbed(t *testing.T) {
	gateway := map[string]string{
		"LOG_LEVEL":         "info",
		"PROJECT_DIR":       "/srv/project",
		"GH_PLAIN":          "ghp_0123456789abcdefABCDEF0123456789",
		"AGENTC_TEST_TOKEN": "plain-looking-value",
		"DEPLOY":            "plain-deploy-value",
		"PEM":               "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
	}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: envy: {command: [%q, "-test.run=^TestMCPStdioHelper$"], env: {
	AGENTC_TEST_MCP_STDIO: "1"
	LOG_LEVEL: "${LOG_LEVEL}"
	WORKSPACE: "${PROJECT_DIR}/cache"
	GH: "${GH_PLAIN}"
	UPSTREAM: "${AGENTC_TEST_TOKEN}"
	DEPLOY_KEY: "${DEPLOY}"
	IDENTITY: "${PEM}"
}}
`, os.Args[0]))), WatchInterval: -1, LookupEnv: func(k string) (string, bool) { v, ok := gateway[k]; return v, ok }})
	cs := connectProxy(t, s.url, "", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "env"})
	require.NoError(t, err)
	require.False(t, res.IsError, text(t, res))
	got := strings.Split(text(t, res), "\n")
	assert.Contains(t, got, "LOG_LEVEL=info", "a setting is not scrubbed")
	assert.Contains(t, got, "WORKSPACE=/srv/project/cache", "a directory is not scrubbed")
	assert.Contains(t, got, "GH=[redacted]", "a value of a known credential shape is scrubbed")
	assert.Contains(t, got, "UPSTREAM=[redacted]", "a variable named as a credential's is scrubbed")
	assert.Contains(t, got, "DEPLOY_KEY=[redacted]", "an entry named as a credential's is scrubbed")
	assert.Contains(t, got, "IDENTITY=[redacted]", "a private key is scrubbed")
	assert.NotContains(t, text(t, res), "b3BlbnNzaC1rZXktdjEAAAAA")
}
