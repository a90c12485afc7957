package checkpoint_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// twoProcesses returns two checkpoint stores over one database, as two
// replicas open it: two connections to one sqlite file, or two pools on
// one PostgreSQL schema.
func twoProcesses(t *testing.T) map[string]func(t *testing.T) (a, b runtime.CheckpointStore) {
	return map[string]func(t *testing.T) (a, b runtime.CheckpointStore){
		"sqlite": func(t *testing.T) (runtime.CheckpointStore, runtime.CheckpointStore) {
			path := filepath.Join(t.TempDir(), "runs.db")
			a, err := sqlite.Open(context.Background(), path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = a.Close() })
			b, err := sqlite.Open(context.Background(), path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			return a, b
		},
		"postgres": func(t *testing.T) (runtime.CheckpointStore, runtime.CheckpointStore) {
			a := storetest.Postgres(t)
			b, err := postgres.Open(context.Background(), storetest.ServerURL(t, storetest.PostgresEnv), a.Schema())
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			return a, b
		},
	}
}

// worker is one replica's pipeline over its own connection to the shared
// store, its model proposing a refund of order 7.
type worker struct {
	pl      *runtime.Pipeline
	cp      *runtime.Checkpointer
	model   runtime.ModelClient
	refunds *atomic.Int32
}

func newWorker(t *testing.T, store runtime.CheckpointStore, refunds *atomic.Int32, gate func()) *worker {
	scripted := rt.NewModel(toolCallsResponse("c1", "refund", `{"order":7}`), rt.Response{Deltas: []string{"refunded"}})
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		if gate != nil {
			gate()
		}
		return scripted.Stream(ctx, req, yield)
	})
	pl := rt.Build(t, agentPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Checkpoints: store,
		Tools: map[string]runtime.ToolFunc{"refund": func(_ context.Context, c *runtime.ToolCall) (any, error) {
			refunds.Add(1)
			return map[string]any{"refunded": c.Args["order"]}, nil
		}}})
	cp, err := pl.Checkpointer("")
	require.NoError(t, err)
	return &worker{pl: pl, cp: cp, model: model, refunds: refunds}
}

// TestTwoWorkersResumeOneRun: a job redelivered to two replicas has both
// resume the run from its latest version and run the turn. Whether the
// second runs its turn after the first, or both at once, exactly one
// proceeds: the refund is made once, and the other's turn ends with a
// *runtime.CheckpointConflictError before its tool runs.
func TestTwoWorkersResumeOneRun(t *testing.T) {
	for sname, open := range twoProcesses(t) {
		for _, mode := range []string{"one after the other", "at once"} {
			t.Run(sname+"/"+mode, func(t *testing.T) {
				sa, sb := open(t)
				const runID = "case-7"
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: runID})
				// The run's first turn, saved as version 1.
				var refunds atomic.Int32
				first := newWorker(t, sa, &refunds, nil)
				first.pl.RecordTranscript(ctx, []runtime.Message{{Role: "user", Content: "hello"}, {Role: "assistant", Content: "hi"}})
				_, err := first.cp.Save(ctx)
				require.NoError(t, err)
				require.NoError(t, first.pl.Close())

				var gate func()
				if mode == "at once" {
					// Both models answer once both were asked.
					var wg sync.WaitGroup
					wg.Add(2)
					var once [2]sync.Once
					var n atomic.Int32
					gate = func() {
						i := n.Add(1) - 1
						if i < 2 {
							once[i].Do(wg.Done)
							wg.Wait()
						}
					}
				}
				a, b := newWorker(t, sa, &refunds, gate), newWorker(t, sb, &refunds, gate)
				for _, w := range []*worker{a, b} {
					_, err := w.cp.Resume(ctx, runID)
					require.NoError(t, err)
				}
				turn := func(w *worker) error {
					_, err := w.pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: w.pl.Transcript(ctx), Input: "refund order 7"})
					return err
				}
				var errs [2]error
				if mode == "at once" {
					var wg sync.WaitGroup
					for i, w := range []*worker{a, b} {
						wg.Go(func() { errs[i] = turn(w) })
					}
					wg.Wait()
				} else {
					errs[0], errs[1] = turn(a), turn(b)
				}
				assert.Equal(t, int32(1), refunds.Load(), "the refund is made once")
				var ok, refused int
				for _, err := range errs {
					var ce *runtime.CheckpointConflictError
					switch {
					case err == nil:
						ok++
					case errors.As(err, &ce):
						refused++
						assert.Equal(t, runID, ce.RunID)
						assert.ErrorContains(t, err, "another process saved version")
					default:
						t.Errorf("unexpected error: %v", err)
					}
				}
				assert.Equal(t, 1, ok, "one worker proceeds")
				assert.Equal(t, 1, refused, "the other is refused")
			})
		}
	}
}

// TestStaleWorkerCannotEndTheRun: a worker whose run another worker resumed
// and saved since has its turn cancelled (its replica shuts down): the
// cancellation is not saved, so the run stays open for the worker that
// holds it, instead of ending as cancelled under it.
func TestStaleWorkerCannotEndTheRun(t *testing.T) {
	for sname, open := range twoProcesses(t) {
		t.Run(sname, func(t *testing.T) {
			sa, sb := open(t)
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "case-8"})
			var refunds atomic.Int32
			first := newWorker(t, sa, &refunds, nil)
			first.pl.RecordTranscript(ctx, []runtime.Message{{Role: "user", Content: "hello"}})
			_, err := first.cp.Save(ctx)
			require.NoError(t, err)

			a, b := newWorker(t, sa, &refunds, nil), newWorker(t, sb, &refunds, nil)
			for _, w := range []*worker{a, b} {
				_, err := w.cp.Resume(ctx, "case-8")
				require.NoError(t, err)
			}
			_, err = b.cp.Save(ctx)
			require.NoError(t, err)

			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err = a.pl.Turn(cctx, runtime.TurnRequest{Input: "go"}, func(ctx context.Context) (string, error) { return "", ctx.Err() })
			var ce *runtime.CheckpointConflictError
			require.ErrorAs(t, err, &ce)
			latest, _, err := b.cp.Latest(ctx, "case-8")
			require.NoError(t, err)
			assert.Equal(t, runtime.RunRunning, latest.Status, "the run is still open")
			_, err = b.cp.Save(ctx)
			assert.NoError(t, err, "the worker that holds the run goes on")
		})
	}
}
