package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// StoreBackend is an opened state backend: one named entry of a plan's
// `stores`. It offers one or more ports, found by type assertion: KV,
// AuditSink, VectorIndex. A pipeline opens each store it needs once, shares
// it between the layers that name it, and closes it at Pipeline.Close after
// the layers' Cleanup.
type StoreBackend interface {
	// Close releases the backend. It is called once.
	Close() error
}

// Evictor is implemented by a store backend that may drop keys before their
// expiry on its own, under memory pressure: a Redis server with a maxmemory
// and a maxmemory-policy other than noeviction, which forgets an evicted
// key as a flush does.
type Evictor interface {
	// Eviction returns the server's setting that evicts ("maxmemory-policy
	// volatile-lru, maxmemory 67108864 bytes") and whether keys without an
	// expiry may go too (allkeys-*), or "" when the store evicts nothing.
	Eviction() (setting string, allKeys bool)
}

// Evicts returns the setting with which port (a store backend, or a port of
// one) may evict the keys a layer keeps in it, or "": any key when
// withoutExpiry is false, only keys without an expiry (an audit trail) when
// it is true. A layer whose state must not be lost (idempotency claims,
// budget ledgers) refuses such a store when it builds.
func Evicts(port any, withoutExpiry bool) string {
	e, ok := port.(Evictor)
	if !ok {
		return ""
	}
	setting, all := e.Eviction()
	if withoutExpiry && !all {
		return ""
	}
	return setting
}

// ErrStoreOpen is in the error of a Build that could not open a declared
// store, or record in it the policy whose state it holds (claimStore): the
// store did not answer, refused the connection, or its schema could not
// be read or migrated. It is the store's failure, not the plan's: the
// same plan may build once the store answers.
var ErrStoreOpen = errors.New("store could not be opened")

// ErrStoreUnusable is in the error of a store's opener that reached the
// store but cannot use what it holds (a schema a newer build migrated and
// declared unusable by this one): that stays so until another build runs,
// so the failure is not ErrStoreOpen.
var ErrStoreUnusable = errors.New("store not usable by this build")

// StoreOpener opens the backend of the plan store name. It runs during Build
// (ctx is Build's) and must not keep ctx.
type StoreOpener func(ctx context.Context, name string, s plan.Store) (StoreBackend, error)

var (
	storeKindsMu sync.RWMutex
	storeKinds   = map[string]StoreOpener{}
)

// RegisterStoreKind makes the store kind (the `kind` of a policy's store)
// available to Build. It panics when kind is empty or taken or open is nil:
// registration happens in init() and such a mistake is a programming error.
// The runtime registers "memory"; import
// github.com/agentc-dev/agentc/runtime/store/sqlite (or builtins/all) for
// "sqlite". A Redis or PostgreSQL backend registers its own kind the same way
// and offers the same ports, without any change to the layers that use them.
func RegisterStoreKind(kind string, open StoreOpener) {
	if kind == "" || open == nil {
		panic("runtime.RegisterStoreKind: empty kind or nil opener")
	}
	storeKindsMu.Lock()
	defer storeKindsMu.Unlock()
	if _, dup := storeKinds[kind]; dup {
		panic(fmt.Sprintf("runtime.RegisterStoreKind: kind %q already registered", kind))
	}
	storeKinds[kind] = open
}

