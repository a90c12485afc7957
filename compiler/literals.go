package compiler

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/predicate"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// ruleUnknownValue reports a comparison of a field with a string constant
// the field never holds: an error where the values are closed (the tools a
// tool-stage predicate can see), a warning where a host could bring others.
const ruleUnknownValue = "cel/unknown-value"

// finishReasons are the values of response.finish_reason.
var finishReasons = []string{"", "content_filter", "length", "pause_turn", "stop", "tool_calls"}

// responseFormats are the values of request.params.response_format: the
// format's type, "" when the request sets none.
var responseFormats = []string{"", "json_object", "json_schema", "text"}

// roles are the values of a message's role.
var roles = []string{"assistant", "system", "tool", "user"}

// turnStatuses are the values of status in an after-phase turn guard: a
// turn that ended blocked, over budget or in doubt is returned as it
// ended, without running the guard.
var turnStatuses = []string{"failed", "ok"}

// providerWords are the words of a provider's API for a value agentc
// reports under another name, by field: Anthropic's stop reasons, the
// developer role agentc serve passes on as system.
var providerWords = map[string]map[string]string{
	"response.finish_reason": {
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
		"model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter",
		"function_call": "tool_calls",
	},
	"request.messages[].role": {"developer": "system", "function": "tool"},
}

// valueAlias returns the value a field holds where a predicate wrote
// another name for it, and why: a declared model's provider id for its
// name (request.model == 'gpt-4.1-mini'), a provider's word for a finish
// reason or a role agentc reports under its own. "" when there is none.
func (c *Compilation) valueAlias(path, value string) (alias, why string) {
	switch path = valuesPath(path); path {
	case "request.model", "response.model":
		for _, name := range sortedNames(c.Policy.Models) {
			if m := c.Policy.Models[name]; m.ID == value {
				return name, fmt.Sprintf("'%s' is the provider's id of the model `%s`, and %s holds the name the policy gives it", value, name, path)
			}
		}
	default:
		if w, ok := providerWords[path][value]; ok {
			return w, fmt.Sprintf("agentc reports the API's '%s' as '%s'", value, w)
		}
	}
	return "", ""
}

