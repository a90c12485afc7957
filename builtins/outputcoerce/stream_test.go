package outputcoerce_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/outputcoerce"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func partialPlan(mode string, withRetry bool) *plan.Plan {
	var layers []plan.Layer
	if withRetry {
		layers = append(layers, rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`))
	}
	layers = append(layers, rt.Named("shape", rt.Layer("output_coerce", `{"mode":"`+mode+`","partial":true,"schema":`+answerSchema+`}`)))
	return rt.Plan(plan.Chains{Chat: layers})
}

// chunked is a model that streams text in chunks and records, before each
// chunk, how many chunks the caller had already received, and whether the
// stream was stopped.
type chunked struct {
	texts    [][]string
	calls    int
	received *int
	seenAt   []int
	stopped  bool
}

func (m *chunked) Stream(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	chunks := m.texts[min(m.calls, len(m.texts)-1)]
	m.calls++
	for _, c := range chunks {
		m.seenAt = append(m.seenAt, *m.received)
		if !yield(runtime.Delta{Text: c}) {
			m.stopped = true
			return nil
		}
	}
	return nil
}

func streamThrough(t *testing.T, pl *runtime.Pipeline, received *int) (string, runtime.ChatResponse, error) {
	t.Helper()
	var text string
	resp, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary", Messages: userMsg}, func(d runtime.Delta) bool {
		text += d.Text
		*received++
		return true
	})
	return text, resp, err
}

func TestPartialForwardsDeltasAsTheyArrive(t *testing.T) {
	received := 0
	m := &chunked{received: &received, texts: [][]string{{`{"answer":`, `"42","cita`, `tions":["kb/1"]}`}}}
	pl := build(t, partialPlan("enforce", false), m)
	text, resp, err := streamThrough(t, pl, &received)
	require.NoError(t, err)
	assert.Equal(t, `{"answer":"42","citations":["kb/1"]}`, text)
	assert.Equal(t, []int{0, 1, 2}, m.seenAt, "each chunk reached the caller before the next was produced")
	assert.Equal(t, 3, resp.Deltas)
}

func TestPartialFailsAtTheFirstInvalidPrefix(t *testing.T) {
	received := 0
	m := &chunked{received: &received, texts: [][]string{{`{"answer":`, `42,`, `"citations":[]}`}}}
	pl := build(t, partialPlan("enforce", false), m)
	text, resp, err := streamThrough(t, pl, &received)
	var ce *outputcoerce.CoercionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, []outputcoerce.Diagnostic{{Path: "/answer", Message: "expected string, but got number"}}, ce.Diagnostics)
	assert.Equal(t, `{"answer":42,`, ce.Output, "the output up to the refused delta")
	assert.Equal(t, `{"answer":`, text, "the refused delta is not delivered")
	assert.True(t, m.stopped, "the model's stream is stopped at the refused delta")
	assert.Equal(t, 1, resp.Deltas)
}

func TestPartialFailsAtTheEndOnAMissingField(t *testing.T) {
	received := 0
	m := &chunked{received: &received, texts: [][]string{{`{"answer":"x"`, `}`}}}
	pl := build(t, partialPlan("enforce", false), m)
	text, _, err := streamThrough(t, pl, &received)
	var ce *outputcoerce.CoercionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, []outputcoerce.Diagnostic{{Path: "", Message: "missing properties: 'citations'"}}, ce.Diagnostics)
	assert.Equal(t, `{"answer":"x"`, text)
}

func TestPartialRetryReasksWhenNothingWasDelivered(t *testing.T) {
	received := 0
	m := &chunked{received: &received, texts: [][]string{{`["no"]`}, {`{"answer":"y",`, `"citations":[]}`}}}
	pl := build(t, partialPlan("enforce", true), m)
	text, resp, err := streamThrough(t, pl, &received)
	require.NoError(t, err)
	assert.Equal(t, `{"answer":"y","citations":[]}`, text)
	assert.Equal(t, 2, resp.Attempts, "the first delta was refused before reaching the caller: a retry may re-ask")
}

func TestPartialRetryDoesNotReaskAfterOutput(t *testing.T) {
	received := 0
	m := &chunked{received: &received, texts: [][]string{{`{"answer":"y",`, `"citations":[1]}`}, {`{"answer":"y","citations":[]}`}}}
	pl := build(t, partialPlan("enforce", true), m)
	_, resp, err := streamThrough(t, pl, &received)
	var ce *outputcoerce.CoercionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, resp.Attempts, "output reached the caller: no re-ask")
	assert.Equal(t, 1, m.calls)
}

func TestPartialAnnotateStreamsEverything(t *testing.T) {
	received := 0
	m := &chunked{received: &received, texts: [][]string{{`{"answer":`, `42}`}}}
	pl := build(t, partialPlan("annotate", false), m)
	text, resp, err := streamThrough(t, pl, &received)
	require.NoError(t, err)
	assert.Equal(t, `{"answer":42}`, text)
	a, ok := outputcoerce.AnnotationOf(resp, "shape")
	require.True(t, ok)
	assert.False(t, a.Valid)
	assert.Equal(t, []outputcoerce.Diagnostic{{Path: "/answer", Message: "expected string, but got number"}}, a.Diagnostics)
}

func TestPartialToolCallsStreamUnchecked(t *testing.T) {
	m := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "lookup", Arguments: `{}`}}})
		return nil
	})
	pl := build(t, partialPlan("enforce", false), m)
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: userMsg})
	require.NoError(t, err)
	assert.Len(t, resp.ToolCalls, 1)
}

func TestPartialIsChatOnly(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("output_coerce", `{"partial":true}`)}})
	_, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "partial applies to the chat stage only")
}

func BenchmarkPartialSmallObject(b *testing.B) {
	out := `{"answer":"the refund was issued","citations":["kb/12","kb/40"],"score":0.9}`
	m := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		for i := 0; i < len(out); i += 8 {
			if !yield(runtime.Delta{Text: out[i:min(i+8, len(out))]}) {
				return nil
			}
		}
		return nil
	})
	pl := build(b, partialPlan("enforce", false), m)
	ctx := context.Background()
	req := runtime.ChatRequest{Model: "primary", Messages: userMsg}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pl.Stream(ctx, req, func(runtime.Delta) bool { return true }); err != nil {
			b.Fatal(err)
		}
	}
}

// refuser is a model that declines: its text comes in deltas marked
// Refusal, as the OpenAI client delivers a refusal, and ends with
// content_filter.
type refuser struct {
	chunks []string
	calls  int
}

func (m *refuser) Stream(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	m.calls++
	for _, c := range m.chunks {
		if !yield(runtime.Delta{Text: c, Refusal: true}) {
			return nil
		}
	}
	yield(runtime.Delta{FinishReason: runtime.FinishContentFilter})
	return nil
}

// A refusal is not an output to coerce into the schema: in every mode, with
// or without partial, it reaches the caller as it came, still marked a
// refusal, and a retry outside does not re-ask the model to answer what it
// declined.
func TestRefusalPassesThroughMarked(t *testing.T) {
	for _, partial := range []bool{false, true} {
		for _, mode := range []string{"enforce", "annotate"} {
			// Fenced JSON of the schema's shape, that enforce would
			// otherwise strip and deliver as a delta of its own.
			for name, chunks := range map[string][]string{
				"prose":        {"I can't ", "help with that."},
				"fenced value": {"```json\n", `{"answer":"no","citations":[]}`, "\n```"},
			} {
				t.Run(mode+"/"+name, func(t *testing.T) {
					cfg := `{"mode":"` + mode + `","schema":` + answerSchema
					if partial {
						cfg += `,"partial":true`
					}
					p := rt.Plan(plan.Chains{Chat: []plan.Layer{
						rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`),
						rt.Named("shape", rt.Layer("output_coerce", cfg+`}`)),
					}})
					m := &refuser{chunks: chunks}
					pl := build(t, p, m)
					var got []runtime.Delta
					resp, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary", Messages: userMsg}, func(d runtime.Delta) bool {
						got = append(got, d)
						return true
					})
					require.NoError(t, err)
					assert.Equal(t, 1, m.calls, "the model is not re-asked")
					var text string
					for _, d := range got {
						text += d.Text
						assert.True(t, d.Text == "" || d.Refusal, "text %q reached the caller unmarked", d.Text)
					}
					want := ""
					for _, c := range chunks {
						want += c
					}
					assert.Equal(t, want, text, "the refusal as the model made it")
					assert.Equal(t, runtime.FinishContentFilter, resp.FinishReason)
					_, annotated := outputcoerce.AnnotationOf(resp, "shape")
					assert.False(t, annotated, "a refusal is not annotated as output")

					m.calls = 0
					resp, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: userMsg})
					require.NoError(t, err)
					assert.Equal(t, 1, m.calls)
					assert.True(t, resp.Refusal, "collected as a refusal")
					assert.Equal(t, want, resp.Text)
				})
			}
		}
	}
}

