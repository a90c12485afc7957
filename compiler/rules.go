package compiler

import "github.com/agentc-dev/agentc/dsl"

// Rule describes a diagnostic rule id.
type Rule struct {
	ID       string
	Severity dsl.Severity
	Title    string
}

// loadRules are the rules of the load-policy stage.
var loadRules = []Rule{
	{"cue/syntax", dsl.Error, "CUE parse error, or a file that is not a policy file"},
	{"schema/unknown-middleware", dsl.Error, "use names no builtin or registered middleware"},
	{"schema/unknown-field", dsl.Error, "a field the closed definition does not allow"},
	{"schema/invalid-value", dsl.Error, "wrong type, out of bounds, or not one of the allowed values"},
	{"schema/missing-field", dsl.Error, "a required field is absent"},
	{"schema/bad-reference", dsl.Error, "a model, tool, store or entry name that is not declared"},
	{"schema/stage", dsl.Error, "a builtin used in a chain whose stage it does not support"},
}

// celRules are the rules of the compile-cel stage.
var celRules = []Rule{
	{"cel/syntax", dsl.Error, "CEL parse error"},
	{"cel/type", dsl.Error, "undeclared reference, undefined field, or no matching overload"},
	{"cel/not-bool", dsl.Error, "a predicate whose type is not bool"},
	{"cel/cost", dsl.Error, "estimated cost unbounded or above the limit"},
	{"cel/untyped-args", dsl.Warning, "a predicate reads args where no tool schema types it"},
}

// Rules lists every rule id the compiler reports, with its severity and
// title.
func Rules() []Rule {
	var out []Rule
	out = append(out, loadRules...)
	out = append(out, celRules...)
	out = append(out, orderRules()...)
	return out
}
