package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "rate_limit"

func init() {
	runtime.Register(runtime.Module{
		ID:     ID,
		Stages: []plan.Stage{plan.StageChat, plan.StageTool, plan.StageTurn},
		Traits: []runtime.Trait{runtime.TraitShortCircuits},
		Doc:    "token bucket; waits (respecting cancellation) or rejects",
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

	name   string
	perTok time.Duration // time to gain one token
	now    func() time.Time
	clock  runtime.Clock
	global *bucket
	mu     sync.Mutex
	runs   map[string]*bucket
}

type bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// Provision sets up the buckets.
func (r *RateLimit) Provision(b *runtime.BuildContext) error {
	r.name = b.Name()
	r.clock = b.Clock()
	if r.now == nil {
		r.now = r.clock.Now
	}
	r.runs = map[string]*bucket{}
	r.global = r.newBucket()
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
	case r.Mode != "wait" && r.Mode != "reject":
		return fmt.Errorf(`mode must be "wait" or "reject", got %q`, r.Mode)
	case r.Scope != "global" && r.Scope != "run":
		return fmt.Errorf(`scope must be "global" or "run", got %q`, r.Scope)
	}
	r.perTok = r.Per.D() / time.Duration(r.Rate)
	if r.perTok <= 0 {
		r.perTok = 1
	}
	return nil
}

func (r *RateLimit) newBucket() *bucket {
	return &bucket{tokens: float64(r.Burst), last: r.now()}
}

func (r *RateLimit) bucketFor(run string) *bucket {
	if r.Scope != "run" {
		return r.global
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.runs[run]
	if b == nil {
		b = r.newBucket()
		r.runs[run] = b
	}
	return b
}

// EndRun implements runtime.RunEnder: it drops the run's bucket (scope
// "run").
func (r *RateLimit) EndRun(runID string) {
	r.mu.Lock()
	delete(r.runs, runID)
	r.mu.Unlock()
}

// Take takes one token for a call of run, waiting or refusing per the mode.
func (r *RateLimit) Take(ctx context.Context, run string) error {
	b := r.bucketFor(run)
	b.mu.Lock()
	now := r.now()
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(float64(r.Burst), b.tokens+float64(el)/float64(r.perTok))
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		b.mu.Unlock()
		return nil
	}
	wait := time.Duration((1 - b.tokens) * float64(r.perTok))
	if r.Mode == "reject" {
		b.mu.Unlock()
		return &runtime.CallError{Kind: runtime.KindRateLimited, Layer: r.name, RetryAfter: wait,
			Message: fmt.Sprintf("rate limit of %d per %s exceeded", r.Rate, r.Per.D())}
	}
	b.tokens-- // reserve the next token
	b.mu.Unlock()
	if err := r.clock.Sleep(ctx, wait); err != nil {
		b.mu.Lock()
		b.tokens++
		b.mu.Unlock()
		return err
	}
	return nil
}

// WrapChat implements runtime.ChatWrapper.
func (r *RateLimit) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		if err := r.Take(ctx, c.Meta.Run.ID); err != nil {
			return err
		}
		return next(ctx, c, yield)
	}
}

// WrapTool implements runtime.ToolWrapper.
func (r *RateLimit) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if err := r.Take(ctx, c.Meta.Run.ID); err != nil {
			return nil, err
		}
		return next(ctx, c)
	}
}

// WrapTurn implements runtime.TurnWrapper.
func (r *RateLimit) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		if err := r.Take(ctx, c.Meta.Run.ID); err != nil {
			return "", err
		}
		return next(ctx, c)
	}
}

var _ runtime.RunEnder = (*RateLimit)(nil)