// indexRE matches a constant index of a path (messages[0].role).
var indexRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[[0-9]+\]`) })

// valuesPath returns the path whose values the field at path, as a
// predicate reads it, holds: with each constant index written [], as the
// field of every element is, and an alias as the path it names
// (messages[0].role holds request.messages[].role's values).
func valuesPath(path string) string { return aliasKey(indexRE().ReplaceAllString(path, "[]")) }

// valueSet is what a field of known values may hold.
type valueSet struct {
	values []string
	what   string // "the declared tools"
	why    string // a note after the values, or ""
	sev    dsl.Severity
	// schema: the values are those a tool's args schema allows, and a
	// call with any other is refused before the layers run.
	schema bool
}

// knownValues returns the values the field at path may hold in a predicate
// of stage in an entry scoped to tools, or false when they are not known.
func (c *Compilation) knownValues(path string, stage predicate.Stage, tools []string) (valueSet, bool) {
	p := c.Policy
	switch path = valuesPath(path); path {
	case "tool.name":
		switch {
		case stage != predicate.Tool:
		case len(tools) > 0:
			return valueSet{values: slices.Sorted(slices.Values(tools)), what: "the tools the entry is scoped to", sev: dsl.Error}, true
		case len(p.Tools) > 0 && !p.AllowUndeclaredTools && len(p.MCPServers) == 0:
			return valueSet{values: sortedNames(p.Tools), what: "the declared tools", why: "; a call of another is refused", sev: dsl.Error}, true
		}
	case "request.model", "response.model":
		if stage == predicate.Chat && len(p.Models) > 0 {
			// A host may register a model client the policy does not
			// declare (runtime.Deps.Models): a warning.
			return valueSet{values: sortedNames(p.Models), what: "the declared models", sev: dsl.Warning}, true
		}
	case "run.meta.tenant", "run.meta.key":
		return c.metaKeyValues(path, stage)
	case "response.finish_reason":
		if stage == predicate.Chat {
			// A provider passes a finish reason it does not map through as
			// it is, and a host's model client may send any: a warning.
			return valueSet{values: finishReasons, what: "the finish reasons", sev: dsl.Warning}, true
		}
	case "request.params.response_format":
		if stage == predicate.Chat {
			// A host's request may carry another type: a warning.
			return valueSet{values: responseFormats, what: "the response format types", sev: dsl.Warning}, true
		}
	case "status":
		if stage == predicate.Turn {
			return valueSet{values: turnStatuses, what: "the statuses a turn guard sees",
				why: "; a turn that ended blocked, over budget or in doubt is returned as it ended, without running the guard", sev: dsl.Error}, true
		}
	case "target.name":
		if stage == invariantStage {
			// prove calls each declared model and tool.
			names := slices.Sorted(slices.Values(append(sortedNames(p.Models), sortedNames(p.Tools)...)))
			return valueSet{values: names, what: "the declared models and tools", why: "; prove calls no other", sev: dsl.Error}, true
		}
	case "target.stage":
		if stage == invariantStage {
			return valueSet{values: []string{"chat", "tool"}, what: "the stages prove calls", sev: dsl.Error}, true
		}
	case "audit[].tool":
		if stage == invariantStage {
			return valueSet{values: sortedNames(p.Tools), what: "the declared tools", why: "; prove calls no other", sev: dsl.Error}, true
		}
	case "request.tools[].name", "response.tool_calls[].name", "request.messages[].tool_calls[].name":
		if stage == predicate.Chat && len(p.Tools) > 0 && !p.AllowUndeclaredTools && len(p.MCPServers) == 0 {
			// A host may offer a tool the policy does not declare, and a
			// model may name one: a warning.
			return valueSet{values: sortedNames(p.Tools), what: "the declared tools", why: "; the tool chain refuses a call of another", sev: dsl.Warning}, true
		}
	case "request.messages[].role":
		if stage == predicate.Chat {
			// A host may build messages of other roles: a warning.
			return valueSet{values: roles, what: "the roles", sev: dsl.Warning}, true
		}
	default:
		if arg, ok := strings.CutPrefix(path, "args."); ok && stage == predicate.Tool {
			a, ok := c.argValuesAt(arg, tools)
			if !ok || !a.strsKnown || len(a.strs) == 0 {
				break
			}
			what := "the values the args schema of " + a.tools[0] + " allows"
			if len(a.tools) > 1 {
				what = "the values the args schemas of " + strings.Join(a.tools, ", ") + " allow"
			}
			return valueSet{values: a.strs, what: what, why: "; " + argsChecked, sev: dsl.Error, schema: true}, true
		}
		if stage == predicate.State && len(c.stateValue) > 0 && (path == "value" || strings.HasPrefix(path, "value.")) {
			steps := strings.Split(path, ".")[1:]
			if s, found := schemaAt(c.stateValue, steps); found {
				if strs, ok, _, _ := schemaValues(s); ok && len(strs) > 0 {
					return valueSet{values: slices.Sorted(slices.Values(strs)), what: "the values the field's schema allows",
						why: "; " + valueChecked, sev: dsl.Error, schema: true}, true
				}
			}
		}
		if field, ok := strings.CutPrefix(path, "result."); ok && stage == predicate.Tool {
			return c.resultValuesAt(field, tools)
		}
	}
	return valueSet{}, false
}

// resultValuesAt returns the strings the result_schemas of the tools a
// phase "after" tool predicate of an entry scoped to scope sees give the
// result's field at path ("status", "items[].state"), when each gives it
// an enum or const of strings; false when a tool may answer without such a
// schema (one not declared, or declaring none). A warning: the result is
// not checked against the schema before the predicate reads it, though
// the schema is what the policy says the tool answers.
func (c *Compilation) resultValuesAt(path string, scope []string) (valueSet, bool) {
	p := c.Policy
	tools, ok := c.toolsSeen(scope)
	if !ok {
		return valueSet{}, false
	}
	var strs []string
	for _, name := range tools {
		t := p.Tools[name]
		if t == nil || len(t.ResultSchema) == 0 {
			return valueSet{}, false
		}
		s, found := schemaAt(t.ResultSchema, strings.Split(path, "."))
		if !found {
			return valueSet{}, false
		}
		vals, ok, _, _ := schemaValues(s)
		if !ok {
			return valueSet{}, false
		}
		for _, v := range vals {
			if !slices.Contains(strs, v) {
				strs = append(strs, v)
			}
		}
	}
	what := "the values the result_schema of `" + tools[0] + "` declares"
	if len(tools) > 1 {
		what = "the values the result_schemas of `" + strings.Join(slices.Sorted(slices.Values(tools)), "`, `") + "` declare"
	}
	return valueSet{values: slices.Sorted(slices.Values(strs)), what: what, sev: dsl.Warning}, true
}

// checkLiterals reports each comparison of a field whose values are known
// (tool.name, a model, response.finish_reason, a message's role) with a
// string constant that is not one of them: tool.name == 'refnd' is always
// false, and a guard that denies with it never fires. tools is the entry's
// scope: a tool-stage entry scoped to tools sees those only. A constant of
// an in list that also holds a value the field may take is a warning: it
// is dead, the test is not. reads are the variables the predicate reads.
// field is what the predicate is ("deny", "require", "when", "admit",
// "invariant"): a != that is always true, or an == that is always false,
// where that can only make the predicate fail closed (a deny blocking more
// calls, never fewer) is a warning, as cel/constant's dead terms are. In
// the tool stage an argument's values are those its tools' args schemas
// allow (argValuesAt).
func (c *Compilation) checkLiterals(x *dsl.Expr, stage predicate.Stage, tools, reads []string, literals []predicate.Literal, field string) {
	literals = slices.DeleteFunc(slices.Clone(literals), func(l predicate.Literal) bool { return !l.IsString() })
	live := map[int]bool{} // in lists with a constant the field may hold
	for _, l := range literals {
		if set, ok := c.knownValues(l.Path, stage, tools); ok && l.List > 0 && slices.Contains(set.values, l.Value) {
			live[l.List] = true
		}
	}
	for _, l := range literals {
		set, ok := c.knownValues(l.Path, stage, tools)
		if !ok || slices.Contains(set.values, l.Value) {
			continue
		}
		quoted := make([]string, len(set.values))
		for i, k := range set.values {
			quoted[i] = "'" + k + "'"
		}
		sev := set.sev
		var outcome string
		switch {
		case l.Op == "!=" && l.Path == "status" && slices.Equal(reads, []string{"status"}):
			// Always true in a predicate that reads status alone: the
			// test is dead, and what the guard does then is for
			// checkStatusOnly to say (a deny that blocks every turn
			// fails closed, a warning).
			outcome, sev = fmt.Sprintf("%s != '%s' is always true", l.Path, l.Value), dsl.Warning
		case l.Op == "in" && live[l.List]:
			outcome, sev = fmt.Sprintf("'%s' in the list never matches (its other values may)", l.Value), dsl.Warning
		default:
			outcome = fmt.Sprintf("%s %s '%s' is always %t", l.Path, l.Op, l.Value, l.Op == "!=")
			if l.Op == "in" {
				outcome = "the in test is always false"
			}
			if s, note := deadSeverity(field, x.Source, l.Offset, l.Op == "!="); s == dsl.Warning {
				outcome, sev = outcome+note, s
			}
		}
		msg := fmt.Sprintf("%s is never '%s': it is one of %s (%s%s), so %s",
			l.Path, l.Value, set.what, nameList(quoted), set.why, outcome)
		if stage == invariantStage {
			msg = "invariant: " + msg
		}
		if alias, why := c.valueAlias(l.Path, l.Value); alias != "" {
			msg += fmt.Sprintf("; %s: did you mean '%s'?", why, alias)
		} else if best := textdist.Closest(l.Value, set.values); best != "" {
			msg += fmt.Sprintf("; did you mean '%s'?", best)
		} else if set.schema && sev == dsl.Error {
			// Nothing the schema allows is near the constant: the test
			// is dead, but what it was written to catch is refused by
			// the schema already, so no call gets through by it.
			refuses := schemaRefuses
			if stage == predicate.State {
				refuses = strings.Replace(refuses, "no call", "no value", 1)
			}
			msg, sev = msg+"; "+refuses, dsl.Warning
		}
		c.report(dsl.Diagnostic{Pos: x.PosAt(l.Offset), Severity: sev, Rule: ruleUnknownValue, Message: msg})
	}
}

// argTypes are the JSON Schema types the declared tools give one argument:
// types, the tools that list it (declaring, quoted), and whether one of them
// lets it be null.
type argTypes struct {
	types, declaring []string
	nullable         bool
}

// argTypesAt returns the types the declared tools (those of scope when it
// is not empty) give the argument at path ("amount", "shipping.zip"); false
// when none lists it, or one lists it without a single type.
func (c *Compilation) argTypesAt(path string, scope []string) (argTypes, bool) {
	if strings.ContainsAny(path, "[]") {
		return argTypes{}, false
	}
	var a argTypes
	for _, name := range sortedNames(c.Policy.Tools) {
		if len(scope) > 0 && !slices.Contains(scope, name) {
			continue
		}
		t, nullable, found := argType(c.Policy.Tools[name].Args, strings.Split(path, "."))
		if !found {
			continue
		}
		if t == "" {
			return argTypes{}, false // untyped there
		}
		a.declaring = append(a.declaring, "`"+name+"`")
		a.nullable = a.nullable || nullable
		if !slices.Contains(a.types, t) {
			a.types = append(a.types, t)
		}
	}
	return a, len(a.types) > 0
}

// holds reports whether an argument of types a may equal a constant of the
// CEL kind given. It never equals null: a null reads as absent, so where
// the schema lets it be null the read is a "no such key" error.
func (a argTypes) holds(kind string) bool {
	if kind == "null" {
		return false
	}
	return slices.ContainsFunc(a.types, func(t string) bool { return jsonKind(t) == celKind(kind) })
}

// checkUnscopedArgLiterals reports each comparison of an argument with a
// constant where every declared tool whose schema lists the argument types
// it so that the constant is never of its type: a call's arguments are
// checked against its tool's schema before any layer, so args.amount is a
// number whenever it is there, args.amount == '100' (or == null) is always
// false (a deny with it never fires) and args.amount > '100' an evaluation
// error (the predicate fails as failure says). Tools that do not list it
// are not counted; nothing is said where a tool may be called that the
// policy does not declare. A constant of an in list that holds another the
// argument may equal is dead, the test is not: a warning. scope is the
// entry's tools: a scoped entry's args are typed, so its comparisons are
// checked already, all but such an in list.
func (c *Compilation) checkUnscopedArgLiterals(x *dsl.Expr, literals []predicate.Literal, scope []string, failure string) {
	p := c.Policy
	if len(p.Tools) == 0 || p.AllowUndeclaredTools || len(p.MCPServers) > 0 {
		return
	}
	typesOf := func(l predicate.Literal) (argTypes, bool) {
		path, ok := strings.CutPrefix(l.Path, "args.")
		if !ok {
			return argTypes{}, false
		}
		return c.argTypesAt(path, scope)
	}
	matches := func(l predicate.Literal) bool {
		a, ok := typesOf(l)
		return !ok || a.holds(l.Kind)
	}
	for _, l := range literals {
		a, ok := typesOf(l)
		if !ok || matches(l) {
			continue
		}
		live := l.List > 0 && slices.ContainsFunc(literals, func(o predicate.Literal) bool { return o.List == l.List && matches(o) })
		if len(scope) > 0 && !live {
			continue // the type checker reports it
		}
		constant := l.Value
		if l.Kind == "string" {
			constant = "'" + l.Value + "'"
		}
		var outcome string
		switch {
		case live:
			outcome = fmt.Sprintf("%s in the list never matches (its other values may)", constant)
		case l.Op == "==":
			outcome = fmt.Sprintf("%s == %s is always false", l.Path, constant)
		case l.Op == "!=":
			outcome = fmt.Sprintf("%s != %s is always true", l.Path, constant)
		case l.Op == "in":
			if slices.ContainsFunc(literals, func(o predicate.Literal) bool { return o.List == l.List && o.Offset < l.Offset }) {
				continue // reported at the list's first constant
			}
			outcome = "the in test is always false"
		default:
			outcome = fmt.Sprintf("ordering it against %s (%s) is an evaluation error on each call that reaches it, and %s", celKindPhrase(l.Kind), constant, failure)
		}
		verb := "types"
		if len(a.declaring) > 1 {
			verb = "type"
		}
		if l.Kind == "null" && a.nullable && !live {
			c.report(dsl.Errorf(x.PosAt(l.Offset), predicate.RuleType,
				"%s is never null: a null argument reads as absent (has(%s) is false for it), so it never equals null: where it is there it is not null, and where it is null or missing the read is a \"no such key\" error; test whether it is there with has(%s) (the entry is not scoped to tools, so args is not typed: scope it with tools: to have every read checked)",
				l.Path, l.Path, l.Path))
			continue
		}
		advice := "compare it with " + jsonKindPhrase(a.types, l.Value)
		if l.Kind == "null" {
			advice = fmt.Sprintf("test whether it is there with has(%s)", l.Path)
		}
		if live {
			c.report(dsl.Warnf(x.PosAt(l.Offset), ruleUnknownValue, "%s is never %s: %s %s it as %s, and a call's arguments are checked against its tool's schema, so %s",
				l.Path, celKindPhrase(l.Kind), strings.Join(a.declaring, ", "), verb, strings.Join(a.types, " or "), outcome))
			continue
		}
		c.report(dsl.Errorf(x.PosAt(l.Offset), predicate.RuleType,
			"%s is never %s: %s %s it as %s, and a call's arguments are checked against its tool's schema, so %s; %s (the entry is not scoped to tools, so args is not typed: scope it with tools: to have every read checked)",
			l.Path, celKindPhrase(l.Kind), strings.Join(a.declaring, ", "), verb, strings.Join(a.types, " or "), outcome, advice))
	}
}

// jsonKind is the kind of value a JSON Schema type holds, as celKind names
// a CEL constant's: "number" for number and integer.
func jsonKind(t string) string {
	if t == "integer" {
		return "number"
	}
	return t
}

// celKind is the JSON Schema kind of a CEL constant of the given type:
// "string", "number" (int, uint, double: CEL compares numbers across them)
// or "boolean".
func celKind(kind string) string {
	switch kind {
	case "int", "uint", "double":
		return "number"
	case "bool":
		return "boolean"
	}
	return kind
}

// celKindPhrase names a CEL constant's kind in a message: "a string",
// "null".
func celKindPhrase(kind string) string {
	if kind == "null" {
		return kind
	}
	return "a " + celKind(kind)
}

// jsonKindPhrase names a value of the JSON Schema types, for a message:
// "a number (100.0)", "a string ('5')" where the constant was 5.
func jsonKindPhrase(types []string, constant string) string {
	if len(types) > 1 && !slices.ContainsFunc(types, func(t string) bool { return t != "number" && t != "integer" }) {
		types = []string{"number"}
	}
	switch types[0] {
	case "number":
		return "a number (100.0)"
	case "integer":
		return "an integer (100)"
	case "boolean":
		return "a boolean (true)"
	case "string":
		return "a string ('" + constant + "')"
	case "object":
		return "an object, or compare one of its fields"
	case "array":
		return "a list, or test an element"
	}
	return "a value of its type"
}

// argType returns the JSON Schema type an args schema gives the argument
// at path ("" when it gives none or several, or a list of types that holds
// "string"), whether the argument may be null (a type list with "null",
// nullable: true, or no single type), and whether the schema lists the
// argument.
func argType(schema json.RawMessage, path []string) (string, bool, bool) {
	schema, ok := subSchema(schema, path)
	if !ok {
		return "", false, false
	}
	var s struct {
		Type     any  `json:"type"`
		Nullable bool `json:"nullable"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return "", true, true
	}
	switch t := s.Type.(type) {
	case string:
		if t == "null" {
			return "", true, true
		}
		return t, s.Nullable, true
	case []any:
		var named []string
		for _, v := range t {
			if n, ok := v.(string); ok && n != "null" {
				named = append(named, n)
			}
		}
		if len(named) == 1 {
			return named[0], s.Nullable || len(t) > 1, true
		}
	}
	return "", true, true
}

