package predicate

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestObjectValues(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Chat, Phase: After})
	vars := &ChatVars{
		Request:     ChatRequest{Model: "primary", Messages: []Message{{Role: "user", Content: "hi"}}},
		Response:    ChatResponse{Usage: Usage{InputTokens: 3}},
		HasResponse: true,
	}
	for _, src := range []string{
		"type(request) == agentc.request",
		"has(dyn(request).model) && !has(dyn(request).max_tokens)",
		"dyn(request).messages.size() == 1 && dyn(request.messages[0]).role == 'user'",
		"dyn(response).usage.input_tokens == 3 && dyn(response.usage) == response.usage",
		"request != dyn(response.usage)",
	} {
		p := mustCompile(t, env, src)
		ok, err := p.Eval(context.Background(), vars)
		require.NoError(t, err, src)
		assert.True(t, ok, src)
	}
	p := mustCompile(t, env, "dyn(request).modle == 'x'")
	_, err := p.Eval(context.Background(), vars)
	assert.ErrorContains(t, err, "no such field 'modle'")
}

func TestObjectRefVal(t *testing.T) {
	req := &ChatRequest{Model: "m"}
	v := typeAdapter.NativeToValue(req)
	o, ok := v.(*object)
	require.True(t, ok)
	assert.Equal(t, requestType.typ, o.Type())
	assert.Same(t, req, o.Value())

	got, err := o.ConvertToNative(reflect.TypeOf(req))
	require.NoError(t, err)
	assert.Same(t, req, got)
	got, err = o.ConvertToNative(reflect.TypeOf(ChatRequest{}))
	require.NoError(t, err)
	assert.Equal(t, *req, got)
	_, err = o.ConvertToNative(reflect.TypeOf(""))
	assert.Error(t, err)

	assert.Equal(t, requestType.typ, o.ConvertToType(types.TypeType))
	assert.Same(t, o, o.ConvertToType(requestType.typ))
	assert.True(t, types.IsError(o.ConvertToType(types.StringType)))

	assert.Equal(t, types.True, o.IsSet(types.String("model")))
	assert.Equal(t, types.False, o.IsSet(types.String("max_tokens")))
	assert.True(t, types.IsError(o.IsSet(types.String("nope"))))
	assert.True(t, types.IsError(o.IsSet(types.Int(1))))
	assert.Equal(t, types.String("m"), o.Get(types.String("model")))
	assert.True(t, types.IsError(o.Get(types.Int(1))))

	assert.Equal(t, types.True, o.Equal(typeAdapter.NativeToValue(&ChatRequest{Model: "m"})))
	assert.Equal(t, types.False, o.Equal(typeAdapter.NativeToValue(&ChatRequest{Model: "n"})))
	assert.Equal(t, types.False, o.Equal(types.String("m")))

	assert.Equal(t, types.Double(1.5), typeAdapter.NativeToValue(json.Number("1.5")))
	assert.True(t, types.IsError(typeAdapter.NativeToValue(json.Number("x"))))
	status := "ok"
	assert.Equal(t, types.String("ok"), typeAdapter.NativeToValue(&status))
}

func TestProvider(t *testing.T) {
	env := toolEnv(t, "refund")
	names, ok := env.prov.FindStructFieldNames("agentc.args.shipping")
	require.True(t, ok)
	assert.Equal(t, []string{"country", "zip"}, names)
	names, ok = env.prov.FindStructFieldNames("agentc.message")
	require.True(t, ok)
	assert.Equal(t, []string{"content", "name", "role", "tool_call_id", "tool_calls"}, names)
	_, ok = env.prov.FindStructFieldNames("google.protobuf.Nope")
	assert.False(t, ok)

	ft, ok := env.prov.FindStructFieldType("agentc.args.lines", "count")
	require.True(t, ok)
	assert.Equal(t, types.IntType, ft.Type)
	_, ok = env.prov.FindStructFieldType("agentc.args", "nope")
	assert.False(t, ok)
	assert.True(t, types.IsError(env.prov.NewValue("agentc.args", nil)))
}
