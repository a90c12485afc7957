package compiler

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each guard form bounds the size as the read needs, and the severity
// says whether something else in the predicate can decide it first.
func TestUncheckedIndexes(t *testing.T) {
	anyList := func(path, root string, vars map[string]bool) (int64, bool) { return 0, true }
	const l = "response.tool_calls"
	for _, tc := range []struct {
		src, when string
		want      []indexRead // offset left out
	}{
		{src: "l[0].name == 'a'", want: []indexRead{{list: "l", index: 0, certain: true}}},
		{src: "l[0].name == 'a' && l[0].args.x > 1.0", want: []indexRead{{list: "l", index: 0, certain: true}}},
		{src: "x == 'a' && l[0].name == 'a'", want: []indexRead{{list: "l", index: 0}}},
		{src: "size(l) > 0 && l[0].name == 'a'"},
		{src: "l[0].name == 'a' && 0 < size(l)"},
		{src: "size(l) >= 1 && l[0].name == 'a'"},
		{src: "size(l) >= 1 && l[1].name == 'a'", want: []indexRead{{list: "l", index: 1}}},
		{src: "size(l) == 2 && l[1].name == 'a'"},
		{src: "l.size() != 0 && l[0].name == 'a'"},
		{src: "!(size(l) == 0) && l[0].name == 'a'"},
		{src: "!(size(l) == 0 || x) && l[0].name == 'a'"},
		{src: "size(l) <= 1 || l[1].name == 'a'"},
		{src: "!(size(l) > 1) || l[1].name == 'a'"},
		{src: "size(l) < 1 || l[1].name == 'a'", want: []indexRead{{list: "l", index: 1}}},
		{src: "size(l) > 0 ? l[0].name == 'a' : false"},
		{src: "size(l) == 0 ? false : l[0].name == 'a'"},
		{src: "x ? l[0].name == 'a' : false", want: []indexRead{{list: "l", index: 0}}},
		{src: "l.exists(c, c.name == 'a') && l[0].name == 'a'"},
		{src: "!l.all(c, c.name == 'a') && l[0].name == 'a'"},
		{src: "size(m) > 0 && l[0].name == 'a'", want: []indexRead{{list: "l", index: 0}}},
		{src: "l[?0].name.orValue('') == 'a'"},
		{src: "l[size(l) - 1].name == 'a'"},
		{src: "l.exists(l, l[0] == 'a')", want: []indexRead{{list: "l", index: 0}}},
		{src: "size(l) > 0 && ms.exists(l, l[0] == 'a')", want: []indexRead{{list: "l", index: 0}}},
		{src: "l[0].name == 'a'", when: "size(l) > 0"},
		{src: "l[0].name == 'a'", when: "l != []", want: []indexRead{{list: "l", index: 0}}},
		{src: "l[0].name == 'a'", when: "'a' in l.map(c, c.name)"},
		{src: "l[0].name == 'a'", when: "l.exists_one(c, c.name == 'a')"},
		{src: "l[0].name == 'a'", when: "l.filter(c, c.name == 'a').size() > 0", want: []indexRead{{list: "l", index: 0}}},
		{src: "l[0].name == 'a'", when: "m != []", want: []indexRead{{list: "l", index: 0, certain: true}}},
		{src: l + "[0].name == 'a'", want: []indexRead{{list: l, index: 0, certain: true}}},
		// Other forms of the size test.
		{src: "1 <= size(l) && l[0].name == 'a'"},
		{src: "0 != l.size() && l[0].name == 'a'"},
		{src: "size(l) > 0u && l[0].name == 'a'"},
		{src: "size(l) >= 0.5 && l[0].name == 'a'"},
		{src: "size(l) > 0.5 && l[1].name == 'a'", want: []indexRead{{list: "l", index: 1}}},
		{src: "!(size(l) < 2) && l[1].name == 'a'"},
		{src: "size(l) <= 0.5 || l[0].name == 'a'"},
		{src: "l.exists_one(c, c.name == 'a') && l[0].name == 'a'"},
		// A negative index fails on every list, whatever its size; a
		// constant expression is its value.
		{src: "l[-1].name == 'a'", want: []indexRead{{list: "l", index: -1, certain: true}}},
		{src: "size(l) > 0 && l[-1].name == 'a'", want: []indexRead{{list: "l", index: -1}}},
		// l[0] may be false on a list with an element, and decide the &&
		// before l[-1] fails; where l is empty, both fail.
		{src: "l[0].name == 'a' && l[-1].name == 'b'", want: []indexRead{{list: "l", index: 0, certain: true}, {list: "l", index: -1}}},
		{src: "l[-1].name == 'a' && l[-2].name == 'b'", want: []indexRead{{list: "l", index: -1, certain: true}, {list: "l", index: -2, certain: true}}},
		{src: "l[-1].name == 'a'", when: "size(l) > 0", want: []indexRead{{list: "l", index: -1, certain: true}}},
		{src: "l[1 - 1].name == 'a'", want: []indexRead{{list: "l", index: 0, certain: true}}},
		{src: "l[2 * 3 - 5].name == 'a'", want: []indexRead{{list: "l", index: 1, certain: true}}},
		{src: "size(l) > 0 && l[1 - 1].name == 'a'"},
		{src: "l[9223372036854775807 + 1].name == 'a'"},
		// An element of a filter() fails where no element matches: the
		// filter's own size, or an exists() with its condition, guards it.
		{src: "l.filter(c, c.name == 'a')[0].x > 1", want: []indexRead{{list: "l.filter(c, c.name == 'a')", index: 0, certain: true}}},
		{src: "l.filter(c, c.name == 'a').size() > 0 && l.filter(c, c.name == 'a')[0].x > 1"},
		{src: "size(l.filter(c, c.name == 'a')) > 0 && l.filter(d, d.name == 'a')[0].x > 1"},
		{src: "l.exists(c, c.name == 'a') && l.filter(c, c.name == 'a')[0].x > 1"},
		{src: "l.exists(d, d.name == 'a') && l.filter(c, c.name == 'a')[0].x > 1"},
		{src: "l.exists_one(c, c.name == 'a') && l.filter(c, c.name == 'a')[0].x > 1"},
		{src: "l.filter(c, c.name == 'a').exists(c, c.x > 1) && l.filter(c, c.name == 'a')[0].x > 1"},
		{src: "l.exists(c, c.name == 'b') && l.filter(c, c.name == 'a')[0].x > 1", want: []indexRead{{list: "l.filter(c, c.name == 'a')", index: 0}}},
		{src: "l.exists(c, c.name == 'a' && c.x > 1) && l.filter(c, c.name == 'a')[0].x > 1"},
		{src: "l.exists(c, c.x > 1 && c.name == 'a' && c.y) && l.filter(c, c.name == 'a')[0].x > 1"},
		{src: "l.exists(c, c.name == 'a' || c.x > 1) && l.filter(c, c.name == 'a')[0].x > 1", want: []indexRead{{list: "l.filter(c, c.name == 'a')", index: 0}}},
		{src: "l.exists(c, c.name == 'a') && l.filter(c, c.name == 'a' && c.x > 1)[0].x > 1", want: []indexRead{{list: "l.filter(c, c.name == 'a' && c.x > 1)", index: 0}}},
		{src: "m.exists(c, c.name == 'a') && l.filter(c, c.name == 'a')[0].x > 1", want: []indexRead{{list: "l.filter(c, c.name == 'a')", index: 0}}},
		{src: "size(l) > 0 && l.filter(c, c.name == 'a')[0].x > 1", want: []indexRead{{list: "l.filter(c, c.name == 'a')", index: 0}}},
		{src: "l.exists(c, c.name == 'a') && l.filter(c, c.name == 'a')[1].x > 1", want: []indexRead{{list: "l.filter(c, c.name == 'a')", index: 1}}},
		{src: "size(l.filter(c, c.name == 'a')) > 1 && l.filter(c, c.name == 'a')[1].x > 1"},
		{src: "l.filter(c, c.name == 'a')[?0].x.orValue(0) > 1"},
		{src: "l.filter(c, c.name == 'a').map(c, c.x)[0] > 1", want: []indexRead{{list: "l.filter(c, c.name == 'a').map(c, c.x)", index: 0, certain: true}}},
		{src: "l.exists(c, c.name == 'a') && l.filter(c, c.name == 'a').map(c, c.x)[0] > 1"},
		{src: "l.map(c, c.name == 'a', c.x)[0] > 1", want: []indexRead{{list: "l.map(c, c.name == 'a', c.x)", index: 0, certain: true}}},
		{src: "l.exists(c, c.name == 'a') && l.map(c, c.name == 'a', c.x)[0] > 1"},
		{src: "[1, 2].filter(x, x > 1)[0] == 2", want: []indexRead{{list: "[1, 2].filter(x, x > 1)", index: 0, certain: true}}},
		{src: "ms.exists(m, m.calls.exists(c, c.name == 'a') && m.calls.filter(c, c.name == 'a')[0].x > 1)"},
		{src: "ms.all(m, m.calls.exists(c, c.name == 'a') && ms.exists(m, m.calls.filter(c, c.name == 'a')[0].x > 1))",
			want: []indexRead{{list: "m.calls.filter(c, c.name == 'a')", index: 0}}},
		{src: "l.filter(c, c.name == 'a')[0].x > 1", when: "l.exists(c, c.name == 'a')"},
		{src: "l.filter(c, c.name == 'a')[0].x > 1", when: "'a' in l.map(c, c.name)"},
		{src: "l.filter(c, c.name == 'a')[0].x > 1", when: "'a' in l.map(c, c.name + 'b')", want: []indexRead{{list: "l.filter(c, c.name == 'a')", index: 0}}},
		{src: "l.filter(c, c.name == 'a')[0].x > 1", when: "m != []", want: []indexRead{{list: "l.filter(c, c.name == 'a')", index: 0, certain: true}}},
		// A size converted to a double or an int is the size; == and !=
		// read alike with their sides swapped; a false all(c, !P) holds
		// only where an element has P; x in l only where l has an element,
		// and x in l.map(c, f) only where one has f == x.
		{src: "double(size(l)) > 0.5 && l[0].name == 'a'"},
		{src: "int(size(l)) >= 2 && l[1].name == 'a'"},
		{src: "l.exists(c, 'a' == c.name) && l.filter(c, c.name == 'a')[0].x > 1"},
		{src: "l.all(c, c.name != 'a') || l.filter(c, c.name == 'a')[0].x > 1"},
		{src: "l.all(c, !(c.name == 'a')) || l.filter(c, c.name == 'a')[0].x > 1"},
		{src: "l.all(c, c.name != 'a') || l.filter(c, c.name == 'b')[0].x > 1", want: []indexRead{{list: "l.filter(c, c.name == 'b')", index: 0}}},
		{src: "l.all(c, c.name != 'a') && l.filter(c, c.name == 'a')[0].x > 1", want: []indexRead{{list: "l.filter(c, c.name == 'a')", index: 0}}},
		{src: "'a' in l && l[0] == 'a'"},
		{src: "'a' in l.map(c, c.name) && l.filter(c, c.name == 'a')[0].x > 1"},
		{src: "'a' in l.map(c, c.name) && l[0].name == 'a'"},
		{src: "c in l.map(c, c.name) && l.filter(c, c.name == c)[0].x > 1", want: []indexRead{{list: "l.filter(c, c.name == c)", index: 0}}},
		{src: "!('a' in l) || l[0] == 'a'"},
		{src: "size(l) == 1 || l[1].name == 'a'", want: []indexRead{{list: "l", index: 1}}},
		{src: "size(l) > 0 && size(l) != 1 && l[1].name == 'a'"},
		{src: "size(l) > 0 && size(l) != 2 && l[1].name == 'a'", want: []indexRead{{list: "l", index: 1}}},
		// A map() has as many elements as its range.
		{src: "l.map(c, c.name)[0] == 'a'", want: []indexRead{{list: "l.map(c, c.name)", index: 0, certain: true}}},
		{src: "size(l) > 0 && l.map(c, c.name)[0] == 'a'"},
		{src: "l.map(c, c.name).size() > 0 && l[0].name == 'a'"},
		{src: "l.map(c, c.name).exists(n, n == 'a') && l[0].name == 'a'"},
	} {
		got := uncheckedIndexes(tc.src, tc.when, anyList)
		for i := range got {
			got[i].offset = 0
			got[i].keys, got[i].filtered, got[i].exists = nil, false, ""
		}
		assert.Equal(t, tc.want, got, tc.src)
	}
}

