package guard_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

const statusSchema = `{"type":"object","required":["status"],"properties":{"status":{"type":"string"}}}`

// resultGuard builds a pipeline whose tool "order" (result_schema schema,
// none when empty) answers value, behind an after-phase guard denying deny.
func resultGuard(t *testing.T, schema, deny string, value any) (runtime.ToolResult, error) {
	t.Helper()
	return callTool(t, []plan.Layer{rt.Named("failed", rt.Layer("guard", `{"deny":"`+deny+`","phase":"after"}`))},
		"order", schema, rt.ToolResult{Value: value})
}

// callTool calls the tool name (result_schema schema, none when empty),
// which answers res, through chain.
func callTool(t *testing.T, chain []plan.Layer, name, schema string, res rt.ToolResult) (runtime.ToolResult, error) {
	t.Helper()
	p := rt.Plan(plan.Chains{Tool: chain})
	p.Tools = map[string]plan.Tool{name: {}}
	if schema != "" {
		p.Tools[name] = plan.Tool{ResultSchema: json.RawMessage(schema)}
	}
	tool := rt.NewTool(res)
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{name: tool.Func()}})
	require.NoError(t, err)
	return pl.Tool(context.Background(), runtime.ToolRequest{Name: name, Args: map[string]any{}})
}

// TestAfterGuardReadsJSONTextByItsValue: a tool whose result_schema
// refuses a string and that answers JSON as text (a string, raw JSON
// bytes) is read as the value the text encodes, as output_coerce checks
// it, and the result returned is the tool's own, unchanged.
func TestAfterGuardReadsJSONTextByItsValue(t *testing.T) {
	const deny = "result.status == 'failed'"
	for _, tc := range []struct {
		name    string
		ok, bad any
	}{
		{"string", `{"id": "A1", "status": "ok"}`, `{"id": "A1", "status": "failed"}`},
		{"raw JSON", json.RawMessage(`{"status":"ok"}`), json.RawMessage(`{"status":"failed"}`)},
		{"bytes", []byte(`{"status":"ok"}`), []byte(`{"status":"failed"}`)},
		{"raw JSON of a string", json.RawMessage(`"{\"status\":\"ok\"}"`), json.RawMessage(`"{\"status\":\"failed\"}"`)},
		{"MCP structured content", map[string]any{"content": []any{map[string]any{"type": "text", "text": "ok"}}, "structuredContent": map[string]any{"status": "ok"}},
			map[string]any{"content": []any{}, "structuredContent": map[string]any{"status": "failed"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := resultGuard(t, statusSchema, deny, tc.ok)
			require.NoError(t, err)
			assert.Equal(t, tc.ok, res.Value, "the result returned is the tool's, unchanged")

			_, err = resultGuard(t, statusSchema, deny, tc.bad)
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, "failed", b.Layer)
			assert.NoError(t, b.Err, "blocked by the predicate, not by an evaluation error")
		})
	}
}

