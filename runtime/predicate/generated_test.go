package predicate

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/pydantic_order.schema.json is Order.model_json_schema() of
// pydantic 2.13, byte for byte, for:
//
//	class Address(BaseModel):
//	    zip: str
//	    country: Optional[str] = None
//	class Line(BaseModel):
//	    sku: str
//	    qty: int
//	class Kind(str, Enum): standard = "standard"; express = "express"
//	class Level(IntEnum): low = 1; high = 2
//	class Card(BaseModel): method: Literal["card"]; last4: str
//	class Bank(BaseModel): method: Literal["bank"]; iban: str
//	class Order(BaseModel):
//	    order_id: str
//	    note: Optional[str] = None                 # anyOf [{type: string}, {type: null}]
//	    amount: Optional[float] = None
//	    count: Optional[int] = None
//	    ship: Address = Field(description="where it goes")  # $ref with a description beside it
//	    bill: Optional[Address] = None             # anyOf [{$ref}, {type: null}]
//	    kind: Kind                                 # $ref to an enum of strings
//	    level: Level = Level.low                   # $ref to {type: integer, enum: [1, 2]}
//	    lines: list[Line]
//	    labels: dict[str, str] = {}                # additionalProperties: {type: string}
//	    priority: Literal[1, 2, 3] = 1
//	    mode: Literal["fast"] = "fast"             # const with type string
//	    pair: Optional[tuple[str, int]] = None     # prefixItems
//	    payment: Optional[Annotated[Union[Card, Bank], Field(discriminator="method")]] = None
//	                                               # anyOf [{oneOf [{$ref}, {$ref}], discriminator}, {type: null}]
//	    either: Union[Card, Bank, None] = None     # anyOf [{$ref}, {$ref}, {type: null}]
//	    tags: Optional[list[str]] = None
//
// testdata/zod_order.schema.json is zodToJsonSchema(order) of
// zod-to-json-schema 3.25 (zod 3.25), as TypeScript MCP servers publish
// their tools' input schemas, for:
//
//	const Address = z.object({zip: z.string(), country: z.string().nullable().optional()})
//	z.object({
//	  order_id: z.string(),
//	  note: z.string().nullable(),                   // type: ["string", "null"], required
//	  amount: z.number().optional(),
//	  count: z.number().int().nullable().optional(), // anyOf [{type: integer}, {type: null}]
//	  ship: Address.describe("where it goes"),
//	  bill: Address.nullable().optional(),           // anyOf [{..., properties: {zip: {$ref: "#/properties/ship/properties/zip"}}}, {type: null}]
//	  kind: z.enum(["standard", "express"]),
//	  lines: z.array(z.object({sku: z.string(), qty: z.number().int()})),
//	  labels: z.record(z.string()),
//	  priority: z.union([z.literal(1), z.literal(2), z.literal(3)]), // type: number, enum: [1, 2, 3]
//	  mode: z.literal("fast"),
//	  pair: z.tuple([z.string(), z.number().int()]).optional(), // items: [{...}, {...}] (a draft-07 tuple)
//	  payment: z.discriminatedUnion("method", [card, bank]).optional(), // anyOf of two objects
//	  tags: z.array(z.string()).nullable().optional(),
//	})
var generatedSchemas = []string{"pydantic_order", "zod_order"}

