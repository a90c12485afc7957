package compaction_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// deadlines answers every call with summary, recording the deadline of
// each call's context.
type deadlines struct {
	summary string
	mu      sync.Mutex
	seen    []time.Time
}

func (d *deadlines) Stream(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Time{}
	}
	d.mu.Lock()
	d.seen = append(d.seen, dl)
	d.mu.Unlock()
	yield(runtime.Delta{Text: d.summary})
	return nil
}

// A summary that does not fit has the summary model called again with more
// messages dropped: summary_timeout bounds the whole summarizing of the
// call, one deadline across those calls, not each call on its own, so the
// call waits for its summaries no longer than summary_timeout in all.
func TestSummaryTimeoutBoundsEverySummaryCallOfACall(t *testing.T) {
	small := &deadlines{summary: strings.Repeat("the user asked about refunds ", 60)}
	pl, primary := summarizing(t, `{"strategy":"summarize","model":"small","max_tokens":1000,"keep_recent":3,"summary_timeout":"1h"}`, 0, small)
	start := time.Now()
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(40)})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(small.seen), 2, "the first summary did not fit: the model was called again")
	for i, dl := range small.seen {
		require.False(t, dl.IsZero(), "call %d has a deadline", i)
		assert.Equal(t, small.seen[0], dl, "call %d has the deadline of the first", i)
	}
	assert.WithinDuration(t, start.Add(time.Hour), small.seen[0], time.Minute)
	assert.Contains(t, sentSummary(primary.Requests()[0].Messages), "refunds")
}
