package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// BenchmarkStateSet is one SetState through a deny and a set handler.
func BenchmarkStateSet(b *testing.B) {
	p := checkpointPlan(plan.Store{Kind: "memory"}, false)
	f := p.State.Fields["notes"]
	p.State.Fields["limit"] = plan.StateField{Schema: []byte(`{"type": "integer"}`), OnSet: []plan.StateHandler{
		{Deny: &plan.Predicate{Stage: plan.StageState, Phase: plan.StateOnSet, Source: "value > 100"}},
		{Set: &plan.Predicate{Stage: plan.StageState, Phase: plan.StateOnSet, Source: "value + 1"}},
	}}
	p.State.Fields["notes"] = f
	pl := rt.Build(b, p, runtime.Deps{})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pl.SetState(ctx, "limit", 7); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSave is one Checkpointer.Save of a run with a 20-message
// transcript, 5 tool results and 2 state fields, per store kind.
func BenchmarkSave(b *testing.B) {
	eachStore(b, func(b *testing.B, store plan.Store) {
		tools := map[string]runtime.ToolFunc{"lookup": rt.NewTool(rt.ToolResult{Value: map[string]any{"status": "shipped", "eta": "2d"}}).Func()}
		pl, ctx, c := benchRun(b, store, runtime.Deps{Tools: tools}, "bench")
		for range 5 {
			if _, err := pl.Tool(ctx, runtime.ToolRequest{Name: "lookup", Args: map[string]any{}}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := pl.AppendState(ctx, "notes", "called back"); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Save(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		_ = c.Delete(context.Background(), runtime.RunOf(ctx).ID)
	})
}

// eachStore runs fn as a sub-benchmark for each store kind benchStores
// offers, in the order memory, sqlite, postgres.
func eachStore(b *testing.B, fn func(b *testing.B, store plan.Store)) {
	stores := benchStores(b)
	for _, kind := range []string{"memory", "sqlite", "postgres"} {
		if store, ok := stores[kind]; ok {
			b.Run(kind, func(b *testing.B) { fn(b, store) })
		}
	}
}

// benchRun builds the pipeline of a benchmark over store and returns it,
// the context of a run of its own named after prefix, with a 20-message
// transcript recorded, and its checkpointer.
func benchRun(b *testing.B, store plan.Store, deps runtime.Deps, prefix string) (*runtime.Pipeline, context.Context, *runtime.Checkpointer) {
	pl := rt.Build(b, checkpointPlan(store, false), deps)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: fmt.Sprintf("%s-%s", prefix, storetest.Prefix(b))})
	msgs := make([]runtime.Message, 20)
	for i := range msgs {
		msgs[i] = runtime.Message{Role: "user", Content: fmt.Sprintf("message %d of the conversation, about an order", i)}
	}
	c, err := pl.Checkpointer("")
	if err != nil {
		b.Fatal(err)
	}
	pl.RecordTranscript(ctx, msgs)
	return pl, ctx, c
}

// BenchmarkCheck is the check a checkpoint layer makes before each turn
// (Checkpointer.Check) of a run this process holds, with a 20-message
// transcript saved, per store kind: one read of the latest version's number
// and status.
func BenchmarkCheck(b *testing.B) {
	eachStore(b, func(b *testing.B, store plan.Store) {
		_, ctx, c := benchRun(b, store, runtime.Deps{}, "bench-check")
		if _, err := c.Save(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Check(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		_ = c.Delete(context.Background(), runtime.RunOf(ctx).ID)
	})
}

// BenchmarkSaveLongRun is one save of a run of n messages (and n/2 tool
// results), per store kind: every save writes the whole run, so its cost,
// and the bytes a version holds (bytes/save), grow with the run.
func BenchmarkSaveLongRun(b *testing.B) {
	stores := benchStores(b)
	for _, kind := range []string{"memory", "sqlite", "postgres"} {
		store, ok := stores[kind]
		if !ok {
			continue
		}
		for _, n := range []int{100, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/%d", kind, n), func(b *testing.B) {
				pl := rt.Build(b, checkpointPlan(store, false), runtime.Deps{})
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: fmt.Sprintf("long-%d-%s", n, storetest.Prefix(b))})
				c, err := pl.Checkpointer("")
				if err != nil {
					b.Fatal(err)
				}
				msgs := make([]runtime.Message, n)
				for i := range msgs {
					msgs[i] = runtime.Message{Role: "user", Content: fmt.Sprintf("message %d of the conversation, about order %d and its refund", i, i)}
				}
				pl.RecordTranscript(ctx, msgs)
				cp, err := c.Save(ctx)
				if err != nil {
					b.Fatal(err)
				}
				data, _ := runtime.MarshalCheckpoint(cp)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.Save(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(len(data)), "bytes/save")
				_ = c.Delete(context.Background(), runtime.RunOf(ctx).ID)
			})
		}
	}
}

