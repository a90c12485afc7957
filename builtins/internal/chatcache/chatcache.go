package chatcache

import (
	"context"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
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
// (one fragment each, each with an id of its own drawn from r: see
// FreshCalls) with the finish reason and stop sequence on one delta.
func Replay(c *runtime.ChatCall, e *Entry, r runtime.Random, yield func(runtime.Delta) bool) {
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
		c.Emit(yield, runtime.Delta{ToolCalls: runtime.ToolCallDeltas(FreshCalls(e.ToolCalls, r)), FinishReason: e.FinishReason, StopSequence: e.StopSequence})
	}
}

// Tool calls. A cached answer that calls a tool makes whoever reads it
// (RunAgent, a gateway's client) run the call: the cache decides which
// tool calls run. So a chat cache keeps and replays an answer only when
// each of its calls is one the policy declares read-only (ReadOnlyTools):
// a call to a side-effecting tool, or to one the policy does not declare
// (whose effects are unknown), would run again for a request the model
// did not propose it for: a second payment, or another run's. Replayed
// calls get ids of their own (FreshCalls): the stored ids are those of
// the call that ran when the answer was recorded, and a transcript, a
// checkpoint or a client would take a replayed call for that one.

// ReadOnlyTools returns the tools p declares and does not mark
// side_effecting: the only tools whose calls a chat cache keeps in an
// answer and replays.
func ReadOnlyTools(p *plan.Plan) map[string]bool {
	out := map[string]bool{}
	if p == nil {
		return out
	}
	for name, t := range p.Tools {
		if !t.SideEffecting {
			out[name] = true
		}
	}
	return out
}

// CallsOnly reports whether every tool call of e is a call of a tool of
// readOnly (true for an answer without tool calls).
func (e *Entry) CallsOnly(readOnly map[string]bool) bool {
	for _, tc := range e.ToolCalls {
		if !readOnly[tc.Name] {
			return false
		}
	}
	return true
}

// idChars are the characters of a fresh call id: those every provider
// accepts in one.
const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// FreshCalls returns calls (not modified) each with a new id drawn from r:
// the stored id's prefix up to its first underscore ("call_", "toolu_";
// "call_" when it has none of at most 8 characters), then 24 characters of
// [A-Za-z0-9]. The id is at most 32 characters long, within what a
// provider accepts.
func FreshCalls(calls []runtime.ToolUse, r runtime.Random) []runtime.ToolUse {
	if len(calls) == 0 {
		return calls
	}
	out := make([]runtime.ToolUse, len(calls))
	copy(out, calls)
	for i := range out {
		prefix := "call_"
		if k := strings.IndexByte(out[i].ID, '_'); k > 0 && k < 8 {
			prefix = out[i].ID[:k+1]
		}
		var b strings.Builder
		b.WriteString(prefix)
		for range 24 {
			b.WriteByte(idChars[r.Int64N(int64(len(idChars)))])
		}
		out[i].ID = b.String()
	}
	return out
}
