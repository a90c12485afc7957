package ratelimit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "rate_limit"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat, plan.StageTool, plan.StageTurn},
		Traits:  []runtime.Trait{runtime.TraitShortCircuits},
		// Each layer keeps its own buckets (their keys hold its name, or
		// its shared limiter's): two that differ in scope, period, store
		// or limiter are two limits.
		DistinctBy: []string{"scope", "per", "store", "limiter"},
		Doc:        "GCRA rate limit per process, run or tenant, shared through a store or by several layers; waits (respecting cancellation), rejects or blocks",
		New: func() runtime.Middleware {
			return &RateLimit{Per: runtime.Duration(time.Second), Burst: 1, Mode: "wait", Scope: "global"}
		},
	})
}

// RateLimit is the rate_limit middleware; its exported fields are its config
// (schemas/rate_limit.cue).
type RateLimit struct {
	Rate  int64            `json:"rate"`
	Per   runtime.Duration `json:"per"`
	Burst int64            `json:"burst"`
	Mode  string           `json:"mode"`
	Scope string           `json:"scope"`
	// Store names the policy store that holds the limiter's state; empty
	// keeps it in this process.
	Store string `json:"store,omitempty"`
	// Limiter names a bucket shared by every rate_limit layer of the
	// pipeline (any stage) that gives the same name; empty gives the layer
	// its own.
	Limiter string `json:"limiter,omitempty"`

	name     string
	prefix   string
	interval time.Duration // time to gain one token
	limiter  runtime.RateLimiter
	clock    runtime.Clock
	// shared is set when the limiter is in a store other processes may
	// share: a run's bucket there is left to expire, never dropped.
	shared bool
}

// Provision resolves the limiter.
func (r *RateLimit) Provision(b *runtime.BuildContext) error {
	r.name = b.Name()
	r.clock = b.Clock()
	r.prefix = r.keyPrefix(b.Stage, r.name)
	if r.Limiter == "" {
		l, err := b.RateLimiter(r.Store)
		if err != nil {
			return err
		}
		r.limiter = l
		r.shared = !runtime.InProcess(l)
		return nil
	}
	if err := r.checkShared(b.Plan); err != nil {
		return err
	}
	var err error
	v := b.Shared(ID+"/limiter/"+r.Limiter, func() any {
		var l runtime.RateLimiter
		l, err = b.RateLimiter(r.Store)
		return l
	})
	if err != nil {
		return err
	}
	r.limiter = v.(runtime.RateLimiter)
	r.shared = !runtime.InProcess(r.limiter)
	return nil
}

// keyPrefix is the start of the bucket keys of the layer named name in the
// stage's chain: its shared limiter's when it names one.
func (r *RateLimit) keyPrefix(stage plan.Stage, name string) string {
	if r.Limiter != "" {
		return "agentc/rate/limiter/" + r.Limiter + "/" + r.Scope + "/"
	}
	return "agentc/rate/" + string(stage) + "/" + name + "/" + r.Scope + "/"
}

// StateKeys implements runtime.StateKeyer: the bucket of the sample run.
func (r *RateLimit) StateKeys(at runtime.StateSite) []runtime.StateKey {
	r.prefix = r.keyPrefix(at.Stage, at.Name())
	return []runtime.StateKey{{Store: r.Store, Key: r.key(at.Run()), What: "rate-limit buckets",
		Then: "they start full, so callers get a whole burst again at once"}}
}

// shape is what every layer of a shared limiter must agree on.
type shape struct {
	Rate  int64            `json:"rate"`
	Per   runtime.Duration `json:"per"`
	Burst int64            `json:"burst"`
	Scope string           `json:"scope"`
	Store string           `json:"store,omitempty"`
}

// checkShared refuses a shared limiter whose layers disagree on rate, per,
// burst, scope or store: the first layer of the plan (chat, tool, turn,
// outermost first) that names the limiter is the reference.
func (r *RateLimit) checkShared(p *plan.Plan) error {
	mine := shape{r.Rate, r.Per, r.Burst, r.Scope, r.Store}
	for _, st := range []plan.Stage{plan.StageChat, plan.StageTool, plan.StageTurn} {
		for _, l := range p.Chains.Of(st) {
			if l.Use != ID {
				continue
			}
			o := RateLimit{Per: runtime.Duration(time.Second), Burst: 1, Scope: "global"}
			d := json.NewDecoder(bytes.NewReader(l.Config))
			if len(l.Config) == 0 || d.Decode(&o) != nil || o.Limiter != r.Limiter {
				continue
			}
			theirs := shape{o.Rate, o.Per, o.Burst, o.Scope, o.Store}
			if theirs != mine {
				name := l.Name
				if name == "" {
					name = l.Use
				}
				return fmt.Errorf("limiter %q is shared with layer %q of the %s chain (%s), which sets rate %d per %s, burst %d, scope %q, store %q; every layer of a shared limiter must set the same rate, per, burst, scope and store",
					r.Limiter, name, st, l.Pos, o.Rate, o.Per.D(), o.Burst, o.Scope, o.Store)
			}
			return nil
		}
	}
	return nil
}

