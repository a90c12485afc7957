package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// stateful is a test middleware that resolves its ports at Provision.
type stateful struct {
	Store string `json:"store"`
	Sink  string `json:"sink"`
	Index string `json:"index"`

	kv    runtime.KV
	sink  runtime.AuditSink
	index runtime.VectorIndex
	emb   runtime.Embedder
}

func (s *stateful) Provision(b *runtime.BuildContext) error {
	var err error
	if s.kv, err = b.KV(s.Store); err != nil {
		return err
	}
	if s.sink, err = b.AuditSink(s.Sink); err != nil {
		return err
	}
	s.sink = runtime.UnmaskedSink(s.sink)
	if s.Index != "-" {
		if s.index, err = b.VectorIndex(s.Index); err != nil {
			return err
		}
	}
	s.emb = b.Embedder()
	return nil
}

func (s *stateful) WrapTool(next runtime.ToolHandler) runtime.ToolHandler { return next }

// countingStore is a backend of the test kind that counts opens and closes.
type countingStore struct {
	*runtime.MemoryKV
}

var storeOpens, storeCloses atomic.Int64

func (countingStore) Close() error {
	storeCloses.Add(1)
	return nil
}

func init() {
	runtime.Register(runtime.Module{
		ID: "test.stateful", Stages: []plan.Stage{plan.StageTool}, Repeatable: true,
		New: func() runtime.Middleware { return &stateful{} },
	})
	runtime.RegisterStoreKind("test.failing-open", func(_ context.Context, name string, s plan.Store) (runtime.StoreBackend, error) {
		if s.Prefix == "unusable" {
			return nil, fmt.Errorf("schema is newer than this build: %w", runtime.ErrStoreUnusable)
		}
		return nil, errors.New("connection refused")
	})
	runtime.RegisterStoreKind("test.counting", func(_ context.Context, _ string, s plan.Store) (runtime.StoreBackend, error) {
		if s.Path == "fail" {
			return nil, errors.New("cannot open")
		}
		storeOpens.Add(1)
		return countingStore{runtime.NewMemoryKV()}, nil
	})
}

func statefulLayers(t *testing.T, pl *runtime.Pipeline) []*stateful {
	t.Helper()
	var out []*stateful
	for _, l := range pl.Layers(plan.StageTool) {
		out = append(out, l.Middleware.(*stateful))
	}
	return out
}

func TestStoresSharedByNameAndClosed(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Named("a", rt.Layer("test.stateful", `{"store": "shared", "index": "-"}`)),
		rt.Named("b", rt.Layer("test.stateful", `{"store": "shared", "index": "-"}`)),
		rt.Named("c", rt.Layer("test.stateful", `{}`)),
		rt.Named("d", rt.Layer("test.stateful", `{"store": "default", "sink": "mem", "index": "mem"}`)),
	}})
	p.Stores = map[string]plan.Store{"shared": {Kind: "test.counting"}, "mem": {Kind: "memory"}}
	opens, closes := storeOpens.Load(), storeCloses.Load()
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.NoError(t, err)
	ls := statefulLayers(t, pl)
	require.Len(t, ls, 4)
	assert.Equal(t, int64(1), storeOpens.Load()-opens, "one open for two layers")
	assert.Same(t, ls[0].kv.(countingStore).MemoryKV, ls[1].kv.(countingStore).MemoryKV)
	assert.Same(t, ls[2].kv, ls[3].kv, `"" and "default" are the same store`)
	assert.Same(t, ls[2].sink, ls[2].kv, "the default store offers all ports")
	assert.Same(t, ls[2].index, ls[2].kv)
	assert.NotSame(t, ls[2].sink, ls[3].sink)
	_, isHash := ls[0].emb.(runtime.HashEmbedder)
	assert.True(t, isHash, "the default embedder")
	require.NoError(t, pl.Close())
	assert.Equal(t, int64(1), storeCloses.Load()-closes)
	require.NoError(t, pl.Close())
	assert.Equal(t, int64(1), storeCloses.Load()-closes, "closed once")
}