func TestCheckGeneratedSchemas(t *testing.T) {
	for _, name := range generatedSchemas {
		env := toolEnv(t, name)
		for _, src := range []string{
			"args.order_id == 'x'",
			"has(args.note) && args.note == 'a'",
			"!has(args.note)",
			"args.?note.orValue('') == ''",
			"has(args.amount) && args.amount > 1.0",
			"has(args.count) && args.count > 1",
			"args.ship.zip == '1' && has(args.ship.country) && args.ship.country == 'FR'",
			"has(args.bill) && args.bill.zip == '1'",
			"args.kind == 'standard'",
			"args.lines.exists(i, i.sku == 'x' && i.qty > 2)",
			"has(args.labels) && 'env' in args.labels && args.labels['env'] == 'prod'",
			"has(args.priority) && args.priority == 1",
			"has(args.mode) && args.mode == 'fast'",
			"has(args.pair) && args.pair[0] == 'a'",
			"has(args.payment) && args.payment.method == 'card'",
			"has(args.payment) && args.payment.method == 'card' && has(args.payment.last4) && args.payment.last4 == '1234'",
			"has(args.tags) && 'vip' in args.tags",
		} {
			_, iss := env.Check(src)
			assert.Empty(t, iss, "%s: %s", name, src)
		}
		for src, want := range map[string]string{
			"has(args.note) && args.nott == 'a'":                      "undefined field 'nott'; did you mean 'note'?",
			"has(args.note) && args.note == 1":                        "no matching overload",
			"args.note == 'a'":                                        "args.note is optional",
			"has(args.count) && args.count == 'x'":                    "applied to '(int, string)'",
			"has(args.bill) && args.bill.zipp == '1'":                 "undefined field 'zipp'; did you mean 'zip'?",
			"args.bill.zip == '1'":                                    "args.bill is optional",
			"args.ship.zipp == '1'":                                   "did you mean 'zip'?",
			"args.kind == 1":                                          "applied to '(string, int)'",
			"args.lines.exists(i, i.skuu == 'x')":                     "did you mean 'sku'?",
			"has(args.labels) && args.labels['env'] == 1":             "applied to '(string, int)'",
			"has(args.payment) && args.payment.methd == 'card'":       "did you mean 'method'?",
			"has(args.payment) && args.payment.last4 == '1'":          "args.payment.last4 is optional",
			"has(args.tags) && 1 in args.tags":                        "'@in' applied to '(int, list(string))'",
			"args.note == null":                                       "test !has(args.note) instead",
			"has(args.count) && args.count != null && args.count > 1": "test has(args.count) instead",
			"args.ship == null":                                       "test !has(args.ship) instead",
			"has(args.bill) && args.bill == null":                     "test !has(args.bill) instead",
			"has(args.tags) && args.tags == null":                     "test !has(args.tags) instead",
		} {
			_, iss := env.Check(src)
			require.NotEmpty(t, iss, "%s: %s", name, src)
			assert.Equal(t, RuleType, iss[0].Rule, "%s: %s", name, src)
			assert.Contains(t, iss[0].Message, want, "%s: %s", name, src)
		}
	}
}

func TestCheckGeneratedSchemasIntegers(t *testing.T) {
	// pydantic types an IntEnum and Literal[1, 2, 3] as integer; zod types
	// a union of number literals as number with an enum of integers: both
	// compare with an int.
	for _, name := range generatedSchemas {
		env := toolEnv(t, name)
		_, iss := env.Check("has(args.priority) && args.priority == 2")
		assert.Empty(t, iss, name)
	}
	_, iss := toolEnv(t, "pydantic_order").Check("has(args.level) && args.level == 'low'")
	require.NotEmpty(t, iss)
	assert.Contains(t, iss[0].Message, "applied to '(int, string)'")
}

// TestEvalGeneratedSchemas evaluates guards on the arguments a client
// sends, nulls included: a null reads as absent, never fails open and
// never crashes.
func TestEvalGeneratedSchemas(t *testing.T) {
	cases := []struct {
		src  string
		args string
		want bool
	}{
		{"has(args.note) && args.note == 'a'", `{"note": null}`, false},
		{"has(args.note) && args.note == 'a'", `{}`, false},
		{"has(args.note) && args.note == 'a'", `{"note": "a"}`, true},
		{"!has(args.note)", `{"note": null}`, true},

		{"has(args.count) && args.count > 1", `{"count": 2}`, true},
		{"has(args.count) && args.count > 1", `{"count": null}`, false},
		{"has(args.bill) && args.bill.zip == '1'", `{"bill": null}`, false},
		{"has(args.bill) && args.bill.zip == '1'", `{"bill": {"zip": "1", "country": null}}`, true},
		{"has(args.bill) && has(args.bill.country)", `{"bill": {"zip": "1", "country": null}}`, false},
		{"args.lines.exists(i, i.sku == 'x' && i.qty > 2)", `{"lines": [{"sku": "x", "qty": 3}]}`, true},
		{"has(args.labels) && 'env' in args.labels && args.labels['env'] == 'prod'", `{"labels": {"env": "prod"}}`, true},
		{"has(args.priority) && args.priority == 2", `{"priority": 2}`, true},
		{"has(args.pair) && args.pair[0] == 'a'", `{"pair": ["a", 1]}`, true},
		{"has(args.payment) && args.payment.method == 'card' && has(args.payment.last4) && args.payment.last4 == '1234'",
			`{"payment": {"method": "card", "last4": "1234"}}`, true},
		{"has(args.payment) && args.payment.method == 'card' && has(args.payment.last4) && args.payment.last4 == '1234'",
			`{"payment": {"method": "bank", "iban": "FR76"}}`, false},
		{"has(args.payment) && args.payment.method == 'card'", `{"payment": null}`, false},
		{"has(args.tags) && 'vip' in args.tags", `{"tags": null}`, false},
		{"has(args.tags) && 'vip' in args.tags", `{"tags": ["vip"]}`, true},
	}
	for _, name := range generatedSchemas {
		env := toolEnv(t, name)
		for _, c := range cases {
			p := mustCompile(t, env, c.src)
			for _, args := range []map[string]any{jsonArgs(t, c.args), jsonNumberArgs(t, c.args)} {
				got, err := p.Eval(context.Background(), &ToolVars{Args: args})
				require.NoError(t, err, "%s: %s on %s", name, c.src, c.args)
				assert.Equal(t, c.want, got, "%s: %s on %s", name, c.src, c.args)
			}
		}
	}
}

