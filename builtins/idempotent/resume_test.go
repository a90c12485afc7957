package idempotent_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// intentCheckpoint returns the checkpoint an agent turn saves once the
// model asked for the refund of A1, before the refund runs: the version a
// worker killed right then leaves. The worker's idempotency table is in
// shared (nil: in process memory); a guard outside it stands for the kill,
// stopping the refund before it is claimed.
func intentCheckpoint(t *testing.T, shared runtime.StoreBackend) runtime.Checkpoint {
	t.Helper()
	if shared == nil {
		shared = runtime.NewMemoryStore()
	}
	killed := rt.Layer("guard", `{"deny": "tool.name == \"refund\"", "message": "killed"}`)
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool": true}`)},
		Tool: []plan.Layer{killed, rt.Layer("idempotent", `{"store": "shared"}`)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	store := runtime.NewMemoryCheckpoints()
	pl := rt.Build(t, p, runtime.Deps{Checkpoints: store, Backends: map[string]runtime.StoreBackend{"shared": shared},
		Models: map[string]runtime.ModelClient{"primary": rt.NewModel(refundCall("c1", `{"order_id":"A1"}`), rt.Response{Deltas: []string{"ok"}})},
		Tools:  map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) { return "never kept", nil }}})
	_, err := pl.RunAgent(ctx1, runtime.AgentRequest{Model: "primary", Input: "refund A1"})
	require.NoError(t, err)
	cp, ok, err := store.CheckpointAt(context.Background(), "run-1", 1)
	require.NoError(t, err)
	require.True(t, ok)
	last := cp.Transcript[len(cp.Transcript)-1]
	require.Equal(t, "assistant", last.Role)
	require.Len(t, last.ToolCalls, 1)
	require.Empty(t, cp.Tools, "no result yet")
	require.NotNil(t, cp.Calls, "the save records when the calls were made")
	return cp
}

// resumeWorker is another process that resumes the run from cp, its
// idempotency table in shared.
type resumeWorker struct {
	pl      *runtime.Pipeline
	model   *rt.Model
	refunds *atomic.Int64
	// refund is the refund tool, which counts its calls in refunds and
	// returns "R1" unless a test replaces it before the worker runs.
	refund *runtime.ToolFunc
}

func newResumeWorker(t *testing.T, cp runtime.Checkpoint, shared runtime.StoreBackend, layer plan.Layer, refunds *atomic.Int64, outer ...plan.Layer) resumeWorker {
	t.Helper()
	return newResumeWorkerWith(t, cp, shared, plan.Settings{}, layer, refunds, outer...)
}

// newResumeWorkerWith is newResumeWorker with the policy's settings.
func newResumeWorkerWith(t *testing.T, cp runtime.Checkpoint, shared runtime.StoreBackend, settings plan.Settings, layer plan.Layer, refunds *atomic.Int64, outer ...plan.Layer) resumeWorker {
	t.Helper()
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool": true}`)}, Tool: append(outer, layer)})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "other": {SideEffecting: true}}
	p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	p.Settings = settings
	store := runtime.NewMemoryCheckpoints()
	_, err := store.SaveCheckpoint(context.Background(), cp)
	require.NoError(t, err)
	model := rt.NewModel(rt.Response{Deltas: []string{"refunded"}})
	refund := runtime.ToolFunc(func(context.Context, *runtime.ToolCall) (any, error) {
		refunds.Add(1)
		return "R1", nil
	})
	pl := rt.Build(t, p, runtime.Deps{Checkpoints: store, Backends: map[string]runtime.StoreBackend{"shared": shared},
		Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"refund": func(ctx context.Context, c *runtime.ToolCall) (any, error) {
			return refund(ctx, c)
		}}})
	return resumeWorker{pl: pl, model: model, refunds: refunds, refund: &refund}
}

func (w resumeWorker) resume(t *testing.T) (runtime.AgentResult, error) {
	t.Helper()
	cp, err := w.pl.Checkpointer("")
	require.NoError(t, err)
	_, err = cp.Resume(ctx1, "run-1")
	require.NoError(t, err)
	return w.pl.RunAgent(ctx1, runtime.AgentRequest{Model: "primary", Messages: w.pl.Transcript(ctx1)})
}

