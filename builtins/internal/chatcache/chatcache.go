package chatcache

import (
	"context"

	"github.com/agentc-dev/agentc/runtime"
)

// Entry is a cached chat response, stored as JSON.
type Entry struct {
	// Deltas are the texts of the deltas, in order (never nil once recorded).
	Deltas []string `json:"deltas"`
	// Usage is what the recorded call cost.
	Usage runtime.Usage `json:"usage"`
	// Served names the model that served the recorded call.
	Served string `json:"served,omitempty"`
	// Annotations are the annotations the call carried.
	Annotations map[string]any `json:"annotations,omitempty"`
}

// Record runs next on c, passing every delta on to yield as it arrives, and
// returns the response as an Entry to store. The entry's usage is what the
// call added to c.Usage. Record returns a nil entry when next failed (with its
// error) or the consumer stopped the stream: a partial response is never
// cached.
func Record(ctx context.Context, c *runtime.ChatCall, next runtime.ChatHandler, yield func(runtime.Delta) bool) (*Entry, error) {
	var deltas []string
	u0 := c.Usage
	err := next(ctx, c, func(d runtime.Delta) bool {
		deltas = append(deltas, d.Text)
		return yield(d)
	})
	if err != nil || c.Stopped {
		return nil, err
	}
	if deltas == nil {
		deltas = []string{}
	}
	return &Entry{Deltas: deltas, Served: c.Served, Annotations: c.Annotations,
		Usage: runtime.Usage{InputTokens: c.Usage.InputTokens - u0.InputTokens, OutputTokens: c.Usage.OutputTokens - u0.OutputTokens}}, nil
}

// Replay serves c from e: it marks the call cached, sets the served model,
// adds the entry's usage and annotations to c, and pushes the deltas to yield
// with c.Emit until the consumer stops.
func Replay(c *runtime.ChatCall, e *Entry, yield func(runtime.Delta) bool) {
	c.Meta.Cached = true
	c.Served = e.Served
	c.Usage.InputTokens += e.Usage.InputTokens
	c.Usage.OutputTokens += e.Usage.OutputTokens
	for k, v := range e.Annotations {
		c.Annotate(k, v)
	}
	for _, d := range e.Deltas {
		if !c.Emit(yield, runtime.Delta{Text: d}) {
			return
		}
	}
}
