package outputcoerce_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/outputcoerce"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

const answerSchema = `{"type":"object","required":["answer","citations"],"properties":{
	"answer":{"type":"string"},"citations":{"type":"array","items":{"type":"string"}},
	"score":{"type":"number","maximum":1}}}`

// script is a model that answers with texts in order and records the
// transcripts it receives.
type script struct {
	mu    sync.Mutex
	texts []string
	seen  [][]runtime.Message
}

func (m *script) Stream(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	m.mu.Lock()
	n := len(m.seen)
	m.seen = append(m.seen, append([]runtime.Message(nil), req.Messages...))
	text := m.texts[min(n, len(m.texts)-1)]
	m.mu.Unlock()
	// Stream in small pieces, as a model does.
	for len(text) > 0 {
		k := min(7, len(text))
		if !yield(runtime.Delta{Text: text[:k]}) {
			return nil
		}
		text = text[k:]
	}
	return nil
}

func coercePlan(mode string, withRetry bool) *plan.Plan {
	var layers []plan.Layer
	if withRetry {
		layers = append(layers, rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`))
	}
	layers = append(layers, rt.Named("shape", rt.Layer("output_coerce", `{"mode":"`+mode+`","schema":`+answerSchema+`}`)))
	return rt.Plan(plan.Chains{Chat: layers})
}

func build(t testing.TB, p *plan.Plan, m runtime.ModelClient) *runtime.Pipeline {
	t.Helper()
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": m}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	return pl
}

var userMsg = []runtime.Message{{Role: "user", Content: "answer in JSON"}}

func TestEnforce(t *testing.T) {
	tests := []struct {
		name     string
		output   string
		want     string
		wantDiag []outputcoerce.Diagnostic
	}{
		{"valid", `{"answer":"42","citations":["kb/1"]}`, `{"answer":"42","citations":["kb/1"]}`, nil},
		{"fenced", "Here you go:\n```json\n{\"answer\":\"42\",\"citations\":[]}\n```\nthanks", `{"answer":"42","citations":[]}`, nil},
		{"not JSON", "the answer is 42", "", []outputcoerce.Diagnostic{{Path: "", Message: "not valid JSON: invalid character 'h' in literal true (expecting 'r')"}}},
		{"fields wrong, sorted", `{"answer":42,"citations":["a",7],"score":3}`, "", []outputcoerce.Diagnostic{
			{Path: "/answer", Message: "expected string, but got number"},
			{Path: "/citations/1", Message: "expected string, but got number"},
			{Path: "/score", Message: "must be <= 1 but found 3"},
		}},
		{"missing field", `{"answer":"x"}`, "", []outputcoerce.Diagnostic{{Path: "", Message: "missing properties: 'citations'"}}},
		{"trailing data", `{"answer":"x","citations":[]} extra`, "", []outputcoerce.Diagnostic{{Message: "not valid JSON: trailing data after the value"}}},
		// The check would read the last of a key given twice, and Go's
		// encoding/json a key in any case as its struct's field, while the
		// client's parser may read the first: such output is refused.
		{"key twice", `{"answer":"yes","citations":[],"answer":"no"}`, "", []outputcoerce.Diagnostic{{Message: `not valid JSON: the key "/answer" is given twice (keys differing only in case count as one), and parsers differ on which one they read`}}},
		{"key in another case", `{"answer":"yes","citations":["a"],"Answer":"no"}`, "", []outputcoerce.Diagnostic{{Message: `not valid JSON: the key "/Answer" is given twice (keys differing only in case count as one), and parsers differ on which one they read`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := build(t, coercePlan("enforce", false), &script{texts: []string{tt.output}})
			text, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary", Messages: userMsg}, 0)
			if tt.wantDiag == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.want, text)
				return
			}
			var ce *outputcoerce.CoercionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "shape", ce.Layer)
			assert.Equal(t, "shape", runtime.LayerOf(err))
			assert.Equal(t, runtime.ClassFailure, runtime.Classify(err))
			assert.True(t, runtime.IsTransient(err), "a retry may re-ask")
			assert.Equal(t, tt.wantDiag, ce.Diagnostics)
			assert.Empty(t, text, "invalid output is never delivered")
			assert.Zero(t, resp.Deltas)
			fb, ok := runtime.FeedbackOf(err)
			require.True(t, ok)
			assert.Contains(t, fb, tt.output)
			for _, d := range tt.wantDiag {
				assert.Contains(t, fb, d.Message)
			}
		})
	}
}

func TestEnforceWithRetryReasksWithDiagnostics(t *testing.T) {
	model := &script{texts: []string{`{"answer":42}`, "```json\n{\"answer\":\"42\",\"citations\":[\"kb/7\"]}\n```"}}
	pl := build(t, coercePlan("enforce", true), model)
	msgs := append([]runtime.Message(nil), userMsg...)
	text, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary", Messages: msgs}, 0)
	require.NoError(t, err)
	assert.Equal(t, `{"answer":"42","citations":["kb/7"]}`, text)
	assert.Equal(t, 2, resp.Attempts)
	require.Len(t, model.seen, 2)
	assert.Equal(t, userMsg, model.seen[0], "the first attempt sees the caller's transcript")
	second := model.seen[1]
	require.Len(t, second, 2, "the second attempt sees the transcript plus one feedback message")
	assert.Equal(t, userMsg[0], second[0])
	assert.Equal(t, "user", second[1].Role)
	assert.Contains(t, second[1].Content, `{"answer":42}`)
	assert.Contains(t, second[1].Content, "/answer: expected string, but got number")
	assert.Contains(t, second[1].Content, "(root): missing properties: 'citations'")
	assert.Equal(t, userMsg, msgs, "the caller's transcript is untouched")
}

