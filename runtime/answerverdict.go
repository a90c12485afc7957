package runtime

import (
	"context"
	"sync"
)

// AnswerVerdict carries how a chat call ended to the layers that report it
// (log), when the host decides after the chat chain has returned: agentc
// serve admits the tool calls the model proposed through the tool chain
// once the answer is complete, and answers 403 for one it refuses, though
// every layer of the chat chain saw the call succeed. A layer that reports
// a call which succeeded defers its report (Defer) when the call's context
// carries a verdict (AnswerVerdictOf), and the host settles it (Settle)
// with its refusal, or nil, once it has answered. The zero value is ready
// to use.
type AnswerVerdict struct {
	mu      sync.Mutex
	settled bool
	err     error
	pending []func(error)
}

type answerVerdictKey struct{}

// WithAnswerVerdict returns a context under which the chat chain's layers
// defer their reports of a call that succeeded to v.
func WithAnswerVerdict(ctx context.Context, v *AnswerVerdict) context.Context {
	return context.WithValue(ctx, answerVerdictKey{}, v)
}

// AnswerVerdictOf returns the verdict the context carries, or nil.
func AnswerVerdictOf(ctx context.Context) *AnswerVerdict {
	v, _ := ctx.Value(answerVerdictKey{}).(*AnswerVerdict)
	return v
}

// Defer runs report with the verdict's error once it is settled, at once
// when it is.
func (v *AnswerVerdict) Defer(report func(error)) {
	v.mu.Lock()
	if !v.settled {
		v.pending = append(v.pending, report)
		v.mu.Unlock()
		return
	}
	err := v.err
	v.mu.Unlock()
	report(err)
}

// Settle settles the verdict with err (nil: the answer went out as the
// chain returned it) and runs the reports deferred to it, in order. Only
// the first call counts.
func (v *AnswerVerdict) Settle(err error) {
	v.mu.Lock()
	if v.settled {
		v.mu.Unlock()
		return
	}
	v.settled, v.err = true, err
	pending := v.pending
	v.pending = nil
	v.mu.Unlock()
	for _, report := range pending {
		report(err)
	}
}
