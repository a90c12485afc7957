package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A comparison of a typed field with a constant of another type is placed
// at the constant, with the constant to write instead.
func TestComparisonTypeMismatch(t *testing.T) {
	dir := writePolicy(t, `package p

tools: t: {args: {type: "object", required: ["amount", "count", "id"], properties: {amount: type: "number", count: type: "integer", id: type: "string", ok: type: "boolean"}}}
chains: tool: [
	{use: "guard", name: "a", tools: ["t"], deny: "args.amount == 0"},
	{use: "guard", name: "b", tools: ["t"], deny: "args.count != 5.0"},
	{use: "guard", name: "c", tools: ["t"], deny: "args.count == 1.5"},
	{use: "guard", name: "d", tools: ["t"], deny: "5 == args.id"},
	{use: "guard", name: "e", tools: ["t"], deny: "has(args.ok) && args.ok == 'true'"},
	{use: "guard", name: "f", tools: ["t"], deny: "args.amount > '100'"},
	{use: "guard", name: "g", tools: ["t"], deny: "args.amount > 10 && args.count > 1.5"},
]
chains: chat: [{use: "guard", name: "h", deny: "request.max_tokens == 4000.0"}]
`)
	_, got := compileDiagnostics(t, dir, "cel/type", true)
	pre := " cel/type: found no matching overload for "
	assert.Equal(t, []string{
		"5:64" + pre + "'_==_' applied to '(double, int)'; args.amount is a double (a JSON Schema number) and 0 an int: CEL's == compares values of one type, so write 0.0",
		"6:63" + pre + "'_!=_' applied to '(int, double)'; args.count is an int (a JSON Schema integer) and 5.0 a double: CEL's != compares values of one type, so write 5",
		"7:63" + pre + "'_==_' applied to '(int, double)'; args.count is an int (a JSON Schema integer) and 1.5 a double: CEL's == compares values of one type, so write double(args.count) == 1.5",
		"8:49" + pre + "'_==_' applied to '(int, string)'; args.id is a string and 5 an int: CEL's == compares values of one type, so write '5'",
		"9:76" + pre + "'_==_' applied to '(bool, string)'; args.ok is a bool and 'true' a string: CEL's == compares values of one type, so write true",
		"10:63" + pre + "'_>_' applied to '(double, string)'; args.amount is a double (a JSON Schema number) and '100' a string: CEL's > compares values of one type, so write 100.0",
		"13:71" + pre + "'_==_' applied to '(int, double)'; request.max_tokens is an int and 4000.0 a double: CEL's == compares values of one type, so write 4000",
	}, got)
}

// An int and a double compared with ==, != or in, a field with a field or
// a field with a list of constants, get the same hint as a constant does:
// what to write so that both sides are of one type.
func TestNumberEqualityTypeMismatch(t *testing.T) {
	dir := writePolicy(t, `package p

tools: t: {args: {type: "object", required: ["amount", "count"], properties: {amount: type: "number", count: type: "integer"}}}
chains: tool: [
	{use: "guard", name: "a", tools: ["t"], deny: "args.amount in [100, 200]"},
	{use: "guard", name: "b", tools: ["t"], deny: "args.amount == args.count"},
	{use: "guard", name: "c", tools: ["t"], deny: "args.count != args.amount"},
	{use: "guard", name: "d", tools: ["t"], deny: "args.count in [1.5, 2.0]"},
]
`)
	_, got := compileDiagnostics(t, dir, "cel/type", true)
	pre := " cel/type: found no matching overload for "
	assert.Equal(t, []string{
		"5:64" + pre + "'@in' applied to '(double, list(int))'; args.amount is a double (a JSON Schema number) and [100, 200] a list of ints: CEL's in compares values of one type, so write [100.0, 200.0]",
		"6:61" + pre + "'_==_' applied to '(double, int)'; args.amount is a double (a JSON Schema number) and args.count an int (a JSON Schema integer): CEL's == compares values of one type, so write args.amount == double(args.count)",
		"7:60" + pre + "'_!=_' applied to '(int, double)'; args.count is an int (a JSON Schema integer) and args.amount a double (a JSON Schema number): CEL's != compares values of one type, so write double(args.count) != args.amount",
		"8:63" + pre + "'@in' applied to '(int, list(double))'; args.count is an int (a JSON Schema integer) and [1.5, 2.0] a list of doubles: CEL's in compares values of one type, so write double(args.count) in [1.5, 2.0]",
	}, got)
}
