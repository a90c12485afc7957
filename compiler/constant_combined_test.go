package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The checks of a predicate that reads variables are combined: a dead
// never-matching term is reported beside a constant the rest of the
// predicate folds to (it was left out), a status-only turn predicate is
// reported constant beside a dead pattern of its matches_any() list (it
// was left out), and a term both find is reported once.
func TestConstantChecksCombine(t *testing.T) {
	dir := writePolicy(t, `package p

tools: transfer: {side_effecting: true, args: {type: "object", required: ["iban", "q"], properties: {iban: type: "string", q: type: "string"}}}
chains: tool: [
	{use: "guard", name: "folded", tools: ["transfer"], deny: "(args.iban.matches('^XX$[0-9]+') || args.q == 'x') && false"},
	{use: "guard", name: "decides", tools: ["transfer"], deny: "args.iban.matches('^XX$[0-9]+')"},
]
chains: turn: [
	{use: "guard", name: "status", phase: "after", deny: "matches_any(status, ['x$y', '.*'])"},
]
`)
	_, got := compileDiagnostics(t, dir, ruleConstant, false)
	assert.Equal(t, []string{
		"5:80 cel/constant",  // the dead pattern
		"5:115 cel/constant", // && false
		"6:80 cel/constant",  // the pattern that decides the deny, once
		"9:55 cel/constant",  // true for each status
		"9:77 cel/constant",  // the dead pattern of the list
	}, got)
}

// Each term that decides a predicate alone is a finding of its own, at the
// term: a user fixing one contradiction learns of the next in the same run.
// A term the same field contradicts again is not another.
func TestConstantEveryDecidingTerm(t *testing.T) {
	dir := writePolicy(t, `package p

chains: chat: [
	{use: "guard", name: "a", deny: "size(messages) < 1 && size(messages) > 5 && request.max_tokens > 10 && request.max_tokens < 5"},
	{use: "guard", name: "b", deny: "request.model == 'a' && request.model == 'b' && run.id == 'x' && run.id == 'y' && false"},
	{use: "guard", name: "c", require: "size(messages) > 2 || size(request.messages) <= 2 || true || request.max_tokens >= 1 || request.max_tokens < 1"},
	{use: "guard", name: "d", deny: "run.id == 'x' && run.id == 'y' && run.id == 'z'"},
]
`)
	_, got := compileDiagnostics(t, dir, ruleConstant, false)
	assert.Equal(t, []string{
		"4:39 cel/constant",  // size(messages)
		"4:79 cel/constant",  // request.max_tokens
		"5:59 cel/constant",  // request.model == 'b'
		"5:100 cel/constant", // run.id == 'y'
		"5:117 cel/constant", // && false
		"6:42 cel/constant",  // size(messages), size(request.messages)
		"6:91 cel/constant",  // || true
		"6:99 cel/constant",  // request.max_tokens
		"7:52 cel/constant",  // run.id == 'y', once
	}, got)
}
