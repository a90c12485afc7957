package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/hedge"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// sideCall is a chat layer that, as a judge does, holds the answer, makes
// a call of its own to the model "side" through the layers inside it
// (runtime.OwnCall), then releases the answer.
type sideCall struct{}

func (sideCall) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		buf, err := runtime.Buffer(ctx, c, next)
		if err != nil {
			return err
		}
		var own strings.Builder
		if err := next(ctx, runtime.OwnCall(c, runtime.ChatRequest{Model: "side", Messages: []runtime.Message{{Role: "user", Content: buf.Text}}}),
			func(d runtime.Delta) bool { own.WriteString(d.Text); return true }); err != nil {
			return err
		}
		if own.String() != "ok" {
			return &runtime.BlockedError{Layer: "test.sidecall", Message: "side said " + own.String()}
		}
		buf.Release(c, yield)
		return nil
	}
}

func init() {
	runtime.Register(runtime.Module{
		ID: "test.sidecall", Stages: []plan.Stage{plan.StageChat}, New: func() runtime.Middleware { return sideCall{} },
	})
}

// reportingModel reports its name and a request id as a provider's client
// does, then answers text with usage.
type reportingModel struct {
	name, text string
	usage      runtime.Usage
	own        chan bool
}

func (m *reportingModel) Stream(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	runtime.ReportServedModel(ctx, m.name)
	runtime.ReportUpstreamRequestID(ctx, "req-"+m.name)
	if m.own != nil {
		m.own <- runtime.IsOwnCall(ctx)
	}
	yield(runtime.Delta{Text: m.text, Usage: m.usage, FinishReason: runtime.FinishStop})
	return nil
}

// A layer's own call (a judge's verdict, a summary) is not the caller's:
// its model's request id and name reached the caller's notes, last, so a
// gateway named the layer's model as the one that answered and returned
// its request id. Its cost is listed apart from the answer's, in
// OwnCharges, and its clones (a hedge inside the layer) keep it own.
func TestOwnCallsDoNotReportAsTheCallers(t *testing.T) {
	for _, chain := range [][]plan.Layer{
		{rt.Layer("test.sidecall", "")},
		{rt.Layer("test.sidecall", ""), rt.Layer("hedge", `{"models":["side","primary"],"delay":"1h"}`)},
	} {
		t.Run(chain[len(chain)-1].Use, func(t *testing.T) {
			own := make(chan bool, 4)
			main := &reportingModel{name: "primary", text: "answer", usage: runtime.Usage{InputTokens: 10, OutputTokens: 5}, own: own}
			side := &reportingModel{name: "side", text: "ok", usage: runtime.Usage{InputTokens: 7, OutputTokens: 1}, own: own}
			if len(chain) > 1 {
				// The hedge is scoped to the side model's calls.
				chain[1].When = &plan.Predicate{Stage: plan.StageChat, Source: "request.model == 'side'"}
			}
			pl := rt.Build(t, rt.Plan(plan.Chains{Chat: chain}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": main, "side": side}})
			n := &rt.Notes{}
			text, resp, err := rt.Collect(runtime.WithUpstreamRequestID(context.Background(), n), pl, runtime.ChatRequest{Model: "primary"}, 0)
			require.NoError(t, err)
			assert.Equal(t, "answer", text)
			assert.Equal(t, []string{"primary"}, n.Served(), "the side call's model is not the one that answered")
			assert.Equal(t, []string{"req-primary"}, n.IDs())
			assert.Equal(t, []bool{false, true}, []bool{<-own, <-own})
			assert.Equal(t, "primary", resp.Model)
			assert.Equal(t, runtime.Usage{InputTokens: 10, OutputTokens: 5}, resp.Usage)
			assert.Nil(t, resp.Charges, "the answer's model call is the only one the answer billed")
			assert.Equal(t, []runtime.Charge{{Model: "side", Usage: runtime.Usage{InputTokens: 7, OutputTokens: 1}}}, resp.OwnCharges)
		})
	}
}

// An agent turn's Usage is what its model calls billed: a layer's own call
// (a judge's verdict) was left out, which a meter charges, so the turn's
// usage disagreed with the meter.
func TestAgentUsageCountsOwnCalls(t *testing.T) {
	main := &reportingModel{name: "primary", text: "done", usage: runtime.Usage{InputTokens: 10, OutputTokens: 5}}
	side := &reportingModel{name: "side", text: "ok", usage: runtime.Usage{InputTokens: 7, OutputTokens: 1}}
	pl := build(t, plan.Chains{Chat: []plan.Layer{rt.Layer("test.sidecall", ""), rt.Layer("meter", "")}},
		map[string]runtime.ModelClient{"primary": main, "side": side})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "go"})
	require.NoError(t, err)
	assert.Equal(t, "done", res.Output)
	assert.Equal(t, runtime.Usage{InputTokens: 17, OutputTokens: 6}, res.Usage, "the answer and the side call were billed")
	got := meterOf(t, pl).Ledger("r")
	assert.Equal(t, int64(res.Usage.InputTokens), got.InputTokens, "the turn's usage agrees with the meter")
	assert.Equal(t, int64(res.Usage.OutputTokens), got.OutputTokens)
}
