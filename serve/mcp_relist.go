package serve

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call of a tool the proxy does not list may be of a tool an upstream
// added since its tools were last listed, without saying so (a server
// need not send notifications/tools/list_changed, nor keep the event
// stream that carries it). Before such a call is refused, each upstream
// that could serve the name (its prefix starts it) lists its tools again,
// as on a change it announces (mcp_refresh.go): a tool added is scanned
// and served, then called; one dropped is no longer listed nor called. A
// client calling names nobody serves must not have the upstreams listed
// on every call: an upstream lists again so at most once per relistEvery.

// relistEvery is the least time between two listings of an upstream's
// tools for calls of tools the proxy does not list.
var relistEvery = 5 * time.Second

// listsUnknown is the MCP server's middleware that has the upstreams list
// their tools again (relistFor) before a call of a tool not listed reaches
// the SDK, which refuses it when the new lists do not serve it either.
func (p *mcpProxy) listsUnknown(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if r, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && r.Params != nil && !p.lists(r.Params.Name) {
			// The call's waits for listings share its time to wait
			// (withListWait), and end when its client goes away or the
			// shutdown cuts it (boundTo).
			ctx = withListWait(ctx)
			var h http.Header
			if r.Extra != nil {
				h = r.Extra.Header
			}
			wctx, cancel := p.boundTo(ctx, h)
			p.s.relistFor(wctx, r.Params.Name)
			cancel()
		}
		return next(ctx, method, req)
	}
}

// lists reports whether the MCP server lists the tool name.
func (p *mcpProxy) lists(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listed[name]
}

// relistFor has each upstream that could serve name list its tools again
// (relist) and waits until their new lists are served, at most
// connectTimeout. A name that is not a valid tool name lists nothing.
func (s *Server) relistFor(ctx context.Context, name string) {
	if badToolName(name) != nil {
		return
	}
	g := s.acquire()
	var ups []*upstreamServer
	for _, up := range g.mcp.servers {
		if strings.HasPrefix(name, up.spec.Prefix) && len(name) > len(up.spec.Prefix) {
			ups = append(ups, up)
		}
	}
	g.release()
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, up := range ups {
		wg.Go(func() { up.relist(ctx) })
	}
	wg.Wait()
}

// relist lists u's tools again, unless it did so for a tool not listed
// within relistEvery, and waits until the listing under way, if any, is
// done, or ctx ends, or the call's time to wait for listings is spent
// (awaitListing).
func (u *upstreamServer) relist(ctx context.Context) {
	u.mu.Lock()
	if u.pending == nil {
		if now := time.Now(); now.Sub(u.relisted) >= relistEvery {
			u.relisted = now
			u.markChanged()
		}
	}
	u.mu.Unlock()
	_ = u.awaitListing(ctx)
}