// subSchema returns the schema an args schema gives the argument at path
// (the schema itself for an empty path), following properties, and
// whether it lists the argument.
func subSchema(schema json.RawMessage, path []string) (json.RawMessage, bool) {
	for _, name := range path {
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(schema, &s) != nil {
			return nil, false
		}
		sub, ok := s.Properties[name]
		if !ok {
			return nil, false
		}
		schema = sub
	}
	return schema, true
}

// closedWhenTrue says what a term that is always true makes of a predicate
// of the field given (see checkLiterals), where it sits with polarity pol
// (comparisonPolarity), when that can only make the predicate fail closed:
// a deny or a when that holds for more calls, a require, an admit or an
// invariant (under a negation) for fewer. "" when it may fail open, or
// when the polarity is not known.
func closedWhenTrue(field string, pol int) string {
	switch {
	case pol > 0 && field == "deny":
		return "it can only make the deny block more calls, never fewer"
	case pol > 0 && field == "when":
		return "it can only make the layer apply to more calls, never fewer"
	case pol < 0 && field == "require":
		return "it can only make the require block more calls, never fewer"
	case pol < 0 && field == "admit":
		return "it can only make admit drop more items, never fewer"
	case pol < 0 && field == "invariant":
		return "it can only make the invariant fail more runs, never fewer"
	}
	return ""
}

