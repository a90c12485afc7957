package serve

import (
	"context"
	"crypto/sha256"
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
	// byKey holds, by key name, each session it opened (sessions since
	// closed are dropped when the bound is reached).
	byKey map[string]map[string]sessionUse
}

// sessionUse is a session's last use and the hash of the key that opened
// it: a key given another secret keeps its name, not its sessions.
type sessionUse struct {
	last time.Time
	hash [sha256.Size]byte
}

// opened notes session id, opened by key, whose secret hashes to hash, and
// returns the ids of the key's sessions to close to keep it within the
// bound. live lists the sessions the server holds.
func (c *sessionCap) opened(key string, hash [sha256.Size]byte, id string, now time.Time, live func() map[string]bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[string]map[string]sessionUse{}
	}
	own := c.byKey[key]
	if own == nil {
		own = map[string]sessionUse{}
		c.byKey[key] = own
	}
	own[id] = sessionUse{last: now, hash: hash}
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
	slices.SortFunc(ids, func(a, b string) int { return own[a].last.Compare(own[b].last) })
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
		if u, ok := own[id]; ok {
			u.last = now
			own[id] = u
		}
	}
}

// revoked forgets the sessions opened by the keys whose hashes revoked
// holds and returns their ids.
func (c *sessionCap) revoked(revoked map[[sha256.Size]byte]bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []string
	for key, own := range c.byKey {
		for id, u := range own {
			if revoked[u.hash] {
				ids = append(ids, id)
				delete(own, id)
			}
		}
		if len(own) == 0 {
			delete(c.byKey, key)
		}
	}
	return ids
}

// errKeyRevoked is what a session of a revoked key is told as it closes.
const errKeyRevoked = "the API key of this session was revoked (removed from the gateway's policy or given another secret): the session is closed; open another with a key the policy admits"

// closeRevokedSessions closes the MCP sessions opened by the keys whose
// hashes revoked holds, telling each client that sets a log level why
// (errKeyRevoked), and logs how many it closed.
func (s *Server) closeRevokedSessions(revoked map[[sha256.Size]byte]bool) {
	if len(revoked) == 0 || s.mcp == nil || s.mcp.server == nil {
		return
	}
	ids := s.mcp.sessions.revoked(revoked)
	if len(ids) == 0 {
		return
	}
	// Each is told and closed apart, within a second, so that a client
	// that reads nothing holds up neither the others nor the reload.
	var wg sync.WaitGroup
	n := 0
	for ss := range s.mcp.server.Sessions() {
		if slices.Contains(ids, ss.ID()) {
			n++
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "error", Logger: "agentc", Data: errKeyRevoked})
				_ = ss.Close()
			})
		}
	}
	wg.Wait()
	s.log.Info("mcp sessions of revoked keys closed", "sessions", n)
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