// A worker killed after it saved the model's tool calls and before the
// refund claimed its key leaves a call that never started. With the
// idempotency table in a shared store, the resumed turn asks it: no claim
// means the refund runs now, once; a claim held means in doubt; a result
// stored means the result is replayed. Without a shared store, or once
// the claim would have expired, the call stays in doubt.
func TestResumedCallThatNeverStartedRuns(t *testing.T) {
	layer := rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "300ms"}`)
	for _, name := range []string{"memory", "redis", "postgres"} {
		t.Run(name, func(t *testing.T) {
			if name == "memory" {
				// Process memory died with the worker: it cannot say the
				// call never started.
				var refunds atomic.Int64
				w := newResumeWorker(t, intentCheckpoint(t, nil), runtime.NewMemoryStore(), layer, &refunds)
				_, err := w.resume(t)
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt)
				assert.Equal(t, runtime.LayerCheckpoint, doubt.Layer)
				assert.Zero(t, refunds.Load())
				assert.Zero(t, w.model.Calls())
				return
			}
			t.Run("no claim: runs once", func(t *testing.T) {
				shared := storeOf(t, name)
				cp := intentCheckpoint(t, shared)
				var refunds atomic.Int64
				res, err := newResumeWorker(t, cp, shared, layer, &refunds).resume(t)
				require.NoError(t, err)
				assert.Equal(t, "refunded", res.Output)
				assert.EqualValues(t, 1, refunds.Load(), "the refund never started: it runs now")

				// A second worker resumes the same version (the first one
				// was killed before it saved): the stored result answers.
				w := newResumeWorker(t, cp, shared, layer, &refunds)
				res, err = w.resume(t)
				require.NoError(t, err)
				assert.EqualValues(t, 1, refunds.Load(), "the refund does not run twice")
				sent := w.model.Requests()[0].Messages
				require.Equal(t, "tool", sent[len(sent)-1].Role)
				assert.Equal(t, "R1", sent[len(sent)-1].Parts[0].Text, "the stored result answers the call")
			})
			t.Run("refused outside the layer: in doubt", func(t *testing.T) {
				shared := storeOf(t, name)
				cp := intentCheckpoint(t, shared)
				var refunds atomic.Int64
				_, err := newResumeWorker(t, cp, shared, layer, &refunds).resume(t)
				require.NoError(t, err)
				require.EqualValues(t, 1, refunds.Load())

				// The next worker to resume the same version runs a policy
				// whose guard, outside the idempotent layer, now refuses
				// refunds: the refund ran, so the model must not be told
				// it was refused; nor when the guard fails to evaluate.
				for _, deny := range []string{`tool.name == "refund"`, `args.missing == "x"`} {
					guard := rt.Layer("guard", `{"deny": `+strconv.Quote(deny)+`, "message": "refunds are paused"}`)
					w := newResumeWorker(t, cp, shared, layer, &refunds, guard)
					_, err = w.resume(t)
					var doubt *runtime.InDoubtError
					require.ErrorAs(t, err, &doubt, "refused before the layer answered: it may have run")
					assert.Equal(t, runtime.LayerCheckpoint, doubt.Layer)
					assert.False(t, runtime.DidNotRun(err), "nothing ran now, but the refund ran before")
					assert.EqualValues(t, 1, refunds.Load())
					assert.Zero(t, w.model.Calls(), "the model is not told the refund was refused")
					msgs := w.pl.Transcript(ctx1)
					assert.Equal(t, "assistant", msgs[len(msgs)-1].Role, "the call is left unanswered")
				}

				// Inside the layer, the same guard is never reached: the
				// layer answers with the stored result.
				inner := rt.Layer("guard", `{"deny": "tool.name == \"refund\"", "message": "refunds are paused"}`)
				w := newResumeWorker(t, cp, shared, inner, &refunds, layer)
				_, err = w.resume(t)
				require.NoError(t, err)
				assert.EqualValues(t, 1, refunds.Load())
				sent := w.model.Requests()[0].Messages
				assert.Equal(t, "R1", sent[len(sent)-1].Parts[0].Text, "the stored result answers the call")
			})
			t.Run("claim held: in doubt", func(t *testing.T) {
				shared := storeOf(t, name)
				cp := intentCheckpoint(t, shared)
				// The killed worker had claimed the refund.
				c := &runtime.ToolCall{Name: "refund", Args: map[string]any{"order_id": "A1"}, Meta: runtime.Meta{Run: runtime.Run{ID: "run-1"}}}
				g, err := shared.(runtime.Leaser).Acquire(context.Background(), idempotent.Key(c), 300*time.Millisecond, time.Hour, false)
				require.NoError(t, err)
				require.Equal(t, runtime.LeaseAcquired, g.Status)
				var refunds atomic.Int64
				w := newResumeWorker(t, cp, shared, layer, &refunds)
				_, err = w.resume(t)
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt, "the claim outlived its lease without an outcome")
				assert.Zero(t, refunds.Load())
				assert.Zero(t, w.model.Calls())
			})
			t.Run("claim could have expired: in doubt", func(t *testing.T) {
				// Recorded a day ago by the store's clock; then by a build
				// that did not record the store's time, a day ago by its own.
				shared := storeOf(t, name)
				old := intentCheckpoint(t, shared)
				require.Len(t, old.Calls.StoreTimes, 1, "the store's time is recorded with its identity")
				for id, at := range old.Calls.StoreTimes {
					old.Calls.StoreTimes[id] = at.Add(-24 * time.Hour)
				}
				var refunds atomic.Int64
				_, err := newResumeWorker(t, old, shared, layer, &refunds).resume(t)
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt, "a claim made then would be gone after the ttl (24h)")

				older := intentCheckpoint(t, shared)
				older.Calls.StoreTimes = nil
				older.Calls.Time = older.Calls.Time.Add(-24 * time.Hour)
				_, err = newResumeWorker(t, older, shared, layer, &refunds).resume(t)
				require.ErrorAs(t, err, &doubt, "without the store's time, the recording process's clock decides")
				assert.Zero(t, refunds.Load())
			})
			t.Run("no claim, the recording clock a day behind: runs once", func(t *testing.T) {
				// By the store's clock the calls were recorded just now.
				shared := storeOf(t, name)
				cp := intentCheckpoint(t, shared)
				cp.Calls.Time = cp.Calls.Time.Add(-25 * time.Hour)
				var refunds atomic.Int64
				_, err := newResumeWorker(t, cp, shared, layer, &refunds).resume(t)
				require.NoError(t, err)
				assert.EqualValues(t, 1, refunds.Load())
			})
			t.Run("claim expired, the recording clock ahead: in doubt", func(t *testing.T) {
				// The killed worker claimed the refund and made it; its
				// claim is gone after the ttl by the store's clock. The
				// worker's clock ran two minutes ahead of the resuming
				// one's: by theirs the ttl has not passed.
				short := rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "300ms", "ttl": "1s"}`)
				shared := storeOf(t, name)
				cp := intentCheckpoint(t, shared)
				cp.Calls.Time = cp.Calls.Time.Add(2 * time.Minute)
				c := &runtime.ToolCall{Name: "refund", Args: map[string]any{"order_id": "A1"}, Meta: runtime.Meta{Run: runtime.Run{ID: "run-1"}}}
				g, err := shared.(runtime.Leaser).Acquire(context.Background(), idempotent.Key(c), 300*time.Millisecond, time.Second, false)
				require.NoError(t, err)
				require.Equal(t, runtime.LeaseAcquired, g.Status)
				time.Sleep(1500 * time.Millisecond)
				var refunds atomic.Int64
				_, err = newResumeWorker(t, cp, shared, short, &refunds).resume(t)
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt, "the claim may have been made and expired: the store cannot say the call never started")
				assert.Zero(t, refunds.Load(), "the refund does not run a second time")
			})
			t.Run("layer not on the tool: in doubt", func(t *testing.T) {
				other := rt.Layer("idempotent", `{"store": "shared"}`)
				other.Tools = []string{"other"}
				shared := storeOf(t, name)
				var refunds atomic.Int64
				_, err := newResumeWorker(t, intentCheckpoint(t, shared), shared, other, &refunds).resume(t)
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt)
				assert.Equal(t, runtime.LayerCheckpoint, doubt.Layer)
				assert.Zero(t, refunds.Load())
			})
			t.Run("layer skipped by when: the tool is not reached", func(t *testing.T) {
				skipped := rt.Layer("idempotent", `{"store": "shared"}`)
				skipped.When = &plan.Predicate{Stage: plan.StageTool, Source: `args.order_id == "B2"`}
				shared := storeOf(t, name)
				var refunds atomic.Int64
				w := newResumeWorker(t, intentCheckpoint(t, shared), shared, skipped, &refunds)
				_, err := w.resume(t)
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt, "no layer answered for the call")
				assert.False(t, runtime.DidNotRun(err), "it may have run before")
				assert.Zero(t, refunds.Load())
				assert.Zero(t, w.model.Calls())
			})
		})
	}
}