func TestStoresFromDeps(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Named("a", rt.Layer("test.stateful", `{"store": "x", "sink": "x", "index": "x"}`)),
		rt.Named("b", rt.Layer("test.stateful", `{}`)),
	}})
	p.Stores = map[string]plan.Store{"x": {Kind: "test.counting", Path: "fail"}, "default": {Kind: "test.counting", Path: "fail"}}
	kv, audit, idx := runtime.NewMemoryKV(), &runtime.MemoryAudit{}, runtime.NewMemoryVectorIndex()
	kv2, audit2, idx2 := runtime.NewMemoryKV(), &runtime.MemoryAudit{}, runtime.NewMemoryVectorIndex()
	emb := runtime.HashEmbedder{Dims: 8}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{
		Stores: map[string]runtime.KV{"x": kv}, AuditSinks: map[string]runtime.AuditSink{"x": audit},
		Indexes: map[string]runtime.VectorIndex{"x": idx},
		KV:      kv2, Audit: audit2, Index: idx2, Embedder: emb,
	})
	require.NoError(t, err, "ports from Deps are not opened")
	defer pl.Close()
	ls := statefulLayers(t, pl)
	assert.Same(t, kv, ls[0].kv)
	assert.Same(t, audit, ls[0].sink)
	assert.Same(t, idx, ls[0].index)
	assert.Same(t, kv2, ls[1].kv)
	assert.Same(t, audit2, ls[1].sink)
	assert.Same(t, idx2, ls[1].index)
	assert.Equal(t, emb, ls[1].emb)
}

func TestStoreErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		stores map[string]plan.Store
		want   string
	}{
		{"undeclared", `{"store": "nope"}`, nil, `store "nope" is not declared`},
		{"unknown kind", `{"store": "x"}`, map[string]plan.Store{"x": {Kind: "etcd"}}, `kind "etcd" is not registered`},
		{"open fails", `{"store": "x"}`, map[string]plan.Store{"x": {Kind: "test.counting", Path: "fail"}}, "cannot open"},
		{"missing port", `{"index": "x"}`, map[string]plan.Store{"x": {Kind: "test.counting"}}, "offers no vector index"},
		{"default replaced", `{}`, map[string]plan.Store{"default": {Kind: "test.counting", Path: "fail"}}, "cannot open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("test.stateful", tt.config)}})
			p.Stores = tt.stores
			_, err := runtime.Build(context.Background(), p, runtime.Deps{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// A declared store of an unknown kind is refused even when no layer names
// it, naming the store and the kinds known; one the host provides is not
// opened, so its kind is not checked.
func TestBuildRefusesAnUnusedStoreOfAnUnknownKind(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("test.stateful", `{}`)}})
	p.Stores = map[string]plan.Store{"other": {Kind: "nope"}}
	_, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `stores.other: kind "nope" is not registered`)
	assert.Contains(t, err.Error(), "memory", "the kinds known are named")

	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Stores: map[string]runtime.KV{"other": runtime.NewMemoryKV()}})
	require.NoError(t, err, "a store the host provides is not opened")
	require.NoError(t, pl.Close())
}

func TestRegisterStoreKindRejectsMistakes(t *testing.T) {
	open := func(context.Context, string, plan.Store) (runtime.StoreBackend, error) { return nil, nil }
	assert.Panics(t, func() { runtime.RegisterStoreKind("memory", open) })
	assert.Panics(t, func() { runtime.RegisterStoreKind("", open) })
	assert.Panics(t, func() { runtime.RegisterStoreKind("test.nil", nil) })
	assert.Contains(t, runtime.StoreKinds(), "memory")
}

