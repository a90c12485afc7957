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