// The index is reported at its constant.
func TestUncheckedIndexOffset(t *testing.T) {
	src := "x == 'a' || response.tool_calls[12].name == 'a'"
	got := uncheckedIndexes(src, "", func(string, string, map[string]bool) (int64, bool) { return 0, true })
	if assert.Len(t, got, 1) {
		assert.Equal(t, "12]", src[got[0].offset:got[0].offset+3])
	}
}

// A list whose least size covers the index is not reported: an argument
// whose schema's minItems (the least of the tools that declare it) holds
// the element; one whose minItems falls short of the index is, and so is
// an element of a filter() of it, which may keep none.
func TestUncheckedIndexMinItems(t *testing.T) {
	dir := writePolicy(t, `package p

tools: {
	send: {args: {type: "object", required: ["to"], properties: to: {type: "array", minItems: 1, items: type: "string"}}}
	mail: {args: {type: "object", required: ["to"], properties: to: {type: "array", minItems: 2, items: type: "string"}}}
}
chains: tool: [
	{use: "guard", name: "a", tools: ["send"], deny: "args.to[0] == ''"},
	{use: "guard", name: "b", tools: ["send"], deny: "args.to[2] == ''"},
	{use: "guard", name: "c", tools: ["mail"], deny: "args.to[1] == ''"},
	{use: "guard", name: "d", deny: "args.to[1] == ''"},
	{use: "guard", name: "e", tools: ["mail"], deny: "args.to.filter(t, t.endsWith('@x.example'))[0] == ''"},
	{use: "guard", name: "f", tools: ["mail"], deny: "args.to[-1] == ''"},
]
`)
	_, got := compileDiagnostics(t, dir, ruleUncheckedIndex, true)
	fails := `and the guard fails closed (on_error "closed"): the call is blocked`
	assert.Equal(t, []string{
		"9:60 cel/unchecked-index: args.to[2] is read with no test of the list's size: where args.to has 2 elements or fewer the read fails (index out of bounds), " + fails + "; test size(args.to) > 2 && ... first, or read args.to[?2]",
		"11:43 cel/unchecked-index: args.to[1] is read with no test of the list's size: where args.to has 1 element or fewer the read fails (index out of bounds), " + fails + "; test size(args.to) > 1 && ... first, or read args.to[?1]",
		"12:96 cel/unchecked-index: args.to.filter(t, t.endsWith('@x.example'))[0] is read with no test of the list's size: where no element matches the read fails (index out of bounds), " + fails + "; test args.to.exists(t, t.endsWith('@x.example')) && ... first, or read args.to.filter(t, t.endsWith('@x.example'))[?0]",
		"13:60 cel/unchecked-index: args.to[-1] is read: a negative index is out of bounds on every list, so the read always fails, " + fails + "; read the last element after a size test, size(args.to) > 0 && args.to[size(args.to) - 1]",
	}, got)
}