// comparisonPolarity returns the polarity, in the predicate src, of the
// comparison (==, !=, in or an ordering) whose constant starts at byte offset: 1 where
// the predicate is true for more values when the comparison is (under &&,
// || and the branches of a ternary, in the body of exists() and all()), -1
// under a negation, 0 where neither holds (an argument of a function, a
// ternary's condition but where a branch is constant, see
// conditionPolarity, the body of filter() or exists_one()) or the
// comparison is not found.
func comparisonPolarity(src string, offset int) int {
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return 0
	}
	f := folder{src: src, info: tree.SourceInfo()}
	isConstant := func(e ast.Expr) bool {
		if e.Kind() == ast.LiteralKind {
			return f.offset(e) == offset
		}
		if e.Kind() == ast.ListKind {
			return slices.ContainsFunc(e.AsList().Elements(), func(el ast.Expr) bool {
				return el.Kind() == ast.LiteralKind && f.offset(el) == offset
			})
		}
		return false
	}
	var walk func(e ast.Expr, pol int) (int, bool)
	walkAll := func(pol int, es ...ast.Expr) (int, bool) {
		for _, e := range es {
			if p, ok := walk(e, pol); ok {
				return p, true
			}
		}
		return 0, false
	}
	walk = func(e ast.Expr, pol int) (int, bool) {
		switch e.Kind() {
		case ast.CallKind:
			c := e.AsCall()
			args := c.Args()
			switch c.FunctionName() {
			case operators.Equals, operators.NotEquals, operators.In, operators.Less, operators.LessEquals,
				operators.Greater, operators.GreaterEquals:
				if slices.ContainsFunc(args, isConstant) {
					return pol, true
				}
			case operators.LogicalNot:
				return walkAll(-pol, args...)
			case operators.LogicalAnd, operators.LogicalOr:
				return walkAll(pol, args...)
			case operators.Conditional:
				if p, ok := walk(args[0], conditionPolarity(args, pol)); ok {
					return p, true
				}
				return walkAll(pol, args[1:]...)
			}
			if c.IsMemberFunction() {
				if p, ok := walk(c.Target(), 0); ok {
					return p, true
				}
			}
			return walkAll(0, args...)
		case ast.ComprehensionKind:
			comp := e.AsComprehension()
			if p, ok := walkAll(0, comp.IterRange(), comp.AccuInit(), comp.LoopCondition(), comp.Result()); ok {
				return p, true
			}
			return walk(comp.LoopStep(), bodyPolarity(comp, pol))
		case ast.SelectKind:
			return walk(e.AsSelect().Operand(), 0)
		case ast.ListKind:
			return walkAll(0, e.AsList().Elements()...)
		case ast.MapKind:
			for _, en := range e.AsMap().Entries() {
				m := en.AsMapEntry()
				if p, ok := walkAll(0, m.Key(), m.Value()); ok {
					return p, true
				}
			}
		}
		return 0, false
	}
	p, _ := walk(tree.Expr(), 1)
	return p
}

