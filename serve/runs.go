package serve

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"slices"
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
type runTracker struct {
	mu       sync.Mutex
	runs     map[string]*runState
	byTenant map[string]map[string]*runState
	idle     time.Duration
	max      int
}

type runState struct {
	tenant string
	active int
	last   time.Time
}

func newRunTracker(idle time.Duration, max int) *runTracker {
	return &runTracker{runs: map[string]*runState{}, byTenant: map[string]map[string]*runState{}, idle: idle, max: max}
}

// begin notes a request of run id of tenant and returns the runs ended to
// keep the tenant within its bound, for the caller to end on the pipeline.
func (t *runTracker) begin(id, tenant string) (ended []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.runs[id]
	if st == nil {
		st = &runState{tenant: tenant}
		t.runs[id] = st
		own := t.byTenant[tenant]
		if own == nil {
			own = map[string]*runState{}
			t.byTenant[tenant] = own
		}
		own[id] = st
		if len(own) > t.max {
			ended = t.evict(own)
		}
	}
	st.active++
	return ended
}

// evict forgets the runs of own idle the longest: an eighth of the bound at
// once, so that a client naming a new run per request does not pay a scan
// of its runs on each. Runs with a request in flight stay. t.mu is held.
func (t *runTracker) evict(own map[string]*runState) []string {
	var idle []string
	for id, st := range own {
		if st.active == 0 {
			idle = append(idle, id)
		}
	}
	slices.SortFunc(idle, func(a, b string) int { return own[a].last.Compare(own[b].last) })
	n := min(len(idle), max(len(own)-t.max, t.max/8, 1))
	for _, id := range idle[:n] {
		t.forget(id)
	}
	return idle[:n]
}

// forget drops run id. t.mu is held.
func (t *runTracker) forget(id string) {
	st := t.runs[id]
	delete(t.runs, id)
	own := t.byTenant[st.tenant]
	delete(own, id)
	if len(own) == 0 {
		delete(t.byTenant, st.tenant)
	}
}

func (t *runTracker) end(id string, now time.Time) {
	t.mu.Lock()
	if st := t.runs[id]; st != nil {
		st.active--
		st.last = now
	}
	t.mu.Unlock()
}

// sweep forgets the runs idle since before now-idle and returns their ids.
func (t *runTracker) sweep(now time.Time) []string {
	var out []string
	t.mu.Lock()
	for id, st := range t.runs {
		if st.active == 0 && now.Sub(st.last) >= t.idle {
			t.forget(id)
			out = append(out, id)
		}
	}
	t.mu.Unlock()
	return out
}

// runID returns the pipeline's run id for a request and the id the client
// sees. A tenant's runs are kept apart from other tenants' by a prefix, so
// two tenants naming the same run never share its state. A slash in the
// tenant is escaped (%2F, as in a URL path), so the prefix ends at the first
// slash: tenant "bank" naming run "retail/r1" never reaches the run "r1" of
// tenant "bank/retail".
func runID(c caller, header string) string {
	if c.tenant == "" {
		return header
	}
	return url.PathEscape(c.tenant) + "/" + header
}

// validRunID reports whether a client's run id is usable: 1 to 128
// printable ASCII characters.
func validRunID(id string) error {
	if len(id) > maxRunID {
		return fmt.Errorf("%s is longer than %d characters", RunHeader, maxRunID)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return fmt.Errorf("%s holds a character that is not printable ASCII", RunHeader)
		}
	}
	return nil
}

// withRun attaches the request's run to ctx. It returns the finish func
// the handler calls when the request ends: an anonymous run ends then; a
// named run is ended by the idle sweep once no request of it has been seen
// for the idle period.
func (s *Server) withRun(ctx context.Context, w http.ResponseWriter, r *http.Request, g *generation, c caller) (context.Context, func(), error) {
	id := r.Header.Get(RunHeader)
	run := runtime.Run{Agent: "serve", Tenant: c.tenant}
	if c.tenant != "" {
		run.Meta = map[string]any{"tenant": c.tenant, "key": c.key}
	}
	if id == "" {
		id = "anon-" + rand.Text()
		w.Header().Set(RunHeader, id)
		run.ID = runID(c, id)
		return runtime.WithRun(ctx, run), func() { g.pl.EndRun(run.ID) }, nil
	}
	if err := validRunID(id); err != nil {
		return ctx, nil, err
	}
	run.ID = runID(c, id)
	for _, ended := range s.runs.begin(run.ID, c.tenant) {
		g.pl.EndRun(ended)
	}
	return runtime.WithRun(ctx, run), func() { s.runs.end(run.ID, time.Now()) }, nil
}