// The test offered for an element of a filter() is the exists() with its
// range and condition, as the predicate writes them.
func TestUncheckedIndexExistsHint(t *testing.T) {
	anyList := func(string, string, map[string]bool) (int64, bool) { return 0, true }
	for src, want := range map[string]string{
		"l.filter(c, c.name == 'a')[0].x > 1":                "l.exists(c, c.name == 'a')",
		"l.map(c, c.name == 'a', c.x)[0] > 1":                "l.exists(c, c.name == 'a')",
		"l.filter(c, c.name == 'a').map(c, c.x)[0] > 1":      "l.exists(c, c.name == 'a')",
		"m.l.filter(c, c.x.exists(y, y > 1))[0].name == 'a'": "m.l.exists(c, c.x.exists(y, y > 1))",
		"l.filter(c, c.name == 'a').filter(d, d.x > 1)[0].x": "l.filter(c, c.name == 'a').exists(d, d.x > 1)",
		"l.map(c, c.name)[0] == 'a'":                         "",
		"l . filter ( c , c.name == 'é' ) [ 0 ].x > 1":       "l.exists( c , c.name == 'é' )",
	} {
		got := uncheckedIndexes(src, "", anyList)
		if assert.Len(t, got, 1, src) {
			assert.Equal(t, want, got[0].exists, src)
			assert.Equal(t, want != "", got[0].filtered, src)
		}
	}
}

