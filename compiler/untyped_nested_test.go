package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A guard scoped to a tool whose args schema leaves an object argument
// open (no properties) reads its fields untyped: a misspelt field and a
// value of the wrong type (sudo: "true") pass unnoticed, as they do in
// an untyped args, and vet says so at the read.
func TestUntypedArgsBelowOpenObject(t *testing.T) {
	dir := writePolicy(t, `package p

tools: transfer: {
	side_effecting: true
	args: {type: "object", required: ["opts", "amount", "labels", "meta"], properties: {
		opts: {type: "object"}
		amount: {}
		labels: {type: "object", additionalProperties: {type: "string"}}
		meta: {type: "object", additionalProperties: true}
		to: {type: "object", properties: iban: type: "string"}
	}}
}
chains: tool: [
	{use: "guard", name: "no_sudo", tools: ["transfer"], deny: "has(args.opts.sudo) && args.opts.sudo == true"},
	{use: "guard", name: "typo", tools: ["transfer"], deny: "has(args.opts.admn)"},
	{use: "guard", name: "limit", tools: ["transfer"], deny: "args.amount > 100.0"},
	{use: "guard", name: "below", tools: ["transfer"], deny: "args.amount.value > 100.0"},
	{use: "guard", name: "labels", tools: ["transfer"], deny: "has(args.labels.env) && args.labels.env == 'prod'"},
	{use: "guard", name: "meta", tools: ["transfer"], deny: "has(args.meta.x) && args.meta.x == 1"},
	{use: "guard", name: "to", tools: ["transfer"], deny: "has(args.to) && has(args.to.iban) && args.to.iban == ''"},
]
`)
	c, got := compileDiagnostics(t, dir, "cel/untyped-args", false)
	assert.Equal(t, []string{
		"14:76 cel/untyped-args",
		"15:73 cel/untyped-args",
		"17:72 cel/untyped-args",
		"19:73 cel/untyped-args",
	}, got, "%v", c.Diagnostics)
	_, msgs := compileDiagnostics(t, dir, "cel/untyped-args", true)
	require.Len(t, msgs, 4)
	assert.Contains(t, msgs[0], "args.opts.sudo")
	assert.Contains(t, msgs[0], "no tool schema types it")
}

// An element of a list argument whose schema leaves it open (items an
// object without properties, or no items at all) is read untyped too,
// whether by index or through a macro's variable: vet says so at the read.
// A list whose items' properties are declared is typed, and clean.
func TestUntypedArgsInsideList(t *testing.T) {
	dir := writePolicy(t, `package p

tools: transfer: {
	side_effecting: true
	args: {type: "object", required: ["items", "any", "typed"], properties: {
		items: {type: "array", items: {type: "object"}}
		any: {type: "array"}
		typed: {type: "array", items: {type: "object", required: ["x"], properties: x: type: "integer"}}
	}}
}
chains: tool: [
	{use: "guard", name: "a", tools: ["transfer"], deny: "args.items.exists(i, has(i.sudo) && i.sudo == true)"},
	{use: "guard", name: "b", tools: ["transfer"], deny: "args.any.exists(i, i.x == 1)"},
	{use: "guard", name: "c", tools: ["transfer"], deny: "size(args.any) > 0 && args.any[0].x == 1"},
	{use: "guard", name: "d", tools: ["transfer"], deny: "args.items.map(i, i.x).exists(x, x == 1)"},
	{use: "guard", name: "ok1", tools: ["transfer"], deny: "args.typed.exists(i, i.x == 1)"},
	{use: "guard", name: "ok2", tools: ["transfer"], deny: "args.typed.all(i, i.x > 1) && size(args.any) > 2"},
]
`)
	c, got := compileDiagnostics(t, dir, "cel/untyped-args", false)
	assert.Equal(t, []string{
		"12:83 cel/untyped-args",
		"13:77 cel/untyped-args",
		"14:90 cel/untyped-args",
		"15:76 cel/untyped-args",
	}, got, "%v", c.Diagnostics)
	_, msgs := compileDiagnostics(t, dir, "cel/untyped-args", true)
	require.Len(t, msgs, 4)
	assert.Contains(t, msgs[0], "args.items[].sudo")
	assert.Contains(t, msgs[2], "args.any[0].x")
}