// StoreKinds returns the registered store kinds, sorted.
func StoreKinds() []string {
	storeKindsMu.RLock()
	defer storeKindsMu.RUnlock()
	out := make([]string, 0, len(storeKinds))
	for k := range storeKinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// unregisteredKind says that no opener is registered for kind, naming the
// kinds that are and, for a kind agentc ships, the package that registers it.
func unregisteredKind(kind string, registered []string) string {
	hint := "import its package"
	if slices.Contains([]string{"sqlite", "redis", "postgres"}, kind) {
		hint = "import github.com/agentc-dev/agentc/runtime/store/" + kind + ", or builtins/all"
	}
	return fmt.Sprintf("kind %q is not registered (registered: %v; %s, or provide the store in Deps)", kind, registered, hint)
}

// checkStoreKinds refuses a plan that declares a store of a kind not
// registered, naming the store and the kinds known, whether or not a layer
// names that store: a store is opened only when a layer uses it, so an
// unknown kind would otherwise load and serve until a later policy names
// it. A store the host provides in deps by name (Backends, Stores,
// AuditSinks, Indexes) is not opened, so its kind is not checked.
func checkStoreKinds(stores map[string]plan.Store, deps *Deps) error {
	registered := func(kind string) bool { _, ok := lookupStoreKind(kind); return ok }
	for _, name := range slices.Sorted(maps.Keys(stores)) {
		if hostStore(deps, name) {
			continue
		}
		if kind := stores[name].Kind; !registered(kind) {
			return fmt.Errorf("build stores.%s: %s", name, unregisteredKind(kind, StoreKinds()))
		}
	}
	return nil
}

// hostStore reports whether the host provides the store name in deps
// (Backends, Stores, AuditSinks, Indexes): Build does not open it then.
func hostStore(deps *Deps, name string) bool {
	return deps.Backends[name] != nil || deps.Stores[name] != nil || deps.AuditSinks[name] != nil || deps.Indexes[name] != nil
}

func lookupStoreKind(kind string) (StoreOpener, bool) {
	storeKindsMu.RLock()
	defer storeKindsMu.RUnlock()
	o, ok := storeKinds[kind]
	return o, ok
}

func init() {
	RegisterStoreKind("memory", func(context.Context, string, plan.Store) (StoreBackend, error) {
		return NewMemoryStore(), nil
	})
}

// MemoryStore is the backend of kind "memory": a MemoryKV, a MemoryAudit, a
// MemoryVectorIndex, a MemoryRateLimiter and a MemoryBudgeter that live as
// long as the pipeline. It offers every port (the lease through a KVLeaser
// over its KV); its state is the process's own.
type MemoryStore struct {
	*MemoryKV
	*MemoryAudit
	*MemoryVectorIndex
	*MemoryRateLimiter
	*MemoryBudgeter
	*MemoryCheckpoints

	// clock is the clock the store's times follow (followClock).
	clock     atomic.Pointer[Clock]
	clockOnce sync.Once
}

// NewMemoryStore returns an empty in-memory backend (with a
// MemoryCheckpoints, the checkpoint port).
func NewMemoryStore() *MemoryStore {
	m := &MemoryStore{MemoryKV: NewMemoryKV(), MemoryAudit: &MemoryAudit{}, MemoryVectorIndex: NewMemoryVectorIndex(),
		MemoryRateLimiter: NewMemoryRateLimiter(), MemoryBudgeter: NewMemoryBudgeter(), MemoryCheckpoints: NewMemoryCheckpoints()}
	m.clockOnce.Do(m.wireClock)
	return m
}

// Close implements StoreBackend; it keeps the data.
func (*MemoryStore) Close() error { return nil }

// followClock makes the times of m's entries, buckets and ledgers those of
// c: the clock of the latest pipeline built on m. A store a StorePool keeps
// across builds, or a host passes to several, serves the pipelines of
// every version of the policy from one set of data, which has one time:
// the newest's, so that a reload onto another clock (a virtual one in a
// test) expires entries and refills buckets as that clock moves. A nil c
// leaves a store that never followed a clock on the wall clock, and puts
// back on it one that did.
func (m *MemoryStore) followClock(c Clock) {
	if c == nil {
		if m.clock.Load() == nil {
			return
		}
		c = RealClock{}
	}
	m.clockOnce.Do(m.wireClock)
	m.clock.Store(&c)
}

// wireClock points the times of m's ports at its clock (the wall clock
// until it follows one): done once, when NewMemoryStore makes it, so that
// followClock later swaps the clock alone while pipelines use the store.
func (m *MemoryStore) wireClock() {
	now := func() time.Time {
		if c := m.clock.Load(); c != nil {
			return (*c).Now()
		}
		return time.Now()
	}
	m.MemoryKV.now, m.MemoryVectorIndex.now, m.MemoryRateLimiter.now, m.MemoryBudgeter.now = now, now, now, now
}

// InProcess reports whether port, a store backend or one of its ports, keeps
// its state in this process's memory (the memory kinds of this package).
// Any other port, a redis or postgres store or a host's own kind, may be
// shared with other processes: a layer must not drop state there because
// this process has seen a run end or go idle, since another replica may be
// serving the run (see RunEnder).
func InProcess(port any) bool {
	switch port.(type) {
	case *MemoryStore, *MemoryKV, *MemoryAudit, *MemoryVectorIndex, *MemoryRateLimiter, *MemoryBudgeter, *MemoryCheckpoints:
		return true
	}
	return false
}

// DefaultStore is the store name that layers without `store`, `sink` or
// `index` use.
const DefaultStore = "default"

// storeSet holds the backends a pipeline opened, by store name.
type storeSet struct {
	mu    sync.Mutex
	open  map[string]StoreBackend
	order []string
	// pooled are the pool handles of the backends taken from Deps.StorePool,
	// by store name: closing the pipeline releases them.
	pooled map[string]string
}

// StorePool keeps the stores of a policy open across the pipelines a host
// builds for its versions (a reload): a pipeline built with the pool takes
// a declared store from it when a pipeline still open has it open under the
// same name and declaration (kind, path as resolved, url, url_env, prefix,
// timeout; a memory store, which has no settings, under the same name), and
// opens it otherwise. A store is closed when the last pipeline holding it
// closes, so the pipeline a reload replaces does not close a store its
// successor uses, and a store whose declaration changed is
// opened afresh while the old one serves the old pipeline to its end. A
// memory store so keeps its data across the versions, and a sqlite file, a
// redis or a postgres store its connections; a memory store's times follow
// the clock (Deps.Clock) of the latest pipeline built on it. A store that
// is spent (SpentStore: a sqlite file moved under it) is not taken: the
// next pipeline opens it afresh, and the spent one closes with the last
// pipeline that holds it. The zero value is not usable: NewStorePool.
type StorePool struct {
	mu sync.Mutex
	// open holds, by pool key, the store a pipeline built next takes;
	// held, by handle, every store a pipeline holds (a spent one too).
	open map[string]*pooledStore
	held map[string]*pooledStore
	seq  int
}

type pooledStore struct {
	b    StoreBackend
	refs int
	// key is the store's pool key; handle, its own (pipelines release it
	// by its handle: a spent store's key names its successor).
	key, handle string
	// claimedBy is the policy a pipeline built on b claimed it for
	// (claimStore), "" before a claim succeeded.
	claimedBy string
}

// SpentStore is implemented by a backend that can become unusable for
// good while it is open: a sqlite store whose file was moved, deleted or
// replaced lets go of it and fails every operation until it is opened
// again. Spent reports why, or nil while the store is usable.
type SpentStore interface {
	Spent() error
}

// NewStorePool returns an empty pool.
func NewStorePool() *StorePool {
	return &StorePool{open: map[string]*pooledStore{}, held: map[string]*pooledStore{}}
}

// Open reports the number of stores the pool holds open.
func (sp *StorePool) Open() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.held)
}