func TestEnforceRetryExhausted(t *testing.T) {
	model := &script{texts: []string{"nope"}}
	pl := build(t, coercePlan("enforce", true), model)
	_, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary", Messages: userMsg}, 0)
	var ce *outputcoerce.CoercionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 3, resp.Attempts)
	require.Len(t, model.seen, 3)
	assert.Len(t, model.seen[2], 2, "feedback does not pile up: only the latest failure's")
}

func TestAnnotate(t *testing.T) {
	tests := []struct {
		name   string
		output string
		valid  bool
		value  any
	}{
		{"valid", `{"answer":"x","citations":[],"score":0.5}`, true, map[string]any{"answer": "x", "citations": []any{}, "score": json.Number("0.5")}},
		{"invalid", `{"answer":1}`, false, map[string]any{"answer": json.Number("1")}},
		{"not JSON", `hello`, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := build(t, coercePlan("annotate", true), &script{texts: []string{tt.output}})
			resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: userMsg})
			require.NoError(t, err, "annotate never fails")
			assert.Equal(t, tt.output, resp.Text, "the output is delivered as it came")
			assert.Equal(t, 1, resp.Attempts)
			a, ok := outputcoerce.AnnotationOf(resp, "shape")
			require.True(t, ok)
			assert.Equal(t, tt.valid, a.Valid)
			assert.Equal(t, tt.value, a.Value)
			assert.Equal(t, tt.valid, len(a.Diagnostics) == 0)
		})
	}
}

func TestFailedStreamPassesThrough(t *testing.T) {
	p := coercePlan("enforce", false)
	m := rt.NewModel(rt.Response{Err: rt.Permanent("bad request")})
	pl := build(t, p, m)
	_, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	var ce *outputcoerce.CoercionError
	assert.False(t, errors.As(err, &ce))
	assert.ErrorContains(t, err, "bad request")
}

func TestConfigErrors(t *testing.T) {
	tests := []struct{ cfg, want string }{
		{`{"mode":"enforce"}`, "schema"},
		{`{"schema":{"type":"object"},"mode":"strict"}`, "mode"},
		{`{"schema":{"type":7}}`, "schema"},
		{`{"schema":"answer.schema.json"}`, "file path"},
		{`{"schema":{"$ref":"https://example.com/s.json"}}`, "remote"},
		{`{"schema":{},"x":1}`, "unknown field"},
	}
	for _, tt := range tests {
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("output_coerce", tt.cfg)}})
		_, err := runtime.Build(context.Background(), p, runtime.Deps{})
		require.Error(t, err, tt.cfg)
		assert.Contains(t, err.Error(), tt.want, tt.cfg)
	}
	// A JSON object given as a string is accepted.
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("output_coerce", `{"schema":"{\"type\":\"object\"}"}`)}})
	_, err := runtime.Build(context.Background(), p, runtime.Deps{})
	assert.NoError(t, err)
}

func TestStripFences(t *testing.T) {
	assert.Equal(t, `{"a":1}`, outputcoerce.StripFences("```json\n{\"a\":1}\n```"))
	assert.Equal(t, `{"a":1}`, outputcoerce.StripFences("  {\"a\":1}\n"))
	assert.Equal(t, `[1]`, outputcoerce.StripFences("text\n```\n[1]\n```"))
	assert.Equal(t, "```", outputcoerce.StripFences("```"))
	// A fence inside a JSON string does not close the outer one.
	assert.Equal(t, `{"code":"`+"```py\\nx\\n```"+`","n":1}`,
		outputcoerce.StripFences("```json\n{\"code\":\"```py\\nx\\n```\",\"n\":1}\n```\nDone."))
	assert.Equal(t, "{\"q\":\"a \\\"quoted\\\" ```\"}", outputcoerce.StripFences("```\n{\"q\":\"a \\\"quoted\\\" ```\"}```"))
	// Prose with an odd quote closes at the fence on its own line.
	assert.Equal(t, `it's "odd`, outputcoerce.StripFences("```\nit's \"odd\n```\nafter"))
}

func BenchmarkEnforceSmallObject(b *testing.B) {
	out := `{"answer":"the refund was issued","citations":["kb/12","kb/40"],"score":0.9}`
	m := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: out})
		return nil
	})
	pl := build(b, coercePlan("enforce", false), m)
	ctx := context.Background()
	req := runtime.ChatRequest{Model: "primary", Messages: userMsg}
	var sb strings.Builder
	b.ReportAllocs()
	for b.Loop() {
		sb.Reset()
		if _, err := pl.Stream(ctx, req, func(d runtime.Delta) bool { sb.WriteString(d.Text); return true }); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRetryFeedbackCutsTheEchoOnARuneBoundary(t *testing.T) {
	out := "a" + strings.Repeat("é", 2000) // byte 2000 falls inside an "é"
	fb := (&outputcoerce.CoercionError{Layer: "oc", Output: out}).RetryFeedback()
	assert.True(t, utf8.ValidString(fb), "the quoted output is not cut inside a character")
	assert.Contains(t, fb, "a"+strings.Repeat("é", 999)+"...")
	assert.NotContains(t, fb, strings.Repeat("é", 1000))
}
