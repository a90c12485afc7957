package predicate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVariables(t *testing.T) {
	byName := func(vs []VariableDoc) map[string]VariableDoc {
		m := map[string]VariableDoc{}
		for _, v := range vs {
			m[v.Name] = v
		}
		return m
	}
	chat := byName(Variables(Chat))
	assert.Equal(t, VariableDoc{Name: "request", Type: "agentc.request", Doc: "the request to the model"}, chat["request"])
	assert.Equal(t, VariableDoc{Name: "messages", Type: "list(agentc.message)", Doc: "request.messages"}, chat["messages"])
	assert.Equal(t, VariableDoc{Name: "response", Type: "agentc.response", AfterOnly: true, Doc: "the model's answer"}, chat["response"])
	tool := byName(Variables(Tool))
	assert.Equal(t, "map(string, dyn)", tool["args"].Type)
	assert.True(t, tool["result"].AfterOnly)
	assert.False(t, tool["tool"].AfterOnly)
	turn := byName(Variables(Turn))
	assert.True(t, turn["output"].AfterOnly)
	assert.True(t, turn["status"].AfterOnly)
	assert.Len(t, Variables(Admit), 1)

	// Every variable is documented.
	for _, s := range []Stage{Chat, Tool, Turn, Admit, State} {
		for _, v := range Variables(s) {
			assert.NotEmpty(t, v.Doc, string(s)+"."+v.Name)
		}
	}

	// Every variable a check accepts is listed, and nothing more: a
	// predicate reading each listed variable type-checks in its phase.
	for _, s := range []Stage{Chat, Tool, Turn, Admit} {
		for _, v := range Variables(s) {
			phase := Before
			if v.AfterOnly {
				phase = After
			}
			env, err := NewEnv(EnvConfig{Stage: s, Phase: phase})
			require.NoError(t, err)
			_, iss := env.Check(v.Name + " == " + v.Name)
			for _, is := range iss {
				assert.NotEqual(t, RuleType, is.Rule, "%s.%s: %s", s, v.Name, is) // declared
			}
		}
	}
}

func TestObjectFields(t *testing.T) {
	names := ObjectTypes()
	require.Contains(t, names, "agentc.request")
	fields, ok := ObjectFields("agentc.usage")
	require.True(t, ok)
	var got []string
	for _, f := range fields {
		got = append(got, f.Name+":"+f.Type)
	}
	assert.Contains(t, got, "input_tokens:int")
	_, ok = ObjectFields("agentc.nothing")
	assert.False(t, ok)
	// Every field of every type is documented, and no documentation names a field that is gone.
	documented := 0
	for _, name := range names {
		fs, _ := ObjectFields(name)
		for _, f := range fs {
			assert.NotEmpty(t, f.Doc, name+"."+f.Name)
			documented++
		}
	}
	assert.Len(t, fieldDocs, documented)
	// Every listed field type-checks where its type is reachable.
	env, err := NewEnv(EnvConfig{Stage: Chat, Phase: After})
	require.NoError(t, err)
	for _, f := range fields {
		_, iss := env.Check("has(response.usage." + f.Name + ")")
		assert.Empty(t, iss, f.Name)
	}
}
