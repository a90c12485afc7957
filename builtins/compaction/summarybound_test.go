package compaction_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/compaction"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// summarizing builds a summarizing compaction of config whose summary model
// is small, declared with context_tokens window (0: none).
func summarizing(t *testing.T, config string, window int, small runtime.ModelClient) (*runtime.Pipeline, *rt.Model) {
	t.Helper()
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("compaction", config)}})
	p.Models["small"] = plan.Model{ContextTokens: window}
	primary := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	return rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "small": small}}), primary
}

// sentSummary returns the summary the model was sent, "" when none.
func sentSummary(msgs []runtime.Message) string {
	for _, m := range msgs {
		if m.Name == compaction.SummaryName {
			return m.Content
		}
	}
	return ""
}

// The summary model is sent what its declared context window holds: the
// earliest of the messages dropped, up to the window, with room left for
// the summary it writes; it is asked for at most what the budget holds.
func TestTheSummaryRequestFitsTheSummaryModel(t *testing.T) {
	small := rt.NewModel(rt.Response{Deltas: []string{"The user asked about refunds."}})
	pl, primary := summarizing(t, `{"strategy":"summarize","model":"small","max_tokens":1000,"keep_recent":3}`, 2000, small)
	msgs := transcript(200)
	require.Greater(t, runtime.EstimateMessages(msgs), int64(20000))
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Equal(t, 1, small.Calls())
	req := small.Requests()[0]
	assert.LessOrEqual(t, runtime.EstimateMessages(req.Messages)+int64(req.MaxTokens), int64(2000), "input and output fit the window")
	assert.Contains(t, req.Messages[1].Content, "message 0 ", "the earliest dropped messages are summarized")
	assert.Positive(t, req.MaxTokens)
	assert.LessOrEqual(t, req.MaxTokens, 1000, "the summary is asked for within the budget")
	assert.Contains(t, sentSummary(primary.Requests()[0].Messages), "refunds")
}

// counting streams text without end, counting the deltas it was let yield.
type counting struct{ deltas atomic.Int64 }

func (c *counting) Stream(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	for ctx.Err() == nil {
		c.deltas.Add(1)
		if !yield(runtime.Delta{Text: strings.Repeat("and so on ", 100)}) {
			return nil
		}
	}
	return ctx.Err()
}

// A summary model that runs on is stopped once its summary is past what the
// budget could hold, rather than read (and paid for) to its end, and the
// layer falls back to keep_recent.
func TestASummaryThatRunsOnIsCutOff(t *testing.T) {
	small := &counting{}
	pl, primary := summarizing(t, `{"strategy":"summarize","model":"small","max_tokens":1000,"keep_recent":3}`, 0, small)
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(40)})
	require.NoError(t, err)
	assert.LessOrEqual(t, small.deltas.Load(), int64(10), "about 1000 tokens of summary are read, no more")
	require.Equal(t, 1, primary.Calls())
	assert.Empty(t, sentSummary(primary.Requests()[0].Messages), "keep_recent: no summary")
	assert.LessOrEqual(t, runtime.EstimateMessages(primary.Requests()[0].Messages), int64(1000))
}

// A summary model that does not answer within summary_timeout is given up
// on: the layer falls back to keep_recent.
func TestASummaryThatHangsTimesOut(t *testing.T) {
	small := rt.NewModel(rt.Response{Hang: true})
	pl, primary := summarizing(t, `{"strategy":"summarize","model":"small","max_tokens":1000,"keep_recent":3,"summary_timeout":"20ms"}`, 0, small)
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(40)})
	require.NoError(t, err)
	assert.Equal(t, 1, small.Cancelled(), "the summary call was given up on")
	require.Equal(t, 1, primary.Calls())
	assert.Empty(t, sentSummary(primary.Requests()[0].Messages))
}
