package chatcache

import (
	"context"

	"github.com/agentc-dev/agentc/runtime"
)

// Entry is a cached chat response, stored as JSON.
type Entry struct {
	// Deltas are the texts of the deltas, in order (never nil once recorded).
	Deltas []string `json:"deltas"`
	// ToolCalls are the tool calls the response requested, assembled.
	ToolCalls []runtime.ToolUse `json:"tool_calls,omitempty"`
	// FinishReason is the response's finish reason.
	FinishReason string `json:"finish_reason,omitempty"`
	// StopSequence is the stop sequence the model stopped at, when its
	// provider reported it.
	StopSequence string `json:"stop_sequence,omitempty"`
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
// cached. Only a finished answer is: one that ended with stop, tool_calls
// or length, or without a finish reason (see finished). Not a paused turn
// (pause_turn), which the model has not finished; nor a response the
// provider's filter cut (content_filter) or a refusal (text marked
// Delta.Refusal, whatever its finish reason): it is a refusal, not the
// model's answer, and replaying it would refuse the request for the whole
// ttl without asking the model again (and, the entry keeping plain text,
// as an answer). Nor is a response with thinking blocks (extended
// thinking): the entry keeps no thinking, and a replay without it would
// leave a client continuing a tool-use turn nothing to send back, which
// the API refuses while thinking is on.
func Record(ctx context.Context, c *runtime.ChatCall, next runtime.ChatHandler, yield func(runtime.Delta) bool) (*Entry, error) {
	var deltas []string
	var calls runtime.ToolCallBuilder
	finish, stop := "", ""
	thinking, refused := false, false
	u0 := c.Usage
	err := next(ctx, c, func(d runtime.Delta) bool {
		if d.Thinking != nil {
			thinking = true
			return yield(d)
		}
		if d.Text != "" || len(d.ToolCalls) == 0 {
			deltas = append(deltas, d.Text)
		}
		refused = refused || d.Refusal && d.Text != ""
		calls.Add(&d)
		if d.FinishReason != "" {
			finish = d.FinishReason
		}
		if d.StopSequence != "" {
			stop = d.StopSequence
		}
		return yield(d)
	})
	if err != nil || c.Stopped || !finished(finish) || refused || thinking {
		return nil, err
	}
	if deltas == nil {
		deltas = []string{}
	}
	return &Entry{Deltas: deltas, ToolCalls: calls.ToolCalls(), FinishReason: finish, StopSequence: stop, Served: c.Served,
		Annotations: c.Annotations, Usage: c.Usage.Sub(u0)}, nil
}

// finished reports whether a response that ended with finish reason r is
// a finished answer a cache may keep: stop, tool_calls, length (cut at
// max_tokens: the key holds the bound, so the same request is cut the
// same way, and the replay says it was cut), or none reported. Any other
// (content_filter, pause_turn, a reason the runtime has no word for) is
// not.
func finished(r string) bool {
	switch r {
	case "", runtime.FinishStop, runtime.FinishToolCalls, runtime.FinishLength:
		return true
	}
	return false
}

// Replay serves c from e: it marks the call cached, sets the served model
// and the stop sequence, adds the entry's usage and annotations to c, and
// pushes the deltas to yield with c.Emit until the consumer stops: the text deltas, then the tool calls
// (one fragment each) with the finish reason and stop sequence on one delta.
func Replay(c *runtime.ChatCall, e *Entry, yield func(runtime.Delta) bool) {
	c.Meta.Cached = true
	c.Served = e.Served
	c.StopSequence = e.StopSequence // (Emit records the finish reason alone)
	c.Usage.Add(e.Usage)
	for k, v := range e.Annotations {
		c.Annotate(k, v)
	}
	for i, d := range e.Deltas {
		delta := runtime.Delta{Text: d}
		if i == len(e.Deltas)-1 && len(e.ToolCalls) == 0 {
			delta.FinishReason, delta.StopSequence = e.FinishReason, e.StopSequence
		}
		if !c.Emit(yield, delta) {
			return
		}
	}
	if len(e.ToolCalls) > 0 || len(e.Deltas) == 0 && e.FinishReason != "" {
		c.Emit(yield, runtime.Delta{ToolCalls: runtime.ToolCallDeltas(e.ToolCalls), FinishReason: e.FinishReason, StopSequence: e.StopSequence})
	}
}
