package serve

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentc-dev/agentc/runtime"
)

// RunHeader names the request header that carries the run id. A request
// without it is a run of its own: the server generates an id, returns it in
// the same response header, and ends the run when the request ends.
const RunHeader = "X-Agentc-Run"

// maxRunID bounds the length of a run id.
const maxRunID = 128

// caller is who sent a request: the virtual key it presented and its
// tenant (both empty when the policy declares no keys).
type caller struct {
	key, tenant string
}

// runTracker ends named runs that have been idle for longer than idle:
// their layers drop the run's state (ledgers, buckets, the digests of the
// texts scanned). A run with a request in flight is never idle. A tenant
// keeps at most max named runs: a client naming a new run per request
// would otherwise have the layers keep state for every one of them until
// it went idle, memory without bound, so past max the tenant's runs idle
// the longest are ended early.
//
// Ending a run and a request of it exclude each other: a run being ended
// stays in the tracker, marked, until its layers have dropped its state,
// and a request of it waits for that before it begins, so the state the
// request builds (a meter's ledger) is never wiped under it.
type runTracker struct {
	mu       sync.Mutex
	runs     map[string]*runState
	byTenant map[string]map[string]*runState
	idle     time.Duration
	max      int
	// endRuns ends runs on the layers (Server.endRuns).
	endRuns func(ids []string)
}

type runState struct {
	tenant string
	active int
	last   time.Time
	// ending is closed once the run's end is over; nil while the run is
	// not being ended.
	ending chan struct{}
}

func newRunTracker(idle time.Duration, max int, endRuns func(ids []string)) *runTracker {
	return &runTracker{runs: map[string]*runState{}, byTenant: map[string]map[string]*runState{}, idle: idle, max: max, endRuns: endRuns}
}

// begin notes a request of run id of tenant, once any end of the run under
// way is over, and ends the runs past the tenant's bound.
func (t *runTracker) begin(id, tenant string) {
	t.mu.Lock()
	st := t.runs[id]
	for st != nil && st.ending != nil {
		ch := st.ending
		t.mu.Unlock()
		<-ch
		t.mu.Lock()
		st = t.runs[id]
	}
	var ended []string
	if st == nil {
		st = &runState{tenant: tenant}
		t.runs[id] = st
		own := t.byTenant[tenant]
		if own == nil {
			own = map[string]*runState{}
			t.byTenant[tenant] = own
		}
		own[id] = st
	}
	// The run is in flight before the bound is applied, so that it is
	// not among the runs ended to make room for it.
	st.active++
	if len(t.byTenant[tenant]) > t.max {
		ended = t.evict(t.byTenant[tenant])
	}
	t.mu.Unlock()
	t.finish(ended)
}

// evict marks for ending the runs of own idle the longest: an eighth of
// the bound at once, so that a client naming a new run per request does
// not pay a scan of its runs on each. Runs with a request in flight stay,
// as do runs already being ended. t.mu is held.
func (t *runTracker) evict(own map[string]*runState) []string {
	var idle []string
	for id, st := range own {
		if st.active == 0 && st.ending == nil {
			idle = append(idle, id)
		}
	}
	slices.SortFunc(idle, func(a, b string) int { return own[a].last.Compare(own[b].last) })
	n := min(len(idle), max(len(own)-t.max, t.max/8, 1))
	for _, id := range idle[:n] {
		own[id].ending = make(chan struct{})
	}
	return idle[:n]
}

// finish ends runs marked for ending on the layers, then forgets them and
// lets the requests waiting for them begin. t.mu is not held.
func (t *runTracker) finish(ids []string) {
	if len(ids) == 0 {
		return
	}
	t.endRuns(ids)
	t.mu.Lock()
	for _, id := range ids {
		st := t.runs[id]
		delete(t.runs, id)
		own := t.byTenant[st.tenant]
		delete(own, id)
		if len(own) == 0 {
			delete(t.byTenant, st.tenant)
		}
		close(st.ending)
	}
	t.mu.Unlock()
}

func (t *runTracker) end(id string, now time.Time) {
	t.mu.Lock()
	if st := t.runs[id]; st != nil {
		st.active--
		st.last = now
	}
	t.mu.Unlock()
}

// sweep ends the runs idle since before now-idle and returns their ids.
func (t *runTracker) sweep(now time.Time) []string {
	var out []string
	t.mu.Lock()
	for id, st := range t.runs {
		if st.active == 0 && st.ending == nil && now.Sub(st.last) >= t.idle {
			st.ending = make(chan struct{})
			out = append(out, id)
		}
	}
	t.mu.Unlock()
	t.finish(out)
	return out
}