// TestAfterGuardKeepsTextTheSchemaDoesNotRefuse: without a result_schema,
// or with one that accepts a string, a string result is read as the
// string; text that is not JSON is read as text.
func TestAfterGuardKeepsTextTheSchemaDoesNotRefuse(t *testing.T) {
	const text = `{"status": "failed"}`
	for _, tc := range []struct {
		name, schema, deny string
		value              any
	}{
		{"no schema", "", "result.contains('failed')", text},
		{"a schema that accepts a string", `{"type":["object","string"]}`, "type(result) == string", text},
		{"text that is not JSON", statusSchema, "result.startsWith('status: failed')", "status: failed"},
		{"JSON text of a string", statusSchema, "result == '\\\"failed\\\"'", `"failed"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := resultGuard(t, tc.schema, tc.deny, tc.value)
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.NoError(t, b.Err, "blocked by the predicate, not by an evaluation error")
		})
	}
	// Without a result_schema, a read of a field of JSON text fails as
	// before (vet warns of it: cel/untyped-args).
	_, err := resultGuard(t, "", "result.status == 'failed'", `{"status": "ok"}`)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Error(t, b.Err, "an evaluation error, failing closed")
}

// TestAfterGuardRefusesAnUncompilableResultSchema: a result_schema the
// guard cannot compile is an error naming it when the pipeline is built.
func TestAfterGuardRefusesAnUncompilableResultSchema(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("guard", `{"deny":"result.status == 'failed'","phase":"after"}`)}})
	p.Tools = map[string]plan.Tool{"order": {ResultSchema: json.RawMessage(`{"$ref":"https://example.com/s.json"}`)}}
	_, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"order": rt.NewTool().Func()}})
	require.ErrorContains(t, err, "tools.order.result_schema")
}

// failedGuard builds a pipeline whose tool "order" fails with err, behind
// an after-phase guard denying deny.
func failedGuard(t *testing.T, deny string, err error) error {
	t.Helper()
	_, err = callTool(t, []plan.Layer{rt.Named("check", rt.Layer("guard", `{"deny":"`+deny+`","phase":"after"}`))},
		"order", "", rt.ToolResult{Err: err})
	return err
}

// TestAfterGuardReadsAPermanentFailure: a tool's permanent failure is its
// answer (an MCP upstream's error result), whose text the model reads: it
// was returned unread, so a tool that marked its answer an error passed
// the guard. Its text is result: a rule on it blocks (marked as having
// run, or as not run when the failure proved so), a read of a field fails
// closed, and a failure the guard lets through, or a transient one, is
// returned as it was.
func TestAfterGuardReadsAPermanentFailure(t *testing.T) {
	leak := rt.Permanent("card 4111 1111 1111 1111 declined")
	err := failedGuard(t, "result.contains('4111')", leak)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "check", b.Layer)
	assert.NotContains(t, err.Error(), "declined", "the tool's text is not returned")
	assert.ErrorIs(t, err, runtime.ErrRan, "the tool answered")

	err = failedGuard(t, "result.contains('4111')", runtime.NotRun(leak))
	require.ErrorAs(t, err, &b)
	assert.True(t, runtime.DidNotRun(err), "a failure that proved the tool did not act still says so")

	err = failedGuard(t, "result.status == 'failed'", rt.Permanent("no such order"))
	require.ErrorAs(t, err, &b)
	assert.Error(t, b.Err, "an evaluation error, failing closed")

	err = failedGuard(t, "result.contains('4111')", rt.Permanent("no such order"))
	assert.EqualError(t, err, rt.Permanent("no such order").Error(), "let through as it was")
	assert.False(t, errors.As(err, &b))

	err = failedGuard(t, "result.contains('4111')", rt.Transient("card 4111 1111 1111 1111: upstream busy"))
	assert.False(t, errors.As(err, &b), "a transient failure is returned as is: %v", err)
}

// TestAfterGuardRefusesJSONTextGivingAKeyTwice: JSON text whose object
// gives a key twice, keys differing only in case counting as one, has no
// one value: the guard would read the last, and the client's parser may
// read the first (or, as Go's encoding/json into a struct, the key in
// another case as the field). It is not read as a value, so a read of its
// fields fails closed.
func TestAfterGuardRefusesJSONTextGivingAKeyTwice(t *testing.T) {
	const deny = "result.status == 'failed'"
	for _, v := range []any{
		`{"status": "failed", "status": "ok"}`,
		`{"status": "ok", "Status": "failed"}`,
		json.RawMessage(`{"status":"failed","status":"ok"}`),
		[]byte(`{"status":"ok","STATUS":"failed"}`),
		json.RawMessage(`"{\"status\":\"failed\",\"status\":\"ok\"}"`),
	} {
		_, err := resultGuard(t, statusSchema, deny, v)
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b, "%s", v)
		assert.Error(t, b.Err, "an evaluation error, failing closed: %s", v)
	}
}