// conditionPolarity returns the polarity of the condition of the ternary
// args[0] ? args[1] : args[2], of polarity pol: where a branch is the
// constant true or false the ternary is an || or an && of the condition
// (c ? true : b is c || b, c ? a : false is c && a) or of its negation
// (c ? false : b is !c && b, c ? a : true is !c || a); otherwise the
// condition has none (0).
func conditionPolarity(args []ast.Expr, pol int) int {
	switch {
	case isLiteral(args[1], types.True) || isLiteral(args[2], types.False):
		return pol
	case isLiteral(args[1], types.False) || isLiteral(args[2], types.True):
		return -pol
	}
	return 0
}

// bodyPolarity returns the polarity of the loop step of comp, a
// comprehension of polarity pol: exists() and all() join the accumulator
// with the body by || or && and return it, so the body keeps its polarity;
// in another macro (filter(), exists_one()) it has none (0).
func bodyPolarity(comp ast.ComprehensionExpr, pol int) int {
	step := comp.LoopStep()
	if step.Kind() == ast.CallKind && comp.Result().Kind() == ast.IdentKind {
		if fn := step.AsCall().FunctionName(); fn == operators.LogicalOr || fn == operators.LogicalAnd {
			return pol
		}
	}
	return 0
}

// stringTests are the string functions checkValueTests reads, with what a
// message says a value does that passes them.
var stringTests = map[string]string{"startsWith": "starts with", "endsWith": "ends with", "contains": "contains", "matches": "matches"}

