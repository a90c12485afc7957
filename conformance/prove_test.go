package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/prove"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// proveCase explores a case's policy (even one vet refuses) at the case's
// depth, compares the invariants found violated with want/prove, and
// replays every counterexample from its scenario's JSON: the run must
// violate the same invariant again.
func proveCase(t *testing.T, c *Case, comp *compiler.Compilation, dir string) {
	p := comp.Plan
	if p == nil {
		again, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{NoOrderCheck: true})
		require.NoError(t, err)
		require.NotNil(t, again.Plan, "the policy of a prove case must compile: %v", again.Diagnostics)
		p = again.Plan
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := prove.Explore(ctx, p, prove.Options{Depth: c.ProveK, Dir: dir})
	require.NoError(t, err)
	got := []string{}
	var text strings.Builder
	for _, v := range r.Violations {
		if !slices.Contains(got, v.Invariant) {
			got = append(got, v.Invariant)
		}
		_ = v.WriteText(&text)
	}
	for _, u := range r.Unexplored {
		fmt.Fprintf(&text, "%s: not explored: %s\n", u.Target, u.Reason)
	}
	if len(r.Unexplored) > 0 {
		got = append(got, prove.NotExplored)
	}
	sort.Strings(got)
	assert.Equal(t, c.WantProve, got, "counterexamples:\n%s", text.String())
	for _, id := range got {
		if id == prove.NotExplored {
			continue // no counterexample: nothing ran
		}
		assert.True(t, slices.ContainsFunc(r.Violations, func(v *prove.Counterexample) bool { return v.Invariant == id && !v.Interleaving }),
			"%s has a counterexample that replays every time:\n%s", id, text.String())
	}
	for _, v := range r.Violations {
		b, err := v.ScenarioJSON()
		require.NoError(t, err)
		sc, err := scenario.Parse(b)
		require.NoError(t, err, "%s", b)
		if v.Interleaving {
			// Its concurrent copies must race as they did: it replays
			// under some interleavings only.
			continue
		}
		ids, err := prove.Replay(ctx, p, sc, prove.Options{Dir: dir})
		require.NoError(t, err)
		assert.Contains(t, ids, v.Invariant, "the counterexample of %s (%s) replays:\n%s", v.Invariant, v.Target, b)
	}
}

// The custom middlewares of the prove cases: each has a bug prove must
// find. They are registered here, in the test, as a host would register
// its own.
func init() {
	runtime.Register(runtime.Module{
		ID:     "conformance.auto_approve",
		Stages: []plan.Stage{plan.StageTool},
		Doc:    "when an inner layer blocks a tool call, marks it approved and makes it again",
		New:    func() runtime.Middleware { return &autoApprove{} },
	})
	runtime.Register(runtime.Module{
		ID:     "conformance.drop_discarded",
		Stages: []plan.Stage{plan.StageChat},
		Doc:    "forgets the usage of the model calls an inner layer discarded, as a hand-written hedge that reports only its winner would",
		New:    func() runtime.Middleware { return &dropDiscarded{} },
	})
	runtime.Register(runtime.Module{
		ID:     "conformance.naive_cache",
		Stages: []plan.Stage{plan.StageTool},
		Traits: []runtime.Trait{runtime.TraitCaches, runtime.TraitShortCircuits},
		Doc:    "caches every tool result by tool and arguments, side effects or not",
		New:    func() runtime.Middleware { return &naiveCache{} },
	})
}

// autoApprove swallows a block and calls the tool anyway.
type autoApprove struct{}

func (*autoApprove) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		v, err := next(ctx, c)
		if runtime.Classify(err) != runtime.ClassBlocked {
			return v, err
		}
		args := maps.Clone(c.Args)
		args["approved"] = true
		c.Args = args
		return next(ctx, c)
	}
}

// dropDiscarded hides what the inner layers discarded from the layers
// outside: a meter there charges only the usage of the answer it received.
type dropDiscarded struct{}

func (*dropDiscarded) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		d0 := c.Discarded
		err := next(ctx, c, yield)
		c.Discarded = d0
		return err
	}
}

// naiveCache answers a repeated call from its cache without asking whether
// the tool has side effects (the memoize builtin refuses to).
type naiveCache struct {
	mu    sync.Mutex
	cache map[string]any
}

func (n *naiveCache) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		args, _ := json.Marshal(c.Args)
		key := c.Name + "\x00" + string(args)
		n.mu.Lock()
		v, ok := n.cache[key]
		n.mu.Unlock()
		if ok {
			return v, nil
		}
		v, err := next(ctx, c)
		if err == nil {
			n.mu.Lock()
			if n.cache == nil {
				n.cache = map[string]any{}
			}
			n.cache[key] = v
			n.mu.Unlock()
		}
		return v, err
	}
}
