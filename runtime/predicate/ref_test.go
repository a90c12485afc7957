package predicate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refSchema declares its nested objects in $defs, as schemas generated
// from typed models do (pydantic, zod-to-json-schema): shipping and the
// items' elements are typed by the definitions they reference.
const refSchema = `{
	"type": "object",
	"$defs": {
		"addr": {"type": "object", "properties": {"zip": {"type": "string"}, "country": {"type": "string"}}, "required": ["zip"], "additionalProperties": false},
		"line": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}, "ship_to": {"$ref": "#/$defs/addr"}}, "required": ["sku", "qty"]},
		"a~b/c": {"type": "integer"},
		"tree": {"type": "object", "properties": {"name": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}}
	},
	"properties": {
		"shipping": {"$ref": "#/$defs/addr", "description": "where it goes"},
		"items": {"type": "array", "items": {"$ref": "#/$defs/line"}},
		"escaped": {"$ref": "#/$defs/a~0b~1c"},
		"tree": {"$ref": "#/$defs/tree"},
		"elsewhere": {"$ref": "other.json#/$defs/addr"},
		"dangling": {"$ref": "#/$defs/nope"},
		"overridden": {"$ref": "#/$defs/addr", "type": "string"}
	},
	"required": ["shipping", "items"]
}`

func TestCheckFollowsLocalRefs(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(refSchema)}})
	for _, src := range []string{
		"args.shipping.zip == '12345'",
		"has(args.shipping.country) && args.shipping.country == 'FR'",
		"args.items.all(i, i.qty > 0 && i.sku != '')",
		"args.items.exists(i, has(i.ship_to) && i.ship_to.zip == '1')",
		"has(args.escaped) && args.escaped > 1",
		"has(args.tree) && has(args.tree.kids) && args.tree.kids.exists(k, has(k.name) && k.name == 'x')",
		"has(args.elsewhere) && args.elsewhere.anything == 1", // another document: untyped
		"has(args.dangling) && args.dangling.anything == 1",   // a pointer to nothing: untyped
		"has(args.overridden) && args.overridden == 'x'",      // its own type wins
	} {
		_, iss := env.Check(src)
		assert.Empty(t, iss, src)
	}
	for src, want := range map[string]string{
		"args.shipping.zipp == '1'":                       "undefined field 'zipp'; did you mean 'zip'?",
		"args.items.all(i, i.skuu != '')":                 "undefined field 'skuu'",
		"args.items.all(i, i.qty == 'x')":                 "no matching overload",
		"has(args.escaped) && args.escaped == 'x'":        "no matching overload",
		"args.items.exists(i, i.ship_to.zip == '1')":      "ship_to is optional",
		"has(args.tree) && args.tree.kids[0].nmae == 'x'": "undefined field 'nmae'",
	} {
		_, iss := env.Check(src)
		require.NotEmpty(t, iss, src)
		assert.Contains(t, iss[0].Message, want, src)
	}

	// The values are read as typed: qty, an integer sent as a JSON number,
	// compares as an int.
	p := mustCompile(t, env, "args.items.all(i, i.qty >= 2) && args.shipping.zip == '75001'")
	ok, err := p.Eval(context.Background(), &ToolVars{Args: jsonArgs(t, `{"shipping": {"zip": "75001"}, "items": [{"sku": "a", "qty": 2}]}`)})
	require.NoError(t, err)
	assert.True(t, ok)
}

// TestCheckRefsAreBounded: a schema whose definitions reference each other
// many times over (each expanded where it is referenced) types what it can
// within a bound and does not blow up.
func TestCheckRefsAreBounded(t *testing.T) {
	src := refChainSchema()
	env := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(src)}})
	_, iss := env.Check("has(args.root.p0) && has(args.root.p0.p1) && args.root.p0.p1.p2 != null")
	assert.Empty(t, iss)
	_, iss = env.Check("has(args.root.q0)")
	require.NotEmpty(t, iss)
	assert.Contains(t, iss[0].Message, "undefined field 'q0'")
}

// TestCheckRefsBudgetIsDeterministic: where the reference budget runs out, what is typed
// does not depend on the order Go iterates a map in: the properties are typed in the
// order of their names, so the same policy vets the same way every time.
func TestCheckRefsBudgetIsDeterministic(t *testing.T) {
	src := refChainSchema()
	for range 8 {
		env := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(src)}})
		_, iss := env.Check("has(args.root.p0) && has(args.root.p0.qq)")
		require.NotEmpty(t, iss, "the first property is typed")
		assert.Contains(t, iss[0].Message, "undefined field 'qq'")
		_, iss = env.Check("has(args.root.p3) && has(args.root.p3.qq)")
		assert.Empty(t, iss, "a property met once the budget ran out is dyn")
	}
}

// refChainSchema is a schema whose 20 definitions each reference the next ten times over (each
// expanded where it is referenced): far more nodes than the reference budget types.
func refChainSchema() string {
	var defs []string
	for i := range 20 {
		var props []string
		for j := range 10 {
			props = append(props, fmt.Sprintf(`"p%d": {"$ref": "#/$defs/d%d"}`, j, i+1))
		}
		defs = append(defs, fmt.Sprintf(`"d%d": {"type": "object", "properties": {%s}}`, i, strings.Join(props, ",")))
	}
	defs = append(defs, `"d20": {"type": "string"}`)
	return fmt.Sprintf(`{"type": "object", "$defs": {%s}, "properties": {"root": {"$ref": "#/$defs/d0"}}, "required": ["root"]}`, strings.Join(defs, ","))
}
