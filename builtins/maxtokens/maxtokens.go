package maxtokens

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "max_tokens"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat},
		Traits:  []runtime.Trait{runtime.TraitGuards, runtime.TraitShortCircuits},
		Doc:     "refuses input over a token budget before the model runs",
		New:     func() runtime.Middleware { return &MaxTokens{} },
	})
}

// MaxTokens is the max_tokens middleware; its fields are its config
// (schemas/max_tokens.cue).
type MaxTokens struct {
	// Limit is the most estimated input tokens a call may send.
	Limit int64 `json:"limit"`

	name string
}

// Provision records the layer name.
func (m *MaxTokens) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	return nil
}

// Validate requires a positive limit.
func (m *MaxTokens) Validate() error {
	if m.Limit < 1 {
		return errors.New("limit must be at least 1")
	}
	return nil
}

// WrapChat implements runtime.ChatWrapper.
func (m *MaxTokens) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		if n := runtime.EstimateRequest(&c.Request); n > m.Limit {
			return &runtime.BlockedError{Layer: m.name,
				Message: fmt.Sprintf("input of about %d tokens is over the limit of %d", n, m.Limit)}
		}
		return next(ctx, c, yield)
	}
}
