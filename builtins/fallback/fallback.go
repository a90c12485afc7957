package fallback

import (
	"context"
	"errors"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "fallback"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat},
		Traits:  []runtime.Trait{runtime.TraitReinvokes},
		Doc:     "falls over to the next model on a pre-stream transient failure or an open breaker",
		New:     func() runtime.Middleware { return &Fallback{} },
	})
}

// Fallback is the fallback middleware; its fields are its config
// (schemas/fallback.cue).
type Fallback struct {
	// Models are tried in order.
	Models []string `json:"models"`
}

// Validate requires at least one model.
func (f *Fallback) Validate() error {
	if len(f.Models) == 0 {
		return errors.New("models must name at least one model")
	}
	return nil
}

// WrapChat implements runtime.ChatWrapper.
func (f *Fallback) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	models := f.Models
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		start, before := c.Deltas, c.Usage
		var err, outage error
		for i, m := range models {
			if i > 0 {
				// The model tried before served nothing: what it billed
				// is not the response's usage.
				c.DiscardAttempt(before)
			}
			c.Request.Model = m
			err = next(ctx, c, yield)
			if err == nil || c.Deltas > start || c.Stopped || ctx.Err() != nil {
				return err
			}
			if !FallsOver(err) {
				return err
			}
			if !errors.Is(err, runtime.ErrProviderRefused) {
				outage = err
			}
		}
		if outage != nil {
			return outage
		}
		return err
	}
}

// FallsOver reports whether a pre-stream failure moves on to the next model:
// a transient failure, an open breaker, or the provider's refusal to serve
// the call (runtime.ErrProviderRefused: its key, its account's credit or
// permissions, a model it does not know), which another provider may not
// share.
func FallsOver(err error) bool {
	if runtime.IsTransient(err) {
		return true
	}
	if errors.Is(err, runtime.ErrProviderRefused) && runtime.Classify(err) == runtime.ClassFailure {
		return true
	}
	var bo *runtime.BreakerOpenError
	return errors.As(err, &bo)
}
