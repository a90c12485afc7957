package predicate

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A presence test of an args field the schema requires, at every level of
// its path, with a type that rejects null, holds for every call: the tool
// chain refuses arguments that do not match the schema before any layer
// runs. An optional field, a nullable one, an untyped one (null passes its
// schema, and a null reads as absent) and one below an optional object are
// not always present.
func TestAlwaysPresent(t *testing.T) {
	env, err := NewEnv(EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{
		"type": "object",
		"required": ["order_id", "meta", "loose", "maybe", "opt_parent"],
		"properties": {
			"order_id": {"type": "string"},
			"approved_by": {"type": "string"},
			"meta": {"type": "object", "required": ["by"], "properties": {"by": {"type": "string"}, "why": {"type": "string"}}},
			"opt": {"type": "object", "required": ["by"], "properties": {"by": {"type": "string"}}},
			"opt_parent": {"type": "object", "properties": {"x": {"type": "object", "required": ["y"], "properties": {"y": {"type": "integer"}}}}},
			"loose": {},
			"maybe": {"type": ["string", "null"]}
		}}`)}})
	require.NoError(t, err)
	c, iss := env.Check("has(args.order_id) && !has(args.approved_by) && has(args.meta.by) && has(args.meta.why) && has(args.opt) && has(args.opt.by) && has(args.loose) && has(args.maybe) && has(args.opt_parent.x) && has(args.opt_parent.x.y) && has(args.order_id)")
	require.Empty(t, iss)
	assert.Equal(t, []string{"args.order_id", "args.meta.by"}, c.AlwaysPresent())

	// Two tools: required only where both require it.
	two, err := NewEnv(EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{
		json.RawMessage(`{"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}`),
		json.RawMessage(`{"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}`),
	}})
	require.NoError(t, err)
	c, iss = two.Check("has(args.a) && has(args.b)")
	require.Empty(t, iss)
	assert.Equal(t, []string{"args.a"}, c.AlwaysPresent())

	// Untyped args: nothing is known.
	untyped, err := NewEnv(EnvConfig{Stage: Tool})
	require.NoError(t, err)
	c, iss = untyped.Check("has(args.a)")
	require.Empty(t, iss)
	assert.Empty(t, c.AlwaysPresent())
}