// An element of a filter() with nothing else to decide the predicate is
// an error at its index; beside a term that may decide it first, a
// warning; guarded by an exists() with its condition, clean.
func TestUncheckedIndexFilterSeverity(t *testing.T) {
	got := severities(t, `package p

tools: refund: {args: {type: "object", properties: amount: type: "number"}}
chains: chat: [
	{use: "guard", name: "a", phase: "after", deny: "response.tool_calls.filter(c, c.name == 'refund')[0].args.amount > 100.0"},
	{use: "guard", name: "b", phase: "after", deny: "response.finish_reason == 'tool_calls' && response.tool_calls.filter(c, c.name == 'refund')[0].args.amount > 100.0"},
	{use: "guard", name: "c", phase: "after", deny: "response.tool_calls.exists(c, c.name == 'refund') && response.tool_calls.filter(c, c.name == 'refund')[0].args.amount > 100.0"},
	{use: "guard", name: "d", when: "request.messages.exists(m, m.role == 'tool')", deny: "request.messages.filter(m, m.role == 'tool')[0].content == ''"},
]
`)
	assert.Equal(t, []string{"5:101 error", "6:143 warning"}, got)
}

// severities returns the findings of the rule in the policy src as
// "line:col severity".
func severities(t *testing.T, src string) []string {
	t.Helper()
	c, err := Compile(context.Background(), []string{writePolicy(t, src)}, Options{})
	require.NoError(t, err)
	var got []string
	for _, d := range c.Diagnostics {
		if d.Rule == ruleUncheckedIndex {
			got = append(got, fmt.Sprintf("%d:%d %s", d.Pos.Line, d.Pos.Col, d.Severity))
		}
	}
	return got
}

