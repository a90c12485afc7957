package compiler

import "strings"

// variableAliases are the variables of a stage that name a path of
// another (ChatVars resolves messages to request.messages): the analyses
// that key what a predicate reads by its path read an alias as that path,
// so that a test of one name and a read of the other are of one value.
var variableAliases = map[string]string{"messages": "request.messages"}

// aliasKey returns the path k (request.messages[0].role, messages) with an
// alias at its root written as the path it names.
func aliasKey(k string) string {
	if p, ok := variableAliases[rootOf(k)]; ok {
		return p + k[len(rootOf(k)):]
	}
	return k
}

// fieldKey is aliasKey for a field path as fieldPath renders it, a
// size() of one included: size(messages) is size(request.messages).
func fieldKey(field string) string {
	if in, ok := strings.CutPrefix(field, "size("); ok && strings.HasSuffix(in, ")") {
		return "size(" + aliasKey(in[:len(in)-1]) + ")"
	}
	return aliasKey(field)
}
