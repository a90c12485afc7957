package compaction_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/compaction"
	_ "github.com/agentc-dev/agentc/builtins/maxtokens"
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

// waiting signals started once a call reaches it, then waits for the
// call's context to end.
type waiting struct{ started chan struct{} }

func (w *waiting) Stream(ctx context.Context, _ *runtime.ChatRequest, _ func(runtime.Delta) bool) error {
	close(w.started)
	<-ctx.Done()
	return ctx.Err()
}

// A client that hangs up while the summary is written ends the call: the
// summary is abandoned, which is logged as such (at debug), not as a
// summary that failed, and nothing is sent on.
func TestACallThatEndsDuringTheSummaryIsNoSummaryFailure(t *testing.T) {
	var logs bytes.Buffer
	small := &waiting{started: make(chan struct{})}
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("compaction", `{"strategy":"summarize","model":"small","max_tokens":1000,"keep_recent":3}`)}})
	primary := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "small": small},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := pl.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: transcript(40)})
		done <- err
	}()
	<-small.started
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, primary.Calls(), "nothing is sent for a caller that has gone")
	assert.NotContains(t, logs.String(), "level=WARN")
	assert.Contains(t, logs.String(), `level=DEBUG msg="summary abandoned: the call ended"`)
}

// A max_tokens layer inside the compaction (without a when) reads the summary
// call too: the summary model is sent what its limit lets through, rather
// than a request it refuses every time.
func TestTheSummaryRequestFitsAMaxTokensLayerInside(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("compaction", `{"strategy":"summarize","model":"small","max_tokens":1000,"keep_recent":3}`),
		rt.Layer("max_tokens", `{"limit":1500}`),
	}})
	small := rt.NewModel(rt.Response{Deltas: []string{"The user asked about refunds."}})
	primary := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "small": small}})
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(200)})
	require.NoError(t, err)
	require.Equal(t, 1, small.Calls())
	req := small.Requests()[0]
	assert.LessOrEqual(t, runtime.EstimateRequest(&req), int64(1500))
	require.Equal(t, 1, primary.Calls())
	assert.Contains(t, sentSummary(primary.Requests()[0].Messages), "refunds", "the summary was written and sent")
}

// A summary streamed a word a delta, as providers stream, is counted as the
// text it makes, not as the sum of its deltas (each of which the estimate
// rounds up and counts as a word's start): a summary within what was asked
// for is kept, not refused as one that ran past it.
func TestASummaryStreamedWordByWordIsCountedWhole(t *testing.T) {
	var words []string
	for range 12 {
		words = append(words, " the", " user", " asked", " about", " refunds")
	}
	text := strings.Join(words, "")
	var sum int64
	for _, w := range words {
		sum += runtime.EstimateTokens(w)
	}
	small := rt.NewModel(rt.Response{Deltas: words})
	// context_tokens 200: the summary is asked for at most 100 tokens.
	pl, primary := summarizing(t, `{"strategy":"summarize","model":"small","max_tokens":1000,"keep_recent":3}`, 200, small)
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(40)})
	require.NoError(t, err)
	require.Equal(t, 1, small.Calls())
	limit := int64(small.Requests()[0].MaxTokens)
	require.LessOrEqual(t, runtime.EstimateTokens(text), limit, "the summary is within what was asked for")
	require.Greater(t, sum, limit, "its deltas, each counted on its own, are not")
	assert.Contains(t, sentSummary(primary.Requests()[0].Messages), strings.TrimSpace(text))
}

// windowLogged builds a summarizing compaction (max_tokens 1000) whose
// summary model, small, declares context_tokens 2000, logging to logs from
// level on.
func windowLogged(t *testing.T, logs *bytes.Buffer, level slog.Level) (*runtime.Pipeline, *rt.Model) {
	t.Helper()
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("compaction", `{"strategy":"summarize","model":"small","max_tokens":1000,"keep_recent":3}`)}})
	p.Models["small"] = plan.Model{ContextTokens: 2000}
	small := rt.NewModel(rt.Response{Deltas: []string{"The user asked about refunds."}})
	primary := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	return rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "small": small},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level}))}), small
}