func TestMemoryKVTTLAndSetIfAbsent(t *testing.T) {
	ctx := context.Background()
	kv := runtime.NewMemoryKV()
	ok, err := kv.SetIfAbsent(ctx, "k", []byte("a"), 20*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = kv.SetIfAbsent(ctx, "k", []byte("b"), 0)
	require.NoError(t, err)
	assert.False(t, ok, "live key")
	time.Sleep(30 * time.Millisecond)
	_, found, err := kv.Get(ctx, "k")
	require.NoError(t, err)
	assert.False(t, found, "expired")
	ok, err = kv.SetIfAbsent(ctx, "k", []byte("c"), 0)
	require.NoError(t, err)
	assert.True(t, ok, "an expired key is absent")
}

func TestMemoryKVSweepsExpiredEntries(t *testing.T) {
	ctx := context.Background()
	kv := runtime.NewMemoryKV()
	now := time.Unix(1000, 0)
	runtime.SetMemoryKVClock(kv, func() time.Time { return now })
	for i := range 50 {
		require.NoError(t, kv.Set(ctx, fmt.Sprintf("short-%d", i), []byte("v"), time.Second))
	}
	require.NoError(t, kv.Set(ctx, "forever", []byte("v"), 0))
	require.NoError(t, kv.Set(ctx, "long", []byte("v"), time.Hour))
	for i := range 1000 {
		if i%100 == 0 { // the entries written so far expire, unread
			now = now.Add(time.Minute)
		}
		ok, err := kv.SetIfAbsent(ctx, fmt.Sprintf("new-%d", i), []byte("v"), time.Second)
		require.NoError(t, err)
		require.True(t, ok)
	}
	assert.LessOrEqual(t, runtime.MemoryKVLen(kv), 250, "expired entries are swept as the map grows")
	for _, k := range []string{"forever", "long"} {
		_, found, err := kv.Get(ctx, k)
		require.NoError(t, err)
		assert.True(t, found, k)
	}
	_, found, _ := kv.Get(ctx, "new-999")
	assert.True(t, found, "a live entry is kept")
}

// TestStoresFromDepsMemory: with Deps.Memory the default store the policy
// does not declare is that memory, in every pipeline built with it, and
// closing a pipeline keeps its data; a declared default store still wins.
func TestStoresFromDepsMemory(t *testing.T) {
	mem := runtime.NewMemoryStore()
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("a", rt.Layer("test.stateful", `{}`))}})
	for range 2 {
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{Memory: mem})
		require.NoError(t, err)
		assert.Same(t, mem, statefulLayers(t, pl)[0].kv)
		require.NoError(t, pl.Close())
	}
	p.Stores = map[string]plan.Store{"default": {Kind: "memory"}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Memory: mem})
	require.NoError(t, err)
	defer pl.Close()
	assert.NotSame(t, mem, statefulLayers(t, pl)[0].kv, "the policy's own default store")
}

// TestStorePoolKeepsStoresAcrossBuilds: pipelines built with one StorePool
// share a declared store of the same name and declaration, closed when the
// last of them closes; a store whose declaration changed is opened afresh,
// the old one closed with the pipeline that used it.
func TestStorePoolKeepsStoresAcrossBuilds(t *testing.T) {
	build := func(pool *runtime.StorePool, stores map[string]plan.Store) *runtime.Pipeline {
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{
			rt.Named("a", rt.Layer("test.stateful", `{"store": "shared", "index": "-"}`)),
			rt.Named("b", rt.Layer("test.stateful", `{"store": "mem", "index": "-"}`)),
		}})
		p.Stores = stores
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{StorePool: pool})
		require.NoError(t, err)
		return pl
	}
	decl := map[string]plan.Store{"shared": {Kind: "test.counting"}, "mem": {Kind: "memory"}}
	pool := runtime.NewStorePool()
	opens, closes := storeOpens.Load(), storeCloses.Load()
	old := build(pool, decl)
	require.NoError(t, statefulLayers(t, old)[1].kv.Set(context.Background(), "refund/A1", []byte("done"), 0))
	next := build(pool, decl)
	assert.Equal(t, int64(1), storeOpens.Load()-opens, "the second build took the open store")
	require.NoError(t, old.Close())
	assert.Equal(t, int64(0), storeCloses.Load()-closes, "closing the old pipeline leaves the store its successor uses")
	v, found, err := statefulLayers(t, next)[1].kv.Get(context.Background(), "refund/A1")
	require.NoError(t, err)
	assert.True(t, found, "the memory store kept its data")
	assert.Equal(t, "done", string(v))
	assert.Equal(t, 2, pool.Open())

	changed := map[string]plan.Store{"shared": {Kind: "test.counting", Timeout: "1s"}, "mem": {Kind: "memory", Timeout: "1s"}}
	third := build(pool, changed)
	assert.Equal(t, int64(2), storeOpens.Load()-opens, "a changed declaration is opened afresh")
	assert.Equal(t, int64(0), storeCloses.Load()-closes, "the old one serves its pipeline to its end")
	_, found, err = statefulLayers(t, third)[1].kv.Get(context.Background(), "refund/A1")
	require.NoError(t, err)
	assert.True(t, found, "a memory store has no settings: it is its name")
	require.NoError(t, next.Close())
	assert.Equal(t, int64(1), storeCloses.Load()-closes, "and closes with it")
	require.NoError(t, third.Close())
	assert.Equal(t, int64(2), storeCloses.Load()-closes)
	assert.Equal(t, 0, pool.Open(), "nothing is left open")
	fresh := build(pool, map[string]plan.Store{"shared": {Kind: "test.counting"}, "mem": {Kind: "memory"}})
	defer fresh.Close()
	_, found, err = statefulLayers(t, fresh)[1].kv.Get(context.Background(), "refund/A1")
	require.NoError(t, err)
	assert.False(t, found, "a store no pipeline held was closed: built again, it starts empty")
}