// BenchmarkRunGrowth grows a run to n messages two at a time (a user
// message and the answer, about 90 bytes each), saving it after each pair
// with the layer's default keep, and reports the bytes of checkpoint JSON
// the saves wrote (written-bytes, what the store would keep with keep: 0)
// and the bytes the store keeps at the end (kept-bytes).
func BenchmarkRunGrowth(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			store := &sizingStore{CheckpointStore: runtime.NewMemoryCheckpoints()}
			p := checkpointPlan(plan.Store{Kind: "memory"}, false)
			p.Stores = nil
			pl := rt.Build(b, p, runtime.Deps{Checkpoints: store})
			c, err := pl.Checkpointer("")
			if err != nil {
				b.Fatal(err)
			}
			var kept int
			for i := 0; b.Loop(); i++ {
				store.written = 0
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: fmt.Sprintf("grow-%d-%d", n, i)})
				msgs := make([]runtime.Message, 0, n)
				for len(msgs) < n {
					k := len(msgs)
					msgs = append(msgs,
						runtime.Message{Role: "user", Content: fmt.Sprintf("message %d of the conversation, about order %d and its refund", k, k)},
						runtime.Message{Role: "assistant", Content: fmt.Sprintf("message %d of the conversation, about order %d and its refund", k+1, k+1)})
					pl.RecordTranscript(ctx, msgs)
					if _, err := c.Save(ctx); err != nil {
						b.Fatal(err)
					}
				}
				vs, err := c.Versions(ctx, runtime.RunOf(ctx).ID)
				if err != nil {
					b.Fatal(err)
				}
				kept = 0
				for _, v := range vs {
					cp, _, err := c.At(ctx, runtime.RunOf(ctx).ID, v)
					if err != nil {
						b.Fatal(err)
					}
					data, _ := runtime.MarshalCheckpoint(cp)
					kept += len(data)
				}
				_ = c.Delete(context.Background(), runtime.RunOf(ctx).ID)
			}
			b.ReportMetric(float64(store.written), "written-bytes")
			b.ReportMetric(float64(kept), "kept-bytes")
		})
	}
}

// sizingStore counts the bytes of checkpoint JSON saved through it.
type sizingStore struct {
	runtime.CheckpointStore
	written int
}

func (s *sizingStore) SaveCheckpoint(ctx context.Context, cp runtime.Checkpoint) (int, error) {
	data, err := runtime.MarshalCheckpoint(cp)
	if err != nil {
		return 0, err
	}
	s.written += len(data)
	return s.CheckpointStore.SaveCheckpoint(ctx, cp)
}

// benchStores returns a memory and a sqlite store, and a PostgreSQL one in a
// schema of its own (dropped at the end) when the test server is set.
func benchStores(b *testing.B) map[string]plan.Store {
	stores := map[string]plan.Store{
		"memory": {Kind: "memory"},
		"sqlite": {Kind: "sqlite", Path: filepath.Join(b.TempDir(), "cp.db")},
	}
	if u := os.Getenv(storetest.PostgresEnv); u != "" {
		prefix := storetest.Prefix(b)
		stores["postgres"] = plan.Store{Kind: "postgres", URL: u, Prefix: prefix}
		b.Cleanup(func() {
			if s, err := postgres.Open(context.Background(), u, prefix); err == nil {
				_, _ = s.Pool().Exec(context.Background(), "DROP SCHEMA "+prefix+" CASCADE")
				_ = s.Close()
			}
		})
	}
	return stores
}