// TestCheckSchemaShapes: the shapes generators write, one at a time.
func TestCheckSchemaShapes(t *testing.T) {
	cases := []struct {
		name, schema string
		clean        []string
		errs         map[string]string
	}{{
		// pydantic v1 wraps a referenced model in allOf to give it a
		// description, and keeps its models under definitions.
		name: "allOf $ref under definitions",
		schema: `{"title": "Order", "type": "object", "definitions": {"Address": {"title": "Address", "type": "object",
			"properties": {"zip": {"title": "Zip", "type": "string"}}, "required": ["zip"]}},
			"properties": {"ship": {"title": "Ship", "description": "where it goes", "allOf": [{"$ref": "#/definitions/Address"}]}},
			"required": ["ship"]}`,
		clean: []string{"args.ship.zip == '1'"},
		errs:  map[string]string{"args.ship.zipp == '1'": "did you mean 'zip'?"},
	}, {
		name: "OpenAPI 3.0 nullable",
		schema: `{"type": "object", "required": ["note", "addr"], "properties": {"note": {"type": "string", "nullable": true},
			"addr": {"allOf": [{"$ref": "#/components/schemas/Addr"}], "nullable": true}},
			"components": {"schemas": {"Addr": {"type": "object", "properties": {"zip": {"type": "string"}}}}}}`,
		clean: []string{"has(args.note) && args.note == 'a'", "has(args.addr) && has(args.addr.zip)"},
		errs: map[string]string{
			"args.note == 'a'":                      "args.note is optional",
			"has(args.addr) && has(args.addr.zipp)": "did you mean 'zip'?",
		},
	}, {
		// Go's jsonschema-go writes a pointer field as type ["null", "string"].
		name:   "type list with null first",
		schema: `{"type": "object", "required": ["note"], "properties": {"note": {"type": ["null", "string"]}}}`,
		clean:  []string{"has(args.note) && args.note.startsWith('a')"},
		errs:   map[string]string{"args.note.startsWith('a')": "args.note is optional"},
	}, {
		name:   "oneOf with null",
		schema: `{"type": "object", "properties": {"n": {"oneOf": [{"type": "null"}, {"type": "integer"}]}}}`,
		clean:  []string{"has(args.n) && args.n > 1"},
		errs:   map[string]string{"has(args.n) && args.n == 'x'": "applied to '(int, string)'"},
	}, {
		name: "enum and const without type",
		schema: `{"type": "object", "required": ["level", "ratio", "flag", "mode", "opt"], "properties": {
			"level": {"enum": [1, 2, 3]}, "ratio": {"enum": [0.5, 1]}, "flag": {"const": true},
			"mode": {"const": "fast"}, "opt": {"enum": ["a", null]}, "mixed": {"enum": [1, "a"]}}}`,
		clean: []string{"args.level == 2", "args.ratio > 0.7", "args.flag", "args.mode == 'fast'",
			"has(args.opt) && args.opt == 'a'", "has(args.mixed) && args.mixed == 1", "has(args.mixed) && args.mixed == 'a'"},
		errs: map[string]string{
			"args.level == 'a'":  "applied to '(int, string)'",
			"args.mode == 1":     "applied to '(string, int)'",
			"args.opt == 'a'":    "args.opt is optional",
			"args.ratio == 'x'":  "applied to '(double, string)'",
			"args.flag == 'yes'": "applied to '(bool, string)'",
		},
	}, {
		name: "refs to refs and a $ref beside properties",
		schema: `{"type": "object", "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}},
			"properties": {"a": {"$ref": "#/$defs/A"}, "ext": {"$ref": "#/$defs/B", "properties": {"y": {"type": "integer"}}, "required": ["y"]}},
			"required": ["a", "ext"]}`,
		clean: []string{"args.a.x == 's'", "args.ext.x == 's' && args.ext.y > 1"},
		errs:  map[string]string{"args.a.xx == 's'": "did you mean 'x'?", "args.ext.z == 1": "undefined field 'z'"},
	}, {
		// What a schema of another document may add is not known: the
		// object is not closed on the fields it declares here.
		name: "allOf with a reference to another document",
		schema: `{"type": "object", "properties": {"o": {"allOf": [{"$ref": "base.json"}, {"properties": {"a": {"type": "string"}}}]},
			"s": {"allOf": [{"$ref": "base.json"}, {"type": "string"}]}}}`,
		clean: []string{"has(args.o) && args.o.b == 1", "has(args.s) && args.s.startsWith('a')"},
		errs:  map[string]string{"has(args.s) && args.s == 1": "applied to '(string, int)'"},
	}, {
		name:   "allOf of objects",
		schema: `{"type": "object", "required": ["o"], "properties": {"o": {"type": "object", "allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}, {"properties": {"b": {"type": "integer"}}}]}}}`,
		clean:  []string{"args.o.a == 'x' && has(args.o.b) && args.o.b > 1"},
		errs:   map[string]string{"args.o.c == 1": "undefined field 'c'", "args.o.b > 1": "args.o.b is optional"},
	}, {
		name:   "anyOf of kinds that differ is dyn",
		schema: `{"type": "object", "required": ["v"], "properties": {"v": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}}`,
		clean:  []string{"args.v == 'a' || args.v == 1"},
	}, {
		name:   "prefixItems",
		schema: `{"type": "object", "required": ["p"], "properties": {"p": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "maxItems": 2}}}`,
		clean:  []string{"args.p[0] == 'a' && args.p[1] == 1"},
		errs:   map[string]string{"args.p.size() == 'a'": "applied to '(int, string)'"},
	}}
	for _, c := range cases {
		env := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(c.schema)}})
		for _, src := range c.clean {
			_, iss := env.Check(src)
			assert.Empty(t, iss, "%s: %s", c.name, src)
		}
		for src, want := range c.errs {
			_, iss := env.Check(src)
			require.NotEmpty(t, iss, "%s: %s", c.name, src)
			assert.Contains(t, iss[0].Message, want, "%s: %s", c.name, src)
		}
	}
}

