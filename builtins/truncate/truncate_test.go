package truncate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/truncate"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// call builds p with the tool "t" answering result and calls it.
func call(t *testing.T, p *plan.Plan, result rt.ToolResult) (runtime.ToolResult, error) {
	t.Helper()
	tool := rt.NewTool(result)
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	return pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
}

func TestTruncate(t *testing.T) {
	big := map[string]any{"rows": []any{"aaaa", "bbbb", "cccc"}}
	tests := []struct {
		name  string
		value any
		want  any
	}{
		{"short string", "hello", "hello"},
		{"exact length", "0123456789", "0123456789"},
		{"long string", "0123456789abc", "0123456789" + truncate.Marker(10, 13)},
		{"multibyte counts characters", "ééééééééééé", "éééééééééé" + truncate.Marker(10, 11)},
		{"short structure", map[string]any{"a": 1.0}, map[string]any{"a": 1.0}},
		{"long structure becomes its JSON text", big, `{"rows":["` + truncate.Marker(10, 31)},
		// The model reads "<", not json.Marshal's six-character "\u003c".
		{"markup counts as read", map[string]any{"t": "<&"}, map[string]any{"t": "<&"}},
		{"markup cut as read", map[string]any{"t": "<<<<<<<<<<"}, `{"t":"<<<<` + truncate.Marker(10, 18)},
		{"raw JSON as it is", json.RawMessage(`{"t":"<<"}`), json.RawMessage(`{"t":"<<"}`)},
		{"raw JSON cut as its text", json.RawMessage(`{"t": "<<<"}`), `{"t": "<<<` + truncate.Marker(10, 12)},
		{"nil", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("truncate", `{"max_chars":10}`)}})
			res, err := call(t, p, rt.ToolResult{Value: tt.value})
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Value)
		})
	}
	assert.Equal(t, []any{"aaaa", "bbbb", "cccc"}, big["rows"], "the tool's value is untouched")
}

// A result with no JSON form cannot be measured: the call fails closed,
// with a permanent error naming the layer and marked as having run, rather
// than passing the result on unbounded.
func TestResultWithoutJSONFormFailsClosed(t *testing.T) {
	for name, value := range map[string]any{
		"NaN":     map[string]any{"score": math.NaN()},
		"channel": map[string]any{"c": make(chan int)},
	} {
		t.Run(name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("cut", rt.Layer("truncate", `{"max_chars":10}`))}})
			res, err := call(t, p, rt.ToolResult{Value: value})
			require.Error(t, err)
			assert.Nil(t, res.Value)
			assert.Equal(t, "permanent", runtime.KindOf(err))
			assert.Equal(t, "cut", runtime.LayerOf(err))
			assert.ErrorIs(t, err, runtime.ErrRan, "the tool ran")
			assert.ErrorContains(t, err, "no JSON form")
			_, _, aerr := truncate.Apply(value, 10)
			assert.Error(t, aerr)
		})
	}
}

func TestErrorsPassThrough(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("truncate", `{"max_chars":3}`)}})
	_, err := call(t, p, rt.ToolResult{Value: "partial", Err: rt.Permanent("bad")})
	assert.EqualError(t, err, "bad")
}

// A failed call's error reaches the model too ("error: the tool failed: "
// and its text): an MCP tool answering isError with a stack trace, an HTTP
// tool quoting the body of its 500, would put it in the context unbounded.
// Its text is cut as a result's is; what it is (kind, layer, whether the
// tool ran) is kept.
func TestLongErrorIsCut(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("truncate", `{"max_chars":50}`)}})
	msg := "upstream failed: " + strings.Repeat("at frame() ", 1000)
	_, err := call(t, p, rt.ToolResult{Err: runtime.Ran(&runtime.CallError{Kind: runtime.KindPermanent, Layer: "mcp", Message: msg})})
	require.Error(t, err)
	full := "mcp: " + msg
	assert.Equal(t, full[:50]+truncate.Marker(50, len(full)), err.Error())
	assert.Equal(t, "permanent", runtime.KindOf(err))
	assert.Equal(t, "mcp", runtime.LayerOf(err))
	assert.ErrorIs(t, err, runtime.ErrRan)
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
}

func TestDefaultAndBadConfig(t *testing.T) {
	v, cut, err := truncate.Apply(strings.Repeat("x", 8001), 8000)
	require.NoError(t, err)
	assert.True(t, cut)
	assert.True(t, strings.HasPrefix(v.(string), strings.Repeat("x", 8000)+"\n[truncated"))
	for _, cfg := range []string{`{"max_chars":0}`, `{"max_chars":"10"}`, `{"max":10}`} {
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("truncate", cfg)}})
		_, err := runtime.Build(context.Background(), p, runtime.Deps{})
		assert.Error(t, err, cfg)
	}
}

// Two truncate layers in a row: the outer one reads the inner one's cut
// text, marker included. It reports the length of the tool's own result,
// not of the inner cut, and leaves a text the inner layer already cut
// within its own limit as it is, rather than cutting into the marker.
func TestStackedLayers(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name         string
		outer, inner int
		value        any
		want         any
	}{
		{"outer wider", 20, 10, long, long[:10] + truncate.Marker(10, 100)},
		{"outer narrower", 10, 20, long, long[:10] + truncate.Marker(10, 100)},
		{"same limit", 10, 10, long, long[:10] + truncate.Marker(10, 100)},
		{"structure", 5, 10, map[string]any{"s": long}, `{"s":` + truncate.Marker(5, 108)},
		{"multibyte", 3, 6, strings.Repeat("é", 50), "ééé" + truncate.Marker(3, 50)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{
				rt.Named("outer", rt.Layer("truncate", fmt.Sprintf(`{"max_chars":%d}`, tt.outer))),
				rt.Named("inner", rt.Layer("truncate", fmt.Sprintf(`{"max_chars":%d}`, tt.inner))),
			}})
			res, err := call(t, p, rt.ToolResult{Value: tt.value})
			require.NoError(t, err)
			assert.Equal(t, tt.want, res.Value)
		})
	}
	t.Run("error", func(t *testing.T) {
		p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("truncate", `{"max_chars":20}`), rt.Layer("truncate", `{"max_chars":10}`)}})
		_, err := call(t, p, rt.ToolResult{Err: rt.Permanent(long)})
		assert.EqualError(t, err, long[:10]+truncate.Marker(10, 100))
	})
}

// Text that ends like a marker but is not one (the kept count is not the
// length of the text before it, or it claims nothing was cut) is measured
// and cut as any text: a result cannot pass uncut by faking a marker.
func TestMarkerLookalikeIsCut(t *testing.T) {
	for name, text := range map[string]string{
		"kept count wrong":    strings.Repeat("y", 40) + truncate.Marker(5, 100),
		"nothing cut":         strings.Repeat("y", 5) + truncate.Marker(5, 5),
		"not a number":        strings.Repeat("y", 5) + "\n[truncated: kept five of 100 characters]",
		"marker past a limit": strings.Repeat("y", 30) + truncate.Marker(30, 100),
	} {
		t.Run(name, func(t *testing.T) {
			v, cut, err := truncate.Apply(text, 10)
			require.NoError(t, err)
			assert.True(t, cut)
			assert.True(t, strings.HasPrefix(v.(string), text[:10]+"\n[truncated: kept 10 of "), v)
		})
	}
	v, cut, err := truncate.Apply(strings.Repeat("y", 30)+truncate.Marker(30, 100), 10)
	require.NoError(t, err)
	assert.True(t, cut)
	assert.Equal(t, strings.Repeat("y", 10)+truncate.Marker(10, 100), v, "a real marker's original length is kept")
}
