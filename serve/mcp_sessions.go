package serve

import (
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionCap bounds the MCP sessions each key keeps open. The SDK keeps a
// session (its state and a goroutine) until it is deleted or idle for the
// session timeout (-idle), so a client opening a session per request would
// grow the gateway's memory without bound; past max, the key's sessions
// used the longest ago are closed.
type sessionCap struct {
	mu  sync.Mutex
	max int
	// byKey holds, by key name, the last use of each session it opened
	// (sessions since closed are dropped when the bound is reached).
	byKey map[string]map[string]time.Time
}

// opened notes session id, opened by key, and returns the ids of the key's
// sessions to close to keep it within the bound. live lists the sessions
// the server holds.
func (c *sessionCap) opened(key, id string, now time.Time, live func() map[string]bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[string]map[string]time.Time{}
	}
	own := c.byKey[key]
	if own == nil {
		own = map[string]time.Time{}
		c.byKey[key] = own
	}
	own[id] = now
	if len(own) <= c.max {
		return nil
	}
	alive := live()
	ids := make([]string, 0, len(own))
	for sid := range own {
		if !alive[sid] {
			delete(own, sid) // deleted by its client, or timed out
			continue
		}
		ids = append(ids, sid)
	}
	if len(ids) <= c.max {
		return nil
	}
	slices.SortFunc(ids, func(a, b string) int { return own[a].Compare(own[b]) })
	over := ids[:len(ids)-c.max]
	for _, sid := range over {
		delete(own, sid)
	}
	return over
}

// used notes a request on session id of key.
func (c *sessionCap) used(key, id string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if own := c.byKey[key]; own != nil {
		if _, ok := own[id]; ok {
			own[id] = now
		}
	}
}

// liveSessionIDs returns the ids of the sessions server holds.
func liveSessionIDs(server *mcp.Server) map[string]bool {
	ids := map[string]bool{}
	for ss := range server.Sessions() {
		ids[ss.ID()] = true
	}
	return ids
}

// closeSessions closes the sessions of server named in ids.
func closeSessions(server *mcp.Server, ids []string) {
	for ss := range server.Sessions() {
		if slices.Contains(ids, ss.ID()) {
			_ = ss.Close()
		}
	}
}