// passes reports whether the value v passes the test fn (startsWith,
// endsWith, contains or matches) with the constant s.
func passes(fn, v, s string, re *regexp.Regexp) bool {
	switch fn {
	case "startsWith":
		return strings.HasPrefix(v, s)
	case "endsWith":
		return strings.HasSuffix(v, s)
	case "contains":
		return strings.Contains(v, s)
	}
	return re.MatchString(v)
}

// checkValueTests reports each startsWith(), endsWith(), contains() or
// matches() test, with a constant, of a field whose values are known
// (knownValues) that none of them passes: args.currency.startsWith('btc')
// where the schema's enum is USD, EUR and BTC is always false, and a deny
// with it never fires. Each value is tested as the predicate would test
// it, so a test one of them passes is never reported. The severity is
// checkLiterals': a warning where the dead test can only make the
// predicate of the field given fail closed. A predicate that reads status
// alone is left to checkStatusOnly, which says what it is for each status,
// and a when to guard/inert, which says for which calls it holds.
func (c *Compilation) checkValueTests(x *dsl.Expr, stage predicate.Stage, tools, reads []string, field string) {
	tree, ok := predicate.ParseSyntax(x.Source)
	if !ok || field == "when" {
		return
	}
	f := folder{src: x.Source, info: tree.SourceInfo()}
	var scope locals
	walkPolarity(tree.Expr(), polarityHooks{scope: scope.enter, call: func(call ast.CallExpr, pol int) {
		fn, args := call.FunctionName(), call.Args()
		target, constant := call.Target(), ast.Expr(nil)
		switch {
		case (fn == operators.Equals || fn == operators.NotEquals) && len(args) == 2 && stage == predicate.Tool:
			for i := range args {
				path, _ := fieldPath(args[i])
				if s, lit := stringLiteral(args[1-i]); lit && !scope.shadows(path) {
					c.checkPatternTest(x, f.offset(args[1-i]), args[i], comparisonOps[fn], s, tools, field, pol)
				}
			}
			return
		case stringTests[fn] == "":
			return
		case call.IsMemberFunction() && len(args) == 1:
			constant = args[0]
		case fn == "matches" && !call.IsMemberFunction() && len(args) == 2:
			target, constant = args[0], args[1]
		default:
			return
		}
		path, isPath := fieldPath(target)
		s, lit := stringLiteral(constant)
		if !isPath || !lit || scope.shadows(path) {
			return
		}
		set, ok := c.knownValues(path, stage, tools)
		if !ok && stage == predicate.Tool {
			c.checkPatternTest(x, f.offset(constant), target, fn, s, tools, field, pol)
		}
		if !ok || path == "status" && slices.Equal(reads, []string{"status"}) {
			return
		}
		var re, loose *regexp.Regexp
		if fn == "matches" {
			var err error
			if re, err = regexp.Compile(s); err != nil {
				return // a syntax error of its own
			}
			loose, _ = regexp.Compile("(?i)" + s)
		}
		if slices.ContainsFunc(set.values, func(v string) bool { return passes(fn, v, s, re) }) {
			return
		}
		// The spelling a value passes, the case aside.
		var meant string
		for _, v := range set.values {
			if fn == "matches" {
				if loose != nil && loose.MatchString(v) {
					meant = "(?i)" + s
					break
				}
				continue
			}
			lv, ls := strings.ToLower(v), strings.ToLower(s)
			if len(lv) != len(v) || !passes(fn, lv, ls, nil) {
				continue
			}
			i := map[string]int{"startsWith": 0, "endsWith": len(lv) - len(ls), "contains": strings.Index(lv, ls)}[fn]
			meant = v[i : i+len(ls)]
			break
		}
		quoted := make([]string, len(set.values))
		for i, k := range set.values {
			quoted[i] = "'" + k + "'"
		}
		sev, note := set.sev, ""
		if closed := closedWhenTrue(field, -pol); closed != "" {
			sev, note = dsl.Warning, ": "+closed
		}
		msg := fmt.Sprintf("%s never %s '%s': it is one of %s (%s%s), so %s.%s('%s') is always false%s",
			path, stringTests[fn], s, set.what, nameList(quoted), set.why, path, fn, s, note)
		if stage == invariantStage {
			msg = "invariant: " + msg
		}
		switch {
		case meant != "":
			msg += fmt.Sprintf("; did you mean '%s'?", meant)
		case set.schema && sev == dsl.Error:
			// As in checkLiterals: what the test was written to catch
			// the schema refuses already.
			msg, sev = msg+"; "+schemaRefuses, dsl.Warning
		}
		c.report(dsl.Diagnostic{Pos: x.PosAt(f.offset(constant)), Severity: sev, Rule: ruleUnknownValue, Message: msg})
	}})
}