// A read below the least size minItems gives never fails, so the term
// holding it may decide the predicate before another read fails.
func TestUncheckedIndexMinItemsSibling(t *testing.T) {
	got := severities(t, `package p

tools: send: {args: {type: "object", required: ["to"], properties: to: {type: "array", minItems: 1, items: type: "string"}}}
chains: tool: [
	{use: "guard", name: "a", tools: ["send"], require: "args.to[0].endsWith('@corp.example') || args.to[1].endsWith('@corp.example')"},
	{use: "guard", name: "b", tools: ["send"], require: "args.to[1].endsWith('@corp.example') || args.to[2].endsWith('@corp.example')"},
	{use: "guard", name: "c", tools: ["send"], require: "size(args.to) == 1 || args.to[1].endsWith('@corp.example')"},
]
`)
	assert.Equal(t, []string{"5:103 warning", "6:63 error", "6:103 warning"}, got)
}

// messages is request.messages: a test of either guards a read of the
// other.
func TestUncheckedIndexMessagesAlias(t *testing.T) {
	got := severities(t, `package p

chains: chat: [
	{use: "guard", name: "a", when: "size(messages) > 1", deny: "request.messages[1].role == 'tool'"},
	{use: "guard", name: "b", when: "size(request.messages) > 1", deny: "messages[1].role == 'tool'"},
	{use: "guard", name: "c", when: "messages.exists(m, m.role == 'tool')", deny: "request.messages.filter(m, m.role == 'tool')[0].content == ''"},
	{use: "guard", name: "d", when: "request.messages.exists(m, m.role == 'tool')", deny: "messages.filter(m, m.role == 'tool')[0].content == ''"},
	{use: "guard", name: "e", deny: "size(messages) > 1 && request.messages[1].role == 'tool'"},
	{use: "guard", name: "f", deny: "messages[1].role == 'tool' && request.messages[1].content == ''"},
]
`)
	assert.Equal(t, []string{"9:44 error"}, got)
}

