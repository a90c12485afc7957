package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// TestListedToolsFollowTheServingGeneration: a generation's tools are
// listed on /mcp only once it serves the calls. While the list is being
// published the new generation is already current, so a client that sees a
// tool listed and calls it at once is not answered by the generation
// before (which may have withheld it).
func TestListedToolsFollowTheServingGeneration(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", "sk-test")
	srv := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)
	var echo countingEcho
	mcp.AddTool(srv, &mcp.Tool{Name: "lookup", Description: "Look an order up."}, echo.handle)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(scanPolicy, sha("agent-key"), ts.URL,
		`chains: chat: [{use: "security", name: "injection"}]`))), WatchInterval: -1})
	old := s.srv.cur.Load()

	// Hold the list while a reload installs the next generation.
	s.srv.mcp.mu.Lock()
	unlock := sync.OnceFunc(s.srv.mcp.mu.Unlock)
	defer unlock()
	reloaded := make(chan error, 1)
	go func() { reloaded <- s.srv.Reload(context.Background()) }()
	require.Eventually(t, func() bool { return s.srv.cur.Load() != old }, 10*time.Second, 5*time.Millisecond,
		"the next generation serves before its tools are listed")
	unlock()
	require.NoError(t, <-reloaded)
}