// poolKey is the identity under which store name, declared as ps (its path
// resolved), is shared: its name and declaration; for a memory store, which
// has no settings, its name (as StateChanges identifies it).
func poolKey(name string, ps plan.Store) string {
	if ps.Kind == "memory" {
		return name + "\x00memory"
	}
	return strings.Join([]string{name, ps.Kind, ps.Path, ps.URL, ps.URLEnv, ps.Prefix, ps.Timeout}, "\x00")
}

// take returns the backend open under key, holding it once more, and its
// handle, or nil when none is or the one open is spent (it is then left to
// the pipelines holding it).
func (sp *StorePool) take(key string) (StoreBackend, string) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	e := sp.open[key]
	if e == nil {
		return nil, ""
	}
	if s, ok := e.b.(SpentStore); ok && s.Spent() != nil {
		delete(sp.open, key)
		return nil, ""
	}
	e.refs++
	return e.b, e.handle
}

// claimed reports whether the backend open under key was claimed for
// policy by a pipeline built on it.
func (sp *StorePool) claimed(key, policy string) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	e := sp.open[key]
	return e != nil && policy != "" && e.claimedBy == policy
}

// setClaimed records that the backend open under key was claimed for
// policy.
func (sp *StorePool) setClaimed(key, policy string) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if e := sp.open[key]; e != nil {
		e.claimedBy = policy
	}
}