// storeOf returns a fresh namespace of the test server name.
func storeOf(t *testing.T, name string) runtime.StoreBackend {
	if name == "redis" {
		return storetest.Redis(t)
	}
	return storetest.Postgres(t)
}

// A resumed call is answered only by the store its turn would have claimed
// it in. Pointed, between the kill and the resume, at another namespace of
// the server (a config change, a failover to an empty replica), or at the
// same one emptied (a Redis flushed, a PostgreSQL schema dropped and
// created again), the layer finds no claim of the refund, which may have
// run all the same: it is in doubt, and does not run. So is a call whose
// checkpoint an earlier version saved, without the store's identity.
func TestResumedCallInAnotherStoreIsInDoubt(t *testing.T) {
	layer := rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "300ms"}`)
	for _, name := range []string{"redis", "postgres"} {
		t.Run(name, func(t *testing.T) {
			cases := []struct {
				name string
				// resumeIn returns the store the resumed worker's layer
				// claims in, given the killed worker's.
				resumeIn func(t *testing.T, killed runtime.StoreBackend) runtime.StoreBackend
				edit     func(cp *runtime.Checkpoint)
				layer    string
				// config is the resumed worker's layer's, when it is not
				// the killed worker's.
				config string
			}{
				{name: "another namespace", layer: "idempotent",
					resumeIn: func(t *testing.T, _ runtime.StoreBackend) runtime.StoreBackend { return storeOf(t, name) }},
				{name: "emptied", layer: "idempotent", resumeIn: emptied},
				{name: "unreachable", layer: runtime.LayerCheckpoint,
					resumeIn: func(t *testing.T, killed runtime.StoreBackend) runtime.StoreBackend {
						s := reopened(t, killed)
						require.NoError(t, s.(interface{ Close() error }).Close())
						return s
					}},
				{name: "recorded by an earlier version", layer: runtime.LayerCheckpoint,
					resumeIn: func(_ *testing.T, killed runtime.StoreBackend) runtime.StoreBackend { return killed },
					edit:     func(cp *runtime.Checkpoint) { cp.Calls.Stores = nil }},
				// The same store, but the layer now keys calls on their
				// arguments: a claim made then is under another key.
				{name: "key_args changed", layer: "idempotent", config: `{"store": "shared", "lease_ttl": "300ms", "key_args": ["order_id"]}`,
					resumeIn: reopened},
				{name: "claim key not recorded", layer: "idempotent", resumeIn: reopened,
					edit: func(cp *runtime.Checkpoint) { cp.Calls.Keys = nil }},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					killed := storeOf(t, name)
					cp := intentCheckpoint(t, killed)
					require.Len(t, cp.Calls.Stores, 1, "the turn recorded the store's identity")
					require.Len(t, cp.Calls.Keys, 1, "and the key of the claim")
					if tc.edit != nil {
						tc.edit(&cp)
					}
					var refunds atomic.Int64
					l := layer
					if tc.config != "" {
						l = rt.Layer("idempotent", tc.config)
					}
					w := newResumeWorker(t, cp, tc.resumeIn(t, killed), l, &refunds)
					_, err := w.resume(t)
					var doubt *runtime.InDoubtError
					require.ErrorAs(t, err, &doubt, "no claim in this store says nothing of the refund")
					assert.Equal(t, tc.layer, doubt.Layer)
					assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
					assert.Zero(t, refunds.Load(), "the refund does not run")
					assert.Zero(t, w.model.Calls())
				})
			}
			t.Run("the same store, reopened", func(t *testing.T) {
				// Another process opening the same namespace is the same
				// store: the refund never started, and runs once.
				killed := storeOf(t, name)
				cp := intentCheckpoint(t, killed)
				var refunds atomic.Int64
				res, err := newResumeWorker(t, cp, reopened(t, killed), layer, &refunds).resume(t)
				require.NoError(t, err)
				assert.Equal(t, "refunded", res.Output)
				assert.EqualValues(t, 1, refunds.Load())
			})
		})
	}
}

// emptied empties the namespace of s as FLUSHDB would (Redis: every key of
// its prefix deleted) or as an operator who drops the schema and lets the
// next process create it again (PostgreSQL), and returns the store the
// next process opens there.
func emptied(t *testing.T, s runtime.StoreBackend) runtime.StoreBackend {
	t.Helper()
	ctx := context.Background()
	switch s := s.(type) {
	case *redis.Store:
		keys, err := s.Client().Keys(ctx, s.Prefix()+"*").Result()
		require.NoError(t, err)
		require.NotEmpty(t, keys, "the identity is there")
		require.NoError(t, s.Client().Del(ctx, keys...).Err())
		return s
	case *postgres.Store:
		_, err := s.Pool().Exec(ctx, "DROP SCHEMA "+s.Schema()+" CASCADE")
		require.NoError(t, err)
		return reopened(t, s)
	}
	t.Fatalf("no server store: %T", s)
	return nil
}

// reopened opens the namespace of s again, as another process does.
func reopened(t *testing.T, s runtime.StoreBackend) runtime.StoreBackend {
	t.Helper()
	ctx := context.Background()
	var (
		out runtime.StoreBackend
		err error
	)
	switch s := s.(type) {
	case *redis.Store:
		out, err = redis.Open(ctx, storetest.ServerURL(t, storetest.RedisEnv), strings.TrimSuffix(s.Prefix(), ":"))
	case *postgres.Store:
		out, err = postgres.Open(ctx, storetest.ServerURL(t, storetest.PostgresEnv), s.Schema())
	default:
		t.Fatalf("no server store: %T", s)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = out.(interface{ Close() error }).Close() })
	return out
}

// A resumed call that never started, whose key a duplicate in the same
// process is running when it arrives, shares that duplicate's outcome: an
// error the tool returned is its answer, not a doubt, since the duplicate
// claimed the key, so no claim of it had been made. The refund runs once.
func TestResumedCallJoiningAFailedDuplicate(t *testing.T) {
	layer := rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "300ms"}`)
	for _, name := range []string{"redis", "postgres"} {
		t.Run(name, func(t *testing.T) {
			shared := storeOf(t, name)
			cp := intentCheckpoint(t, shared)
			var refunds atomic.Int64
			w := newResumeWorker(t, cp, shared, layer, &refunds)
			entered, release := make(chan struct{}), make(chan struct{})
			*w.refund = func(context.Context, *runtime.ToolCall) (any, error) {
				refunds.Add(1)
				close(entered)
				<-release
				return nil, &runtime.CallError{Kind: runtime.KindPermanent, Message: "order A1 cannot be refunded"}
			}
			// The duplicate ends once the resumed call waits for it.
			var once sync.Once
			ended := func() { once.Do(func() { close(release) }) }
			idempotent.OnJoin(w.pl.Layers(plan.StageTool)[0].Middleware.(*idempotent.Idempotent), ended)
			t.Cleanup(ended) // should the resumed call fail, before the pipeline closes
			dup := make(chan error, 1)
			go func() {
				_, err := w.pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
				dup <- err
			}()
			<-entered
			_, err := w.resume(t)
			require.NoError(t, err, "the call never started before: the duplicate's outcome answers it")
			assert.ErrorContains(t, <-dup, "cannot be refunded")
			assert.EqualValues(t, 1, refunds.Load(), "the resumed call joined the duplicate")
			sent := w.model.Requests()[0].Messages
			require.Equal(t, "tool", sent[len(sent)-1].Role)
			assert.Contains(t, sent[len(sent)-1].Parts[0].Text, "cannot be refunded", "the model is told the refund failed")
		})
	}
}