// argKinds returns the JSON Schema types the args schemas of tools let the
// argument at path ("account", "to.id") be, from its type (one or a list)
// or the branches of an anyOf or oneOf; nil where one of them lets it be
// any (no type). false where one does not list it (a field below an
// object without properties, which cel/untyped-args names at the read).
func (c *Compilation) argKinds(tools []string, path string) ([]string, bool) {
	var kinds []string
	untyped := false
	var add func(raw json.RawMessage) bool
	add = func(raw json.RawMessage) bool {
		var s struct {
			Type  any               `json:"type"`
			AnyOf []json.RawMessage `json:"anyOf"`
			OneOf []json.RawMessage `json:"oneOf"`
		}
		if json.Unmarshal(raw, &s) != nil {
			return false
		}
		var named []any
		switch t := s.Type.(type) {
		case string:
			named = []any{t}
		case []any:
			named = t
		}
		for _, n := range named {
			if n, ok := n.(string); ok && !slices.Contains(kinds, jsonKind(n)) {
				kinds = append(kinds, jsonKind(n))
			}
		}
		if len(named) > 0 {
			return true
		}
		branches := append(s.AnyOf, s.OneOf...)
		for _, b := range branches {
			if !add(b) {
				return false
			}
		}
		return len(branches) > 0
	}
	for _, name := range tools {
		sub, ok := subSchema(c.Policy.Tools[name].Args, strings.Split(path, "."))
		if !ok {
			return nil, false
		}
		if !add(sub) {
			untyped = true
		}
	}
	if untyped {
		return nil, true
	}
	return kinds, true
}