// add holds b, just opened, under key, and returns the backend to use and
// its handle: b, or the one another build opened under key meanwhile (b is
// then closed).
func (sp *StorePool) add(key string, b StoreBackend) (StoreBackend, string) {
	sp.mu.Lock()
	if e := sp.open[key]; e != nil {
		e.refs++
		sp.mu.Unlock()
		_ = b.Close()
		return e.b, e.handle
	}
	sp.seq++
	e := &pooledStore{b: b, refs: 1, key: key, handle: key + "\x00" + strconv.Itoa(sp.seq)}
	sp.open[key], sp.held[e.handle] = e, e
	sp.mu.Unlock()
	return b, e.handle
}

// release lets go of the backend held under handle, closing it when no
// pipeline holds it any more.
func (sp *StorePool) release(handle string) error {
	sp.mu.Lock()
	e := sp.held[handle]
	if e == nil {
		sp.mu.Unlock()
		return nil
	}
	if e.refs--; e.refs > 0 {
		sp.mu.Unlock()
		return nil
	}
	delete(sp.held, handle)
	if sp.open[e.key] == e {
		delete(sp.open, e.key)
	}
	sp.mu.Unlock()
	return e.b.Close()
}

// backend returns the opened backend of store name, opening it on first use:
// the plan's declaration of that name, or, for the default store when the
// plan declares none, an in-memory backend.
func (pl *Pipeline) backend(ctx context.Context, name string) (StoreBackend, error) {
	pl.stores.mu.Lock()
	defer pl.stores.mu.Unlock()
	if b, ok := pl.stores.open[name]; ok {
		return b, nil
	}
	ps, declared := pl.plan.Stores[name]
	if b := pl.deps.Backends[name]; b != nil && declared {
		if m, ok := b.(*MemoryStore); ok {
			m.followClock(pl.deps.Clock)
		}
		pl.openStore(name, b)
		return b, nil
	}
	if !declared {
		if name != DefaultStore {
			return nil, fmt.Errorf("store %q is not declared in the policy's stores", name)
		}
		if m := pl.deps.Memory; m != nil {
			// The host's process memory, which outlives this pipeline
			// (closing it keeps the data); it follows the real clock.
			pl.openStore(name, m)
			return m, nil
		}
		ps = plan.Store{Kind: "memory"}
	}
	open, ok := lookupStoreKind(ps.Kind)
	if !ok {
		return nil, fmt.Errorf("store %q: %s", name, unregisteredKind(ps.Kind, StoreKinds()))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ps.Path = pl.resolvePath(ps.Path)
	pool, key := pl.deps.StorePool, poolKey(name, ps)
	var (
		b      StoreBackend
		handle string
	)
	if pool != nil && declared {
		b, handle = pool.take(key)
	}
	if b == nil {
		var err error
		if b, err = open(ctx, name, ps); err != nil {
			if !errors.Is(err, ErrStoreUnusable) {
				err = &markedError{err: err, mark: ErrStoreOpen}
			}
			return nil, fmt.Errorf("open store %q (%s): %w", name, ps.Kind, err)
		}
		if pool != nil && declared {
			b, handle = pool.add(key, b)
		}
	}
	if m, ok := b.(*MemoryStore); ok {
		// In-memory TTLs follow the pipeline's clock: the latest
		// pipeline's, for a store taken from the pool.
		m.followClock(pl.deps.Clock)
	}
	closeIt := b.Close
	if pool != nil && declared {
		closeIt = func() error { return pool.release(handle) }
	}
	// A store taken from the pool is claimed again when the new version of
	// the policy has another package name. One the same policy claimed
	// already is not: the claim would find that policy's name, and a
	// change that leaves the store's state alone (a key revoked) so does
	// not wait for the store to answer.
	if pool == nil || !declared || !pool.claimed(key, pl.plan.Policy) {
		if err := pl.claimStore(ctx, name, ps, b); err != nil {
			_ = closeIt()
			return nil, err
		}
		if pool != nil && declared {
			pool.setClaimed(key, pl.plan.Policy)
		}
	}
	pl.openStore(name, b)
	if pool != nil && declared {
		if pl.stores.pooled == nil {
			pl.stores.pooled = map[string]string{}
		}
		pl.stores.pooled[name] = handle
	}
	return b, nil
}

// PolicyKey is the key under which a networked store declared without a
// prefix records the policy whose state it holds (the plan's Policy, the
// CUE package name).
const PolicyKey = "agentc/policy"

// claimStore records, in a store other processes may share that the policy
// declares without a prefix (a redis or postgres store in its default
// namespace), the policy whose state it holds, and refuses the store when
// it holds another policy's: two policies in one namespace would share
// their budgets, rate limits, idempotency keys and caches without either
// knowing. Replicas of one policy, and its new versions, have the same
// Policy and share the store. A prefix, even the default one written out,
// is a namespace chosen on purpose and is not checked.
func (pl *Pipeline) claimStore(ctx context.Context, name string, ps plan.Store, b StoreBackend) error {
	policy := pl.plan.Policy
	if ps.Prefix != "" || (ps.URL == "" && ps.URLEnv == "") || policy == "" || InProcess(b) {
		return nil
	}
	kv, ok := b.(KV)
	if !ok {
		return nil
	}
	won, err := kv.SetIfAbsent(ctx, PolicyKey, []byte(policy), 0)
	if err != nil {
		return fmt.Errorf("store %q (%s): record the policy whose state it holds: %w", name, ps.Kind, &markedError{err: err, mark: ErrStoreOpen})
	}
	if won {
		return nil
	}
	v, found, err := kv.Get(ctx, PolicyKey)
	if err != nil {
		return fmt.Errorf("store %q (%s): read the policy whose state it holds: %w", name, ps.Kind, &markedError{err: err, mark: ErrStoreOpen})
	}
	if !found || string(v) == policy {
		return nil
	}
	return fmt.Errorf("store %q (%s, no prefix) holds the state of policy %q; policy %q would share its budgets, rate limits, idempotency keys and caches: "+
		"give each policy its own prefix, or, to share them on purpose, set the same prefix on both (prefix \"agentc\" keeps the keys the store has)",
		name, ps.Kind, string(v), policy)
}

// openStore records b as the opened backend of store name. stores.mu is
// held.
func (pl *Pipeline) openStore(name string, b StoreBackend) {
	if pl.stores.open == nil {
		pl.stores.open = map[string]StoreBackend{}
	}
	pl.stores.open[name] = b
	pl.stores.order = append(pl.stores.order, name)
}

// closeStores closes the opened backends, last opened first.
func (pl *Pipeline) closeStores() error {
	pl.stores.mu.Lock()
	defer pl.stores.mu.Unlock()
	var errs []error
	for _, name := range slices.Backward(pl.stores.order) {
		closeIt := pl.stores.open[name].Close
		if handle, ok := pl.stores.pooled[name]; ok {
			closeIt = func() error { return pl.deps.StorePool.release(handle) }
		}
		if err := closeIt(); err != nil {
			errs = append(errs, fmt.Errorf("close store %q: %w", name, err))
		}
	}
	pl.stores.open, pl.stores.order, pl.stores.pooled = nil, nil, nil
	return errors.Join(errs...)
}

// resolvePort finds the port P of store name: a ready-made port from Deps
// (byName[name], or dflt for the default store), else the port of the opened
// backend.
func resolvePort[P any](ctx context.Context, pl *Pipeline, what, name string, byName map[string]P, dflt P, hasDflt bool) (P, error) {
	var zero P
	if name == "" {
		name = DefaultStore
	}
	if p, ok := byName[name]; ok {
		return p, nil
	}
	if name == DefaultStore && hasDflt {
		return dflt, nil
	}
	b, err := pl.backend(ctx, name)
	if err != nil {
		return zero, err
	}
	p, ok := b.(P)
	if !ok {
		return zero, fmt.Errorf("store %q (%s) offers no %s", name, pl.plan.Stores[name].Kind, what)
	}
	return p, nil
}

// KV returns the key-value store named store ("" is the default store):
// Deps.Stores[store]; for the default store Deps.KV; else the backend the
// policy declares under that name (opened once and shared by every layer
// that names it); else, for the default store, an in-memory store shared by
// the pipeline. A name neither provided nor declared is an error.
func (b *BuildContext) KV(store string) (KV, error) {
	return resolvePort(b.Context, b.p, "key-value port", store, b.p.deps.Stores, b.p.deps.KV, b.p.deps.KV != nil)
}

// AuditSink returns the audit sink named store, resolved like KV from
// Deps.AuditSinks and Deps.Audit. Every record written through it has the
// secrets of its run (the results of its secret_result tools) masked as
// "[SECRET]" before it reaches the sink: in its arguments as SecretMasker
// masks them, and inside its error message, error type, tool name and
// idempotency key.
func (b *BuildContext) AuditSink(store string) (AuditSink, error) {
	return b.p.auditSink(b.Context, store)
}

// VectorIndex returns the vector index named store, resolved like KV from
// Deps.Indexes and Deps.Index.
func (b *BuildContext) VectorIndex(store string) (VectorIndex, error) {
	return resolvePort(b.Context, b.p, "vector index", store, b.p.deps.Indexes, b.p.deps.Index, b.p.deps.Index != nil)
}

// Leaser returns the lease port of store ("" is the default store), resolved
// like KV: the backend's own Leaser when it offers one, else a KVLeaser over
// its key-value port.
func (b *BuildContext) Leaser(store string) (Leaser, error) {
	kv, err := b.KV(store)
	if err != nil {
		return nil, err
	}
	if l, ok := kv.(Leaser); ok {
		return l, nil
	}
	l := NewKVLeaser(kv)
	l.now = b.Clock().Now
	return l, nil
}

// RateLimiter returns the rate limiter of the policy store named store; an
// empty name is a limiter of the calling layer's own, in this process (the
// rate limiter of Deps.Memory when set). A store whose kind offers no rate
// limiter is an error.
func (b *BuildContext) RateLimiter(store string) (RateLimiter, error) {
	if store == "" && b.p.deps.Memory != nil {
		return b.p.deps.Memory.MemoryRateLimiter, nil
	}
	if store == "" {
		l := NewMemoryRateLimiter()
		l.now = b.Clock().Now
		return l, nil
	}
	return resolvePort[RateLimiter](b.Context, b.p, "rate limiter", store, nil, nil, false)
}

// Budgeter returns the budget ledgers of the policy store named store; an
// empty name is ledgers of the calling layer's own, in this process (the
// ledgers of Deps.Memory when set). A store whose kind offers no budgets is
// an error.
func (b *BuildContext) Budgeter(store string) (Budgeter, error) {
	if store == "" && b.p.deps.Memory != nil {
		return b.p.deps.Memory.MemoryBudgeter, nil
	}
	if store == "" {
		bg := NewMemoryBudgeter()
		bg.now = b.Clock().Now
		return bg, nil
	}
	return resolvePort[Budgeter](b.Context, b.p, "budget ledger", store, nil, nil, false)
}

// Embedder returns Deps.Embedder, or the local HashEmbedder when unset.
func (b *BuildContext) Embedder() Embedder {
	if b.p.deps.Embedder != nil {
		return b.p.deps.Embedder
	}
	return HashEmbedder{}
}
