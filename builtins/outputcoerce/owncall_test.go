package outputcoerce_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/compaction"
	_ "github.com/agentc-dev/agentc/builtins/judge"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// A judge's verdict and a summary are calls their layer makes of its own,
// through the layers inside it: an output_coerce there asked the judge's
// model for the answer's schema and failed its verdict ("allow") against
// it, so the judge blocked every answer, and the summary failed the same
// way (compaction fell back to dropping the messages unsummarized). Their
// output is the layer's, in the form the layer asks for: output_coerce
// passes them as they are and coerces the answer alone.
func TestOwnCallsPassOutputCoerce(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("judge", `{"model":"judge"}`),
		rt.Layer("compaction", `{"strategy":"summarize","model":"small","max_tokens":300,"keep_recent":2}`),
		rt.Layer("retry", `{"max_attempts":2,"initial_delay":"1ms","max_delay":"1ms"}`),
		rt.Layer("output_coerce", `{"schema":`+answerSchema+`,"set_response_format":true}`),
	}})
	primary := rt.NewModel(rt.Response{Deltas: []string{`{"answer":"42","citations":[]}`}})
	judge := rt.NewModel(rt.Response{Deltas: []string{"allow"}})
	small := rt.NewModel(rt.Response{Deltas: []string{"the user asked about refunds"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "judge": judge, "small": small}})

	var msgs []runtime.Message
	for i := range 8 {
		msgs = append(msgs, runtime.Message{Role: "user", Content: strings.Repeat("refund order ", 40) + string(rune('a'+i))},
			runtime.Message{Role: "assistant", Content: strings.Repeat("looked it up ", 40)})
	}
	msgs = append(msgs, runtime.Message{Role: "user", Content: "and now?"})
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	assert.JSONEq(t, `{"answer":"42","citations":[]}`, resp.Text)

	require.Equal(t, 1, judge.Calls())
	assert.Nil(t, judge.Requests()[0].ResponseFormat, "the judge is not asked for the answer's schema")
	require.Equal(t, 1, small.Calls())
	assert.Nil(t, small.Requests()[0].ResponseFormat, "nor is the summary model")
	require.Equal(t, 1, primary.Calls())
	require.NotNil(t, primary.Requests()[0].ResponseFormat, "the answer is")
	var summarized bool
	for _, m := range primary.Requests()[0].Messages {
		summarized = summarized || m.Content == compaction.SummaryPrefix+"the user asked about refunds"
	}
	assert.True(t, summarized, "the summary replaced the messages dropped")
}