// The list is named, and the test offered, in one line with no parenthesis
// left open or unmatched, however the predicate writes it.
func TestUncheckedIndexNames(t *testing.T) {
	anyList := func(string, string, map[string]bool) (int64, bool) { return 0, true }
	for src, want := range map[string][2]string{
		"(l).filter(c, c.name == 'a')[0].x > 1":        {"(l).filter(c, c.name == 'a')", "l.exists(c, c.name == 'a')"},
		"(l.filter(c, c.name == 'a'))[0].x > 1":        {"l.filter(c, c.name == 'a')", "l.exists(c, c.name == 'a')"},
		"l.map(c, c.name == 'a', (c.x))[0] > 1":        {"l.map(c, c.name == 'a', (c.x))", "l.exists(c, c.name == 'a')"},
		"l.filter(c,\n    c.name == 'a'\n  )[0].x > 1": {"l.filter(c, c.name == 'a' )", "l.exists(c, c.name == 'a' )"},
		"l.filter(c, c.name == 'a  b')[0].x > 1":       {"l.filter(c, c.name == 'a  b')", "l.exists(c, c.name == 'a  b')"},
		"(l.filter(c, c.name == ')  ('))[0].x > 1":     {"l.filter(c, c.name == ')  (')", "l.exists(c, c.name == ')  (')"},
		"l.filter(c, c.name == '''a)\n''')[0].x > 1":   {"l.filter(c, c.name == '''a)\n''')", "l.exists(c, c.name == '''a)\n''')"},
		"messages[1].role == 'a'":                      {"messages", ""},
		"messages.filter(m, m.role == 'a')[0].x":       {"messages.filter(m, m.role == 'a')", "messages.exists(m, m.role == 'a')"},
	} {
		got := uncheckedIndexes(src, "", anyList)
		if assert.Len(t, got, 1, src) {
			assert.Equal(t, want[0], got[0].list, src)
			assert.Equal(t, want[1], got[0].exists, src)
		}
	}
}

// Each unguarded index of a list is a finding of its own, at its read: a
// read of the same element again is not another.
func TestUncheckedIndexEveryIndex(t *testing.T) {
	got := severities(t, `package p

chains: chat: [
	{use: "guard", name: "a", deny: "messages[1].role == 'a' || request.messages[2].role == 'b' || messages[2].content == '' || messages[1].name == ''"},
	{use: "guard", name: "b", phase: "after", deny: "response.tool_calls[0].name == 'x' && response.tool_calls[1].name == 'y'"},
]
`)
	assert.Equal(t, []string{"4:44 error", "4:79 warning", "5:71 error", "5:109 warning"}, got)
}