// TestStorePoolMemoryStoreFollowsTheLatestClock: a memory store a pool
// keeps across builds reads the time of the latest pipeline built on it,
// not the first one's: after a reload onto another clock its TTLs expire,
// and its buckets refill, as that clock moves.
func TestStorePoolMemoryStoreFollowsTheLatestClock(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	build := func(pool *runtime.StorePool, clock runtime.Clock) *runtime.Pipeline {
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("test.stateful", `{"store": "mem", "index": "-"}`)}})
		p.Stores = map[string]plan.Store{"mem": {Kind: "memory"}}
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{StorePool: pool, Clock: clock})
		require.NoError(t, err)
		return pl
	}
	ctx := context.Background()
	pool := runtime.NewStorePool()
	first, second := runtime.NewVirtualClock(start), runtime.NewVirtualClock(start)
	old := build(pool, first)
	next := build(pool, second)
	require.NoError(t, old.Close())
	kv := statefulLayers(t, next)[0].kv
	require.NoError(t, kv.Set(ctx, "cache/A1", []byte("v"), time.Minute))
	second.Advance(2 * time.Minute)
	_, found, err := kv.Get(ctx, "cache/A1")
	require.NoError(t, err)
	assert.False(t, found, "the entry expired on the clock of the pipeline that serves")

	require.NoError(t, kv.Set(ctx, "cache/A2", []byte("v"), time.Minute))
	third := build(pool, nil)
	defer third.Close()
	require.NoError(t, next.Close())
	second.Advance(time.Hour)
	_, found, err = statefulLayers(t, third)[0].kv.Get(ctx, "cache/A2")
	require.NoError(t, err)
	assert.True(t, found, "built with no clock, the store is back on the wall clock, on which a minute has not passed")
}

// TestStoreOpenFailureMarked: a store that did not answer fails the build
// with ErrStoreOpen (it may pass: a host tries again); one whose data this
// build cannot use (ErrStoreUnusable: a schema a newer build migrated)
// does not, as it stays so until another build runs.
func TestStoreOpenFailureMarked(t *testing.T) {
	for path, transient := range map[string]bool{"down": true, "unusable": false} {
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("a", rt.Layer("test.stateful", `{"store": "s", "index": "-"}`))}})
		p.Stores = map[string]plan.Store{"s": {Kind: "test.failing-open", Prefix: path}}
		_, err := runtime.Build(context.Background(), p, runtime.Deps{})
		require.Error(t, err)
		assert.Equal(t, transient, errors.Is(err, runtime.ErrStoreOpen), "%s: %v", path, err)
	}
}