// pauser is a model whose turn the provider paused (Anthropic's pause_turn:
// a long-running server tool): the text so far is not the answer, and the
// client continues the turn by sending the response back.
type pauser struct {
	chunks []string
	calls  int
}

func (m *pauser) Stream(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	m.calls++
	for _, c := range m.chunks {
		if !yield(runtime.Delta{Text: c}) {
			return nil
		}
	}
	yield(runtime.Delta{FinishReason: runtime.FinishPauseTurn})
	return nil
}

// A paused turn is not the final output either: in every mode, with or
// without partial, its text reaches the caller as it came, unchecked, and a
// retry outside does not re-ask the model (which would restart the turn the
// client is to continue) because the schema's value is not there yet.
func TestPausedTurnPassesUnchecked(t *testing.T) {
	for _, partial := range []bool{false, true} {
		for _, mode := range []string{"enforce", "annotate"} {
			t.Run(fmt.Sprintf("%s/partial=%v", mode, partial), func(t *testing.T) {
				cfg := `{"mode":"` + mode + `","schema":` + answerSchema
				if partial {
					cfg += `,"partial":true`
				}
				p := rt.Plan(plan.Chains{Chat: []plan.Layer{
					rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`),
					rt.Named("shape", rt.Layer("output_coerce", cfg+`}`)),
				}})
				m := &pauser{chunks: []string{`{"answer":"the order `, `shipped on`}}
				pl := build(t, p, m)
				resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: userMsg})
				require.NoError(t, err)
				assert.Equal(t, 1, m.calls, "the model is not re-asked")
				assert.Equal(t, `{"answer":"the order shipped on`, resp.Text)
				assert.Equal(t, runtime.FinishPauseTurn, resp.FinishReason)
				_, annotated := outputcoerce.AnnotationOf(resp, "shape")
				assert.False(t, annotated, "a paused turn is not annotated as output")
			})
		}
	}
}
