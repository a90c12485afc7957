package retry_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// fixable is a transient failure that tells the model what to fix.
type fixable struct{ hint string }

func (e *fixable) Error() string         { return "fixable: " + e.hint }
func (e *fixable) RetryFeedback() string { return e.hint }

// transcriptModel fails with errs in order (nil: answer "ok") and records
// the transcript of every attempt.
type transcriptModel struct {
	mu   sync.Mutex
	errs []error
	seen [][]runtime.Message
}

func (m *transcriptModel) Stream(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	m.mu.Lock()
	n := len(m.seen)
	m.seen = append(m.seen, append([]runtime.Message(nil), req.Messages...))
	m.mu.Unlock()
	if n < len(m.errs) && m.errs[n] != nil {
		return m.errs[n]
	}
	yield(runtime.Delta{Text: "ok"})
	return nil
}

func TestRetryFeedbackIsAppendedToTheNextAttempt(t *testing.T) {
	model := &transcriptModel{errs: []error{&fixable{"use JSON"}, rt.Transient("503"), &fixable{"add citations"}}}
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("retry", `{"max_attempts":4,"initial_delay":"1ms","max_delay":"1ms"}`)}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	msgs := []runtime.Message{{Role: "user", Content: "q"}}
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.Equal(t, 4, resp.Attempts)
	require.Len(t, model.seen, 4)
	fb := func(s string) runtime.Message { return runtime.Message{Role: "user", Content: s} }
	assert.Equal(t, msgs, model.seen[0])
	assert.Equal(t, append(msgs[:1:1], fb("use JSON")), model.seen[1])
	assert.Equal(t, msgs, model.seen[2], "a failure without feedback re-sends the original transcript")
	assert.Equal(t, append(msgs[:1:1], fb("add citations")), model.seen[3], "only the latest feedback is sent")
	assert.Equal(t, []runtime.Message{{Role: "user", Content: "q"}}, msgs, "the caller's transcript is untouched")
}

func TestFeedbackOf(t *testing.T) {
	_, ok := runtime.FeedbackOf(nil)
	assert.False(t, ok)
	_, ok = runtime.FeedbackOf(&fixable{})
	assert.False(t, ok, "empty feedback counts as none")
	s, ok := runtime.FeedbackOf(&runtime.CallError{Err: &fixable{"x"}})
	assert.True(t, ok)
	assert.Equal(t, "x", s)
}