// The dropped messages the summary model's window leaves out of the summary
// are dropped without being summarized: the layer says so, at warning level,
// with how many and why, rather than lose them without a word.
func TestMessagesLeftOutOfTheSummaryAreLogged(t *testing.T) {
	var logs bytes.Buffer
	pl, small := windowLogged(t, &logs, slog.LevelInfo)
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(200)})
	require.NoError(t, err)
	require.Equal(t, 1, small.Calls())
	assert.Contains(t, logs.String(), `level=WARN msg="dropped messages left out of the summary"`)
	assert.Regexp(t, `left_out=[1-9][0-9]* of=[1-9][0-9]* context_tokens=2000`, logs.String())

	// A window that holds them all leaves none out, and says nothing.
	logs.Reset()
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(12)})
	require.NoError(t, err)
	require.Equal(t, 2, small.Calls())
	assert.NotContains(t, logs.String(), "left out")
}

// A summary model that declares no context_tokens, with no max_tokens layer
// inside the compaction, is still not sent the whole dropped prefix (a
// transcript of megabytes): it reads at most DefaultSummaryInput tokens of
// it, the earliest messages first, as a window would bound it.
func TestTheSummaryRequestIsBoundedWithoutAWindow(t *testing.T) {
	small := rt.NewModel(rt.Response{Deltas: []string{"The user asked about refunds."}})
	pl, primary := summarizing(t, `{"strategy":"summarize","model":"small","max_tokens":1000,"keep_recent":3}`, 0, small)
	msgs := transcript(600)
	require.Greater(t, runtime.EstimateMessages(msgs), int64(2*compaction.DefaultSummaryInput))
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Equal(t, 1, small.Calls())
	text := small.Requests()[0].Messages[1].Content
	assert.LessOrEqual(t, runtime.EstimateTokens(text), int64(compaction.DefaultSummaryInput), "the summary model reads at most DefaultSummaryInput")
	assert.Greater(t, runtime.EstimateTokens(text), int64(compaction.DefaultSummaryInput*9/10), "and about that much")
	assert.Contains(t, text, "message 0 ", "the earliest dropped messages are summarized")
	assert.Contains(t, sentSummary(primary.Requests()[0].Messages), "refunds")

	// One message of 4 MB is cut to the bound.
	huge := []runtime.Message{{Role: "system", Content: "you are helpful"}, {Role: "user", Content: strings.Repeat("word ", 800_000)}}
	huge = append(huge, transcript(2)[1:]...)
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: huge})
	require.NoError(t, err)
	require.Equal(t, 2, small.Calls())
	assert.LessOrEqual(t, runtime.EstimateTokens(small.Requests()[1].Messages[1].Content), int64(compaction.DefaultSummaryInput))
}

// Under agentc serve every long request leaves messages out of its summary:
// the layer warns once a minute, not on each, saying how many calls it did
// not warn about since, logs the others at debug level, and counts them all.
func TestMessagesLeftOutOfTheSummaryAreWarnedOnceAMinute(t *testing.T) {
	var logs bytes.Buffer
	pl, _ := windowLogged(t, &logs, slog.LevelDebug)
	m := pl.Layers(plan.StageChat)[0].Middleware.(*compaction.Middleware)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	compaction.SetClock(m, func() time.Time { return now })
	call := func() {
		t.Helper()
		_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(200)})
		require.NoError(t, err)
	}
	warned := func() int {
		return strings.Count(logs.String(), `level=WARN msg="dropped messages left out of the summary"`)
	}

	for range 3 {
		call()
		now = now.Add(10 * time.Second)
	}
	assert.Equal(t, 1, warned(), "one warning for three calls within a minute")
	assert.Equal(t, 2, strings.Count(logs.String(), `level=DEBUG msg="dropped messages left out of the summary"`))
	got := m.LeftOut()
	assert.Equal(t, int64(3), got.Calls)
	assert.Greater(t, got.Messages, int64(3*100), "each call left out most of some 450 dropped messages")

	now = now.Add(time.Minute)
	call()
	assert.Equal(t, 2, warned(), "a minute on, it warns again")
	assert.Contains(t, logs.String(), "not_warned=2", "naming the calls it did not warn about")
	assert.Equal(t, int64(4), m.LeftOut().Calls)
}
