package dsl

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two properties of one object of a tool's args schema whose names differ
// only in case (Unicode case folding, as encoding/json matches a struct's
// field) are an error at the second written, wherever the object sits
// (nested, under items), and each name after the first is one finding. A
// schema given as a JSON string is reported at the field. Properties of
// different objects, and names that differ otherwise, are not.
func TestCaseCollidingProperties(t *testing.T) {
	_, diags, got := loadSnippet(t, `tools: refund: {args: {
	type: "object"
	properties: {
		amount: {type: "number"}
		order_id: {type: "string"}
		Amount: {type: "number"}
		AMOUNT: {type: "number"}
		line: {type: "object", properties: {sku: {type: "string"}, other: {type: "object", properties: {SKU: {type: "string"}}}}}
		lines: {type: "array", items: {type: "object", properties: {ſku: {type: "string"}, sku: {type: "string"}}}}
		amount_2: {type: "number"}
	}
}}
`)
	assert.Equal(t, []string{
		"8:3 schema/case-collision",   // Amount, after amount
		"9:3 schema/case-collision",   // AMOUNT
		"11:87 schema/case-collision", // sku, after ſku (U+017F folds to s)
	}, got)
	require.Len(t, diags, 3)
	assert.Contains(t, diags[0].Message, `tools.refund.args.properties.Amount: differs only in case from the property "amount"`)
	assert.Equal(t, Error, diags[0].Severity)

	// A schema read from a file: in the file, the names in the file's order.
	dir := writePolicy(t, map[string]string{
		"p.cue":      "package p\n\ntools: fetch: {args: \"fetch.json\"}\n",
		"fetch.json": `{"type": "object", "properties": {"url": {"type": "string"}, "URL": {"type": "string"}}}`,
	})
	_, diags, err := Load(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	require.Len(t, diags, 1, "%v", diags)
	assert.Equal(t, ruleCaseCollision, diags[0].Rule)
	assert.Equal(t, Pos{File: filepath.Join(dir, "fetch.json"), Line: 1, Col: 69}, diags[0].Pos)
	assert.Contains(t, diags[0].Message, `tools.fetch.args.properties.URL: differs only in case from the property "url"`)
}

// Properties of one object declared in different allOf branches (or one
// beside the object's own properties) are one object's: twins that
// differ only in case are an error at the second written, once, also
// through nested allOf. Twins in two anyOf alternatives are not reported.
func TestCaseCollidingPropertiesAcrossAllOf(t *testing.T) {
	_, diags, got := loadSnippet(t, `tools: refund: {args: {
	type: "object"
	properties: amount: {type: "number"}
	allOf: [
		{properties: {orderId: {type: "string"}}},
		{properties: {orderid: {type: "string"}, note: {type: "string"}}},
		{allOf: [{properties: {Amount: {type: "number"}}}]},
	]
	anyOf: [
		{properties: {code: {type: "string"}}},
		{properties: {Code: {type: "string"}}},
	]
}}
`)
	assert.Equal(t, []string{
		"8:17 schema/case-collision", // orderid, after orderId in another branch
		"9:26 schema/case-collision", // Amount, after the object's own amount
	}, got)
	require.Len(t, diags, 2)
	assert.Contains(t, diags[0].Message, `tools.refund.args.allOf[1].properties.orderid: differs only in case from the property "orderId"`)

	// A schema read from a file: in the file, at the second twin.
	dir := writePolicy(t, map[string]string{
		"p.cue":      "package p\n\ntools: fetch: {args: \"fetch.json\"}\n",
		"fetch.json": `{"type": "object", "allOf": [{"properties": {"url": {"type": "string"}}}, {"properties": {"URL": {"type": "string"}}}]}`,
	})
	_, diags, err := Load(context.Background(), []string{dir}, Options{})
	require.NoError(t, err)
	require.Len(t, diags, 1, "%v", diags)
	assert.Equal(t, ruleCaseCollision, diags[0].Rule)
	assert.Equal(t, Pos{File: filepath.Join(dir, "fetch.json"), Line: 1, Col: 98}, diags[0].Pos)
}

// A property that two parts of an object declare (its own properties and
// an allOf branch, or two branches, through nested allOf too) is one
// value that both schemas describe: twins across their properties are an
// error at the second written, at any depth, once. Twins within one part
// are reported once, where that part is visited; the same name in two
// parts is one property.
func TestCaseCollidingPropertiesOfAPropertyAcrossAllOf(t *testing.T) {
	_, diags, got := loadSnippet(t, `tools: refund: {args: {
	type: "object"
	properties: line: {type: "object", properties: {sku: {type: "string"}, qty: {type: "integer"}}}
	allOf: [
		{properties: {line: {properties: {SKU: {type: "string"}, qty: {type: "integer"}}}}},
		{allOf: [
			{properties: {meta: {properties: {by: {type: "object", properties: {id: {type: "string"}}}}}}},
			{properties: {meta: {properties: {by: {properties: {ID: {type: "string"}}}}}}},
		]},
		{properties: {other: {properties: {a: {type: "string"}}}}},
		{properties: {other2: {properties: {A: {type: "string"}}}}},
	]
}}
`)
	assert.Equal(t, []string{
		"7:37 schema/case-collision",  // line.SKU, after the object's own line.sku
		"10:56 schema/case-collision", // meta.by.ID, in the other nested branch
	}, got)
	require.Len(t, diags, 2)
	assert.Contains(t, diags[0].Message, `tools.refund.args.allOf[0].properties.line.properties.SKU: differs only in case from the property "sku"`)
}
