package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/dsl"
)

// A presence test is read as what it is: has(x) and !has(x) cannot both
// hold (&&), one of them always does (||), and has() of an args field the
// schema requires (at every level, with a type that rejects null) always
// holds, since the tool chain checks the arguments against the schema
// before any layer runs. A guard's deny read with its when that tests the
// same field (when: has(x), deny: ... && !has(x)) never blocks. A field
// that is optional, untyped (null passes, and reads as absent) or below
// an optional object decides nothing.
func TestConstantPresenceTests(t *testing.T) {
	dir := writePolicy(t, `package p

tools: refund: {side_effecting: true, args: {type: "object", required: ["order_id", "amount", "meta", "loose"], properties: {order_id: {type: "string"}, amount: {type: "number"}, approved_by: {type: "string"}, loose: {}, meta: {type: "object", required: ["by"], properties: {by: {type: "string"}, why: {type: "string"}}}}}}
chains: tool: [
	{use: "guard", name: "approver", tools: ["refund"], when: "has(args.approved_by)", deny: "args.amount > 100.0 && !has(args.approved_by)"},
	{use: "guard", name: "both", tools: ["refund"], deny: "args.amount > 100.0 && !has(args.approved_by) && has(args.approved_by)"},
	{use: "guard", name: "required_when", tools: ["refund"], when: "!has(args.order_id)", deny: "args.amount > 100.0"},
	{use: "guard", name: "required_deny", tools: ["refund"], deny: "args.amount > 100.0 && !has(args.meta.by)"},
	{use: "guard", name: "either", tools: ["refund"], require: "has(args.approved_by) || !has(args.approved_by)"},
	{use: "guard", name: "required_or", tools: ["refund"], deny: "has(args.order_id) || args.amount > 100.0"},
	{use: "guard", name: "optional", tools: ["refund"], deny: "args.amount > 100.0 && !has(args.approved_by)"},
	{use: "guard", name: "optional_nested", tools: ["refund"], deny: "args.amount > 100.0 && !has(args.meta.why)"},
	{use: "guard", name: "untyped", tools: ["refund"], deny: "!has(args.loose)"},
	{use: "guard", name: "required_read", tools: ["refund"], require: "!has(args.approved_by) || args.amount < 100.0"},
	{use: "guard", name: "required_and", tools: ["refund"], when: "has(args.order_id) && args.amount > 5.0", deny: "args.amount > 100.0 && has(args.order_id)"},
]
`)
	_, got := compileDiagnostics(t, dir, ruleConstant, false)
	assert.Equal(t, []string{
		"5:115 cel/constant", // the deny's !has, where the when's has holds
		"6:106 cel/constant", // has(x) after !has(x)
		"7:67 cel/constant",  // when: !has of a required field
		"8:90 cel/constant",  // !has of a required nested field
		"9:87 cel/constant",  // has(x) || !has(x)
		"10:64 cel/constant", // || has() of a required field: blocks every call
	}, got)
	c, _ := compileDiagnostics(t, dir, ruleConstant, true)
	for _, d := range c.Diagnostics {
		if d.Pos.Line == 5 {
			assert.Equal(t, dsl.Error, d.Severity)
			assert.Contains(t, d.Message, "has(args.approved_by) and !has(args.approved_by) cannot both hold")
		}
		if d.Pos.Line == 10 {
			assert.Equal(t, dsl.Warning, d.Severity)
			assert.Contains(t, d.Message, "requires args.order_id")
		}
	}
}

// Presence tests that look like a test beside its negation but are not
// one are not constant: two different paths (has(a.b) || !has(a.c)),
// the same name bound by different macros (each all() tests its own
// element), a negation in a nested macro whose variable shadows the
// outer one, and a macro variable that shadows args, whose element field
// the schema does not require, though args' own field of that name it does.
func TestConstantPresenceLookalikes(t *testing.T) {
	dir := writePolicy(t, `package p

tools: refund: {side_effecting: true, args: {type: "object", required: ["amount", "lines", "meta"], properties: {amount: {type: "number"}, meta: {type: "object", properties: {by: {type: "string"}, why: {type: "string"}}}, lines: {type: "array", items: {type: "object", properties: {amount: {type: "number"}, sku: {type: "string"}}}}}}}
chains: tool: [
	{use: "guard", name: "paths", tools: ["refund"], deny: "has(args.meta.by) || !has(args.meta.why)"},
	{use: "guard", name: "macros", tools: ["refund"], deny: "args.lines.all(l, has(l.sku)) || args.lines.all(l, !has(l.sku))"},
	{use: "guard", name: "nested", tools: ["refund"], deny: "args.lines.exists(l, has(l.sku) && args.lines.exists(l, !has(l.sku)))"},
	{use: "guard", name: "shadow", tools: ["refund"], deny: "args.lines.exists(args, !has(args.amount))"},
	{use: "guard", name: "shadow_or", tools: ["refund"], deny: "args.amount > 5.0 && args.lines.exists(args, has(args.amount) || has(args.sku))"},
	{use: "guard", name: "same", tools: ["refund"], deny: "args.lines.exists(l, has(l.sku) || !has(l.sku))"},
]
`)
	_, got := compileDiagnostics(t, dir, ruleConstant, false)
	assert.Equal(t, []string{
		"10:92 cel/constant", // one macro, one variable: !has(l.sku) after has(l.sku)
	}, got)
}
