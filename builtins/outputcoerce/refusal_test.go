package outputcoerce_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/outputcoerce"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

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