// TestEvalNullElements: a null in a list whose elements the schema lets be
// null stays null; a null value of a map reads as absent; the numbers
// around them are still converted.
func TestEvalNullElements(t *testing.T) {
	env := mustEnv(t, EnvConfig{Stage: Tool, ArgsSchemas: []json.RawMessage{json.RawMessage(`{"type": "object", "required": ["m", "l"],
		"properties": {"m": {"type": "object", "additionalProperties": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
		"l": {"type": "array", "maxItems": 4, "items": {"type": ["integer", "null"]}}}}`)}})
	p := mustCompile(t, env, "args.m['a'] == 2 && !has(args.m.b) && args.m[?'b'].orValue(7) == 7 && size(args.m) == 1 && args.l[0] == 1 && args.l[1] == null")
	_, iss := env.Check("args.m['b'] == null")
	require.NotEmpty(t, iss, "a map's null value reads as absent: comparing it with null is refused")
	for _, args := range []map[string]any{
		jsonArgs(t, `{"m": {"a": 2, "b": null}, "l": [1, null]}`),
		jsonNumberArgs(t, `{"m": {"a": 2, "b": null}, "l": [1, null]}`),
	} {
		got, err := p.Eval(context.Background(), &ToolVars{Args: args})
		require.NoError(t, err)
		assert.True(t, got)
	}
}