// Validate checks the config.
func (r *RateLimit) Validate() error {
	switch {
	case r.Rate < 1:
		return fmt.Errorf("rate must be at least 1, got %d", r.Rate)
	case r.Per <= 0:
		return fmt.Errorf("per must be positive")
	case r.Burst < 1:
		return fmt.Errorf("burst must be at least 1, got %d", r.Burst)
	case r.Mode != "wait" && r.Mode != "reject" && r.Mode != "block":
		return fmt.Errorf(`mode must be "wait", "reject" or "block", got %q`, r.Mode)
	case r.Scope != "global" && r.Scope != "run" && r.Scope != "key":
		return fmt.Errorf(`scope must be "global", "run" or "key", got %q`, r.Scope)
	}
	// Rounded up: an interval a fraction of a nanosecond short would let
	// more than rate calls through per per.
	r.interval = r.Per.D() / time.Duration(r.Rate)
	if r.Per.D()%time.Duration(r.Rate) != 0 {
		r.interval++
	}
	r.interval = max(r.interval, 1)
	return nil
}

// key returns the limiter key of a call of run.
func (r *RateLimit) key(run runtime.Run) string {
	switch r.Scope {
	case "run":
		return r.prefix + run.ID
	case "key":
		return r.prefix + run.Tenant
	}
	return r.prefix
}

// EndRun implements runtime.RunEnder: it drops the run's bucket (scope
// "run"). A bucket in a store other processes may share is kept: the run
// may still be running on another replica, and a dropped bucket would give
// it its whole burst again. The store drops it once it has refilled.
func (r *RateLimit) EndRun(runID string) {
	if r.Scope == "run" && !r.shared {
		_ = r.limiter.ForgetRate(context.Background(), r.key(runtime.Run{ID: runID}))
	}
}

// Take admits one call of run, waiting, rejecting or blocking per the mode. In wait
// mode a wait that would outlast the context's deadline is refused at once.
// A store failure fails closed: the call does not run.
func (r *RateLimit) Take(ctx context.Context, run runtime.Run) error {
	maxWait := time.Duration(0)
	if r.Mode == "wait" {
		maxWait = time.Duration(math.MaxInt64)
		if dl, ok := ctx.Deadline(); ok {
			// The time left on the deadline's own clock, the wall clock,
			// not on the layer's, which a host may have set apart from it.
			maxWait = max(time.Until(dl), 0)
		}
	}
	wait, ok, err := r.limiter.Allow(ctx, r.key(run), r.interval, r.Burst, maxWait)
	if err != nil {
		if ctx.Err() != nil {
			return runtime.NotRun(ctx.Err()) // before the call: it did not run
		}
		return runtime.StoreRefusal(r.name, "rate limit store unavailable; the call did not run", err)
	}
	if !ok && r.Mode == "block" {
		return &runtime.BlockedError{Layer: r.name, Message: fmt.Sprintf("rate limit of %d per %s exceeded", r.Rate, r.Per.D())}
	}
	if !ok {
		ce := &runtime.CallError{Kind: runtime.KindRateLimited, Layer: r.name, RetryAfter: wait,
			Message: fmt.Sprintf("rate limit of %d per %s exceeded", r.Rate, r.Per.D())}
		if r.Mode == "wait" {
			ce.Message += "; the wait would outlast the call's deadline"
			ce.Err = context.DeadlineExceeded
		}
		// Refused before the call ran: a retry may try it again, even a
		// side-effecting tool's.
		return runtime.NotRun(ce)
	}
	if wait <= 0 {
		return nil
	}
	// A wait the caller's cancellation ended was before the call: it
	// did not run.
	return runtime.NotRun(r.clock.Sleep(ctx, wait))
}

// WrapChat implements runtime.ChatWrapper.
func (r *RateLimit) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		if err := r.Take(ctx, c.Meta.Run); err != nil {
			return err
		}
		return next(ctx, c, yield)
	}
}

// WrapTool implements runtime.ToolWrapper.
func (r *RateLimit) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if err := r.Take(ctx, c.Meta.Run); err != nil {
			return nil, err
		}
		return next(ctx, c)
	}
}

// WrapTurn implements runtime.TurnWrapper.
func (r *RateLimit) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		if err := r.Take(ctx, c.Meta.Run); err != nil {
			return "", err
		}
		return next(ctx, c)
	}
}

var _ runtime.RunEnder = (*RateLimit)(nil)
