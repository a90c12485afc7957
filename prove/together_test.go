package prove_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/prove"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

func init() {
	runtime.Register(runtime.Module{
		ID:     "provetest.check_then_run",
		Stages: []plan.Stage{plan.StageTool},
		Traits: []runtime.Trait{runtime.TraitCaches, runtime.TraitShortCircuits},
		Doc:    "dedupes a tool call by reading its table before the call and filling it after: two calls that arrive together both run",
		New:    func() runtime.Middleware { return &checkThenRun{} },
	})
}

// checkThenRun is a hand-written dedupe layer: a call whose arguments it
// has seen succeed is answered from its table, marked deduped. It reads the
// table before the call and fills it after, without holding the call of a
// duplicate in flight: duplicates one after the other run the tool once,
// duplicates that arrive together run it twice.
type checkThenRun struct {
	mu   sync.Mutex
	done map[string]any
}

func (d *checkThenRun) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		args, _ := json.Marshal(c.Args)
		key := c.Name + "\x00" + string(args)
		d.mu.Lock()
		v, ok := d.done[key]
		d.mu.Unlock()
		if ok {
			c.Meta.Deduped = true
			return v, nil
		}
		v, err := next(ctx, c)
		if err == nil {
			d.mu.Lock()
			if d.done == nil {
				d.done = map[string]any{}
			}
			d.done[key] = v
			d.mu.Unlock()
		}
		return v, err
	}
}

// oneDeliveryRuns: at most one copy of a concurrent step succeeds without
// being deduped (docs/prove.md, Limits).
const oneDeliveryRuns = `invariants: custom: one_delivery_runs: "steps.all(s, !has(s.steps) || s.steps.filter(c, c.outcome == 'ok' && !(has(c.deduped) && c.deduped)).size() <= 1)"
`

// Two deliveries of a refund that arrive together both pass the dedupe
// table before either fills it, and both run the refund: prove finds it by
// admitting the copies together (one after the other, the table does its
// job), and says that the counterexample needs that interleaving.
func TestConcurrentCopiesAdmittedTogether(t *testing.T) {
	// Copies that are not held both reach the barrier: a long grace only
	// makes sure a loaded machine schedules the second before the first
	// gives up waiting.
	t.Cleanup(prove.SetBarrierGrace(time.Second))
	r := explorePolicy(t, refundTool+oneDeliveryRuns+`chains: tool: [{use: "audit"}, {use: "provetest.check_then_run"}]`, 3)
	var found []string
	for _, v := range r.Violations {
		if v.Invariant == "one_delivery_runs" {
			found = append(found, v.Target)
			assert.Equal(t, []string{"ok", "ok"}, v.Script[:2], "both deliveries of step 0 succeed")
			assert.Equal(t, 2, v.Copies)
			assert.True(t, v.Interleaving, "one after the other, the copies run the refund once")
		}
	}
	require.Len(t, found, 1, "%s", strings.Join(violated(r), "\n"))
	assert.Contains(t, found[0], "admitted together")
}

// The idempotent builtin holds a duplicate while the first call runs, and
// the copies admitted together run the refund once: clean.
func TestIdempotentAdmittedTogether(t *testing.T) {
	r := explorePolicy(t, refundTool+oneDeliveryRuns+`chains: tool: [{use: "audit"}, {use: "idempotent"}]`, 2)
	assert.Empty(t, violated(r))
}
