package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestMCPReloadSkipsSessionsWithoutStream: a client session that never
// opened the GET /mcp event stream cannot be told the tools changed; a
// reload logs that at debug level, not as a warning.
func TestMCPReloadSkipsSessionsWithoutStream(t *testing.T) {
	upstream, _ := inProcessUpstream(t)
	logs := &rt.LogBuffer{}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

mcp: servers: pay: url: %q
`, upstream))), WatchInterval: -1, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	headers := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	code, h, body := do(t, "POST", s.url+"/mcp", "", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`), headers...)
	require.Equal(t, http.StatusOK, code, body)
	session := h.Get("Mcp-Session-Id")
	require.NotEmpty(t, session)
	code, _, body = do(t, "POST", s.url+"/mcp", "", []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), append(headers, "Mcp-Session-Id", session)...)
	require.Equal(t, http.StatusAccepted, code, body)

	require.NoError(t, s.srv.Reload(context.Background()))
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "list_changed") || strings.Contains(logs.String(), "not told the tools changed")
	}, 10*time.Second, 5*time.Millisecond, "the notification was attempted")
	assert.NotContains(t, logs.String(), "level=WARN")
	assert.Regexp(t, `level=DEBUG msg="mcp client not told the tools changed: its session has no event stream" session=`+session, logs.String())
}
