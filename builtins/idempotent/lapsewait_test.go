package idempotent_test

import (
	"context"
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

// A process claimed a payment and crashed; two replicas get the payment
// again while its claim is still held, and wait. Once its lease lapses
// (its last renewal a short one),
// on every store: a retry_safe payment runs once (one replica takes the
// claim over, the other replays its result), is charged once and audited
// once as run, the other call as deduped; one that is not retry_safe runs
// on neither, both in doubt, charged nothing.
func TestAClaimThatLapsesWhileTwoReplicasWaitRunsAtMostOnce(t *testing.T) {
	for name, open := range replicaStores() {
		for _, retrySafe := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/retry_safe=%v", name, retrySafe), func(t *testing.T) {
				a, b := open(t)
				sink := &runtime.MemoryAudit{}
				var calls atomic.Int64
				p := waitPlan()
				p.Tools["pay"] = plan.Tool{SideEffecting: true, RetrySafe: retrySafe}
				replica := func(kv runtime.KV) (*runtime.Pipeline, sleepSignal) {
					clock := sleepSignal{sleeping: make(chan struct{}, 1)}
					return rt.Build(t, p, runtime.Deps{KV: kv, Audit: sink, Clock: clock,
						Tools: map[string]runtime.ToolFunc{"pay": func(context.Context, *runtime.ToolCall) (any, error) {
							calls.Add(1)
							return "paid", nil
						}}}), clock
				}
				pa, ca := replica(a)
				pb, cb := replica(b)

				req := runtime.ToolRequest{Name: "pay", Args: map[string]any{"order_id": "C"}}
				l := leaser(a)
				g, err := l.Acquire(context.Background(), claimKey(req), time.Hour, time.Hour, false)
				require.NoError(t, err)
				require.Equal(t, runtime.LeaseAcquired, g.Status, "the crashed process's claim")

				ctx, cancel := context.WithTimeout(ctx1, time.Minute)
				defer cancel()
				da, db := callAsync(ctx, pa, req), callAsync(ctx, pb, req)
				for _, c := range []sleepSignal{ca, cb} {
					select {
					case <-c.sleeping: // waits for the claim held
					case <-ctx.Done():
						t.Fatal("a replica did not wait for the claim")
					}
				}
				// The crashed process's last renewal: its lease lapses now.
				ok, err := l.Renew(context.Background(), claimKey(req), g.Token, time.Millisecond)
				require.NoError(t, err)
				require.True(t, ok)
				errs := []error{<-da, <-db}

				var decisions []runtime.AuditDecision
				for _, r := range sink.Records() {
					if r.Phase == runtime.PhaseOutcome {
						decisions = append(decisions, r.Decision)
					}
				}
				charged := ledgerCalls(pa) + ledgerCalls(pb)
				if !retrySafe {
					for _, err := range errs {
						var doubt *runtime.InDoubtError
						require.ErrorAs(t, err, &doubt)
					}
					assert.Zero(t, calls.Load(), "the payment runs on neither replica")
					assert.Zero(t, charged, "a duplicate refused in doubt is not charged")
					assert.Equal(t, []runtime.AuditDecision{runtime.DecisionInDoubt, runtime.DecisionInDoubt}, decisions)
					return
				}
				for _, err := range errs {
					require.NoError(t, err)
				}
				assert.EqualValues(t, 1, calls.Load(), "the payment runs once")
				assert.EqualValues(t, 1, charged, "and is charged once")
				assert.ElementsMatch(t, []runtime.AuditDecision{runtime.DecisionOK, runtime.DecisionDeduped}, decisions)
			})
		}
	}
}

// ledgerCalls is the calls the meter of pl's tool chain (waitPlan's, of
// global scope) charged.
func ledgerCalls(pl *runtime.Pipeline) int64 {
	return pl.Layers(plan.StageTool)[0].Middleware.(runtime.LedgerReader).Ledger("").Calls
}