// jsonNumberRE matches a JSON number, the spelling a call sends a number
// in (not NaN, Inf, 0x1p-2, +1 or .5, which Go's ParseFloat reads too).
var jsonNumberRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`) })

// spelling returns the constant of another JSON kind that a call may send
// for the constant l, and that kind: 12345 for '12345', true for 'true',
// '12345' for 12345; "" when there is none.
func spelling(l predicate.Literal) (value, kind string) {
	switch celKind(l.Kind) {
	case "string":
		if l.Value == "true" || l.Value == "false" {
			return l.Value, "boolean"
		}
		if jsonNumberRE().MatchString(l.Value) {
			return l.Value, "number"
		}
	case "number", "boolean":
		return "'" + l.Value + "'", "string"
	}
	return "", ""
}

// sameConstant reports whether the literal o is the constant value of the
// JSON kind given (as spelling returns them).
func sameConstant(o predicate.Literal, value, kind string) bool {
	if celKind(o.Kind) != kind {
		return false
	}
	if kind == "string" {
		return "'"+o.Value+"'" == value
	}
	if kind == "number" {
		a, errA := strconv.ParseFloat(o.Value, 64)
		b, errB := strconv.ParseFloat(value, 64)
		return errA == nil && errB == nil && a == b
	}
	return o.Value == value
}

// checkMixedKindArgs warns, for a tool-stage predicate of an entry scoped
// to tools, about each comparison (==, != or in) of an argument the schema
// does not give one type, but lets be a number or a string (a type list
// of both, an anyOf of both, no type), with a constant a call may send in
// the other kind: args.account == '12345' never holds for
// {"account": 12345}, so a deny with it lets that call through. A
// predicate that also compares the argument with the other spelling is
// left alone.
func (c *Compilation) checkMixedKindArgs(x *dsl.Expr, literals []predicate.Literal, tools []string) {
	var reported []int // the in lists reported
	for _, l := range literals {
		arg, ok := strings.CutPrefix(l.Path, "args.")
		if !ok || l.FieldKind != "dyn" || strings.ContainsAny(arg, "[]") || l.Op != "==" && l.Op != "!=" && l.Op != "in" ||
			l.List > 0 && slices.Contains(reported, l.List) {
			continue
		}
		other, kind := spelling(l)
		if other == "" {
			continue
		}
		kinds, listed := c.argKinds(tools, arg)
		if !listed || kinds != nil && (!slices.Contains(kinds, kind) || !slices.Contains(kinds, celKind(l.Kind))) {
			continue
		}
		if slices.ContainsFunc(literals, func(o predicate.Literal) bool { return o.Path == l.Path && sameConstant(o, other, kind) }) {
			continue
		}
		if l.List > 0 {
			reported = append(reported, l.List)
		}
		schema := "the args schema of `" + strings.Join(tools, "`, `") + "`"
		if len(tools) > 1 {
			schema = "the args schemas of `" + strings.Join(tools, "`, `") + "`"
		}
		may := schema + " gives it no type"
		if kinds != nil {
			may = schema + " lets it be " + strings.Join(kinds, " or ")
		}
		constant := l.Value
		if l.Kind == "string" {
			constant = "'" + l.Value + "'"
		}
		test, fix := fmt.Sprintf("%s %s %s", l.Path, l.Op, constant), ""
		switch l.Op {
		case "==":
			fix = fmt.Sprintf("compare both spellings (%s == %s || %s == %s)", l.Path, constant, l.Path, other)
		case "!=":
			fix = fmt.Sprintf("compare both spellings (%s != %s && %s != %s)", l.Path, constant, l.Path, other)
		case "in":
			test, fix = fmt.Sprintf("the in test with %s", constant), fmt.Sprintf("list both spellings (%s, %s)", constant, other)
		}
		c.report(dsl.Warnf(x.PosAt(l.Offset), predicate.RuleUntypedArgs,
			"%s may be a %s or a %s (%s): %s compares it with a %s only, so a call sending %s as a %s (%s) is not matched; %s, or give the argument one type",
			l.Path, celKind(l.Kind), kind, may, test, celKind(l.Kind), constant, kind, other, fix))
	}
}

// argPatterns returns the compiled patterns the args schemas of tools (an
// entry's scope) give the string argument at path; false where one of them
// does not list it, types it otherwise, gives it no pattern, or one that
// Go's regexp, which checks a call's arguments, does not compile.
func (c *Compilation) argPatterns(tools []string, path string) ([]*regexp.Regexp, bool) {
	if len(tools) == 0 || strings.ContainsAny(path, "[]") {
		return nil, false
	}
	var out []*regexp.Regexp
	for _, name := range tools {
		t := c.Policy.Tools[name]
		if t == nil {
			return nil, false
		}
		sub, ok := subSchema(t.Args, strings.Split(path, "."))
		var s struct {
			Type    string `json:"type"`
			Pattern string `json:"pattern"`
		}
		if !ok || json.Unmarshal(sub, &s) != nil || s.Type != "string" || s.Pattern == "" {
			return nil, false
		}
		re, seen := c.argRegexps[s.Pattern]
		if !seen {
			re, _ = regexp.Compile(s.Pattern)
			if c.argRegexps == nil {
				c.argRegexps = map[string]*regexp.Regexp{}
			}
			c.argRegexps[s.Pattern] = re
		}
		if re == nil {
			return nil, false
		}
		out = append(out, re)
	}
	return out, true
}

// checkPatternTest reports a test of target, an argument of a scoped
// entry, with the string s (test is ==, !=, startsWith, endsWith,
// contains or matches), that no value the pattern of each scoped tool's
// schema allows passes (argPatterns, patternsMeet): a call's arguments
// are checked against its tool's schema before any layer, so
// args.iban.startsWith('ir'), iban matching ^[A-Z]{2}..., is always
// false, and so are endsWith('x'), contains('-') and matches('^[a-z]').
// off is the constant's offset, pol the test's polarity.
func (c *Compilation) checkPatternTest(x *dsl.Expr, off int, target ast.Expr, test, s string, tools []string, field string, pol int) {
	path, isPath := fieldPath(target)
	arg, isArg := strings.CutPrefix(path, "args.")
	if !isPath || !isArg {
		return
	}
	if _, known := c.knownValues(path, predicate.Tool, tools); known {
		return // checkLiterals and checkValueTests test it against its values
	}
	pats, ok := c.argPatterns(tools, arg)
	if !ok {
		return
	}
	if _, err := regexp.Compile(s); test == "matches" && err != nil {
		return // a syntax error of its own
	}
	// testPattern is the pattern of the values that pass the test with s.
	testPattern := func(s string) string {
		q := regexp.QuoteMeta(s)
		switch test {
		case "startsWith":
			return "^" + q
		case "endsWith":
			return q + "$"
		case "contains":
			return q
		case "matches":
			return s
		}
		return "^" + q + "$"
	}
	// searches holds each pattern's program, compiled once for the
	// spellings never tries (nil where Go does not compile it).
	var searches []*search
	if test != "==" && test != "!=" {
		for _, re := range pats {
			sr, _ := newSearch(re.String())
			searches = append(searches, sr)
		}
	}
	never := func(s string) bool {
		for i, re := range pats {
			if test == "==" || test == "!=" {
				if re.MatchString(s) {
					return false
				}
				continue
			}
			if ts, ok := newSearch(testPattern(s)); !ok || searches[i] == nil || searches[i].meets(ts) {
				return false
			}
		}
		return true
	}
	if !never(s) {
		return
	}
	always := test == "!="
	if !always {
		pol = -pol
	}
	sev, note := dsl.Error, ""
	if closed := closedWhenTrue(field, pol); closed != "" {
		sev, note = dsl.Warning, ": "+closed
	}
	var quoted []string
	for _, re := range pats {
		if q := "'" + re.String() + "'"; !slices.Contains(quoted, q) {
			quoted = append(quoted, q)
		}
	}
	schema := "the args schema of `" + strings.Join(tools, "`, `") + "` gives it the pattern " + strings.Join(quoted, ", ")
	if len(tools) > 1 {
		schema = "the args schemas of `" + strings.Join(tools, "`, `") + "` give it the patterns " + strings.Join(quoted, ", ")
	}
	msg := fmt.Sprintf("%s is never '%s': %s, which '%s' does not match (%s), so %s %s '%s' is always %t%s",
		path, s, schema, s, argsChecked, path, test, s, always, note)
	if passing := map[string]string{"startsWith": "starting with", "endsWith": "ending with", "contains": "containing", "matches": "matching"}[test]; passing != "" {
		msg = fmt.Sprintf("%s never %s '%s': %s, which no value %s '%s' matches (%s), so %s.%s('%s') is always false%s",
			path, stringTests[test], s, schema, passing, s, argsChecked, path, test, s, note)
	}
	switch {
	case test == "matches":
		// A pattern changes its meaning with its case (\d, \D).
		if sev == dsl.Error {
			msg, sev = msg+"; "+schemaRefuses, dsl.Warning
		}
	case !never(strings.ToUpper(s)):
		msg += fmt.Sprintf("; did you mean '%s'?", strings.ToUpper(s))
	case !never(strings.ToLower(s)):
		msg += fmt.Sprintf("; did you mean '%s'?", strings.ToLower(s))
	case sev == dsl.Error:
		msg, sev = msg+"; "+schemaRefuses, dsl.Warning
	}
	c.report(dsl.Diagnostic{Pos: x.PosAt(off), Severity: sev, Rule: ruleUnknownValue, Message: msg})
}