// runID returns the pipeline's run id for a request and the id the client
// sees: a tenant's runs are kept apart from other tenants' by a prefix
// (runtime.TenantRunID).
func runID(c caller, header string) string { return runtime.TenantRunID(c.tenant, header) }

// validRunID reports whether a client's run id is usable: 1 to 128
// printable ASCII characters other than the space.
func validRunID(id string) error {
	if len(id) > maxRunID {
		return fmt.Errorf("%s is longer than %d characters", RunHeader, maxRunID)
	}
	if i := invisibleByte(id); i >= 0 {
		if id[i] == ' ' {
			return fmt.Errorf("%s holds a space: a run id is printable ASCII without spaces", RunHeader)
		}
		return fmt.Errorf("%s holds a character that is not printable ASCII", RunHeader)
	}
	if strings.HasPrefix(id, anonPrefix) {
		// A client naming the run of another request in flight would share
		// its state, and that request's end would wipe it.
		return fmt.Errorf("%s may not start with %q: such ids name the runs the gateway gives requests without one", RunHeader, anonPrefix)
	}
	if strings.HasPrefix(id, mcpRunPrefix) {
		// The run of an MCP session belongs to the key that opened the
		// session, as the session does.
		return fmt.Errorf("%s may not start with %q: such ids name the runs of MCP sessions", RunHeader, mcpRunPrefix)
	}
	return nil
}

// runHeader returns the run id a request names ("" for none). The header
// repeated with different ids is refused: the gateway does not pick one
// run when a proxy in front may have read the other.
func runHeader(h http.Header) (string, error) {
	vs := h.Values(RunHeader)
	for _, v := range vs[min(1, len(vs)):] {
		if v != vs[0] {
			return "", fmt.Errorf("%s is repeated with different ids; send one", RunHeader)
		}
	}
	if len(vs) == 0 {
		return "", nil
	}
	return vs[0], nil
}

// anonPrefix starts the id of the run of a request without a run id.
const anonPrefix = "anon-"

// mcpRunPrefix starts the id of the run of an MCP tool call without a run
// id: the run of its session.
const mcpRunPrefix = "mcp-"

// maxRunEnds is the most runs' ends under way after their responses
// (endAfter): while a store stalls each takes up to the store's timeout,
// and a goroutine each would grow with the request rate.
var maxRunEnds = 256

// endAfter ends the run id of a request without a run id on g's layers on
// a goroutine of its own, so that the response is not held back by it: a
// meter drops the run's ledger from its store, a round trip bounded by the
// store's timeout. The end holds g as a request does, so that g's pipeline
// is not closed under it and the server's close waits for it. The request
// holds g when it calls endAfter. While maxRunEnds ends are under way the
// request ends its run itself, before it returns: a store that stalls
// then holds the requests back, not a goroutine more per request.
func (s *Server) endAfter(g *generation, id string) {
	select {
	case s.runEnds <- struct{}{}:
	default:
		g.pl.EndRun(id)
		return
	}
	g.active.Add(1)
	go func() {
		defer func() { <-s.runEnds }()
		defer g.release()
		g.pl.EndRun(id)
	}()
}

// withRun attaches the request's run to ctx. It returns the finish func
// the handler calls when the request ends: an anonymous run ends then
// (s.endAfter, without holding the response back); a
// named run is ended by the idle sweep once no request of it has been seen
// for the idle period.
func (s *Server) withRun(ctx context.Context, w http.ResponseWriter, r *http.Request, g *generation, c caller) (context.Context, func(), error) {
	id, err := runHeader(r.Header)
	if err != nil {
		return ctx, nil, err
	}
	run := runtime.Run{Agent: "serve", Tenant: c.tenant}
	if c.tenant != "" {
		run.Meta = map[string]any{"tenant": c.tenant, "key": c.key}
	}
	if id == "" {
		id = anonPrefix + rand.Text()
		w.Header().Set(RunHeader, id)
		run.ID = runID(c, id)
		run.Ephemeral = true // no client can name it: its state goes with it
		return runtime.WithRun(ctx, run), func() { s.endAfter(g, run.ID) }, nil
	}
	if err := validRunID(id); err != nil {
		return ctx, nil, err
	}
	run.ID = runID(c, id)
	s.runs.begin(run.ID, c.tenant)
	return runtime.WithRun(ctx, run), func() { s.runs.end(run.ID, time.Now()) }, nil
}
