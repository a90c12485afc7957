package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentc-dev/agentc/runtime"
)

// Custom (free-form) tools, OpenAI's: the model calls one with text, held
// to the tool's grammar when it has one, instead of JSON arguments. In the
// call model a custom tool is a runtime.ToolDef with Custom set, and its
// call a runtime.ToolUse marked Custom whose arguments are the object
// {"input": TEXT}: the tool chain checks a proposed call of one as it
// checks any call, reading its text as args.input. The policy declares
// such a tool as any other (its args an object of one string, input), or
// its calls are refused as calls of an undeclared tool.

// customFormat maps a custom tool's input format: type "text" or
// "grammar" (with its syntax, lark or regex, and its definition), or none
// (the API's default, free text). at is the format's path in the request,
// grammarAt that of the object holding the syntax and the definition.
func customFormat(at, grammarAt, typ, syntax, definition string) (*runtime.CustomTool, error) {
	switch typ {
	case "", runtime.CustomText:
		if syntax != "" || definition != "" {
			return nil, fmt.Errorf("%s: a syntax and a definition belong to a format of type grammar, not %q", at, typ)
		}
		return &runtime.CustomTool{Format: typ}, nil
	case runtime.CustomGrammar:
		if syntax != "lark" && syntax != "regex" {
			return nil, fmt.Errorf(`%s.syntax: want "lark" or "regex", got %q`, grammarAt, syntax)
		}
		if definition == "" {
			return nil, fmt.Errorf("%s.definition: required for a grammar", grammarAt)
		}
		return &runtime.CustomTool{Format: runtime.CustomGrammar, Syntax: syntax, Definition: definition}, nil
	}
	return nil, fmt.Errorf(`%s.type: want "text" or "grammar", got %q`, at, typ)
}

// customCall returns the call of the custom tool name with input, the
// call of a custom_tool_call item or of a tool call of type custom.
func customCall(id, name, input string) (runtime.ToolUse, error) {
	if id == "" {
		return runtime.ToolUse{}, errors.New(".call_id: required")
	}
	if name == "" {
		return runtime.ToolUse{}, errors.New(".name: required")
	}
	return runtime.ToolUse{ID: id, Name: name, Arguments: runtime.CustomArgs(input), Custom: true}, nil
}

// isCustom reports whether the tool name is one of tools, custom.
func isCustom(tools []runtime.ToolDef, name string) bool {
	for i := range tools {
		if tools[i].Name == name {
			return tools[i].Custom != nil
		}
	}
	return false
}

// customInput returns the text of a custom call that admitProposals
// admitted (its arguments are {"input": TEXT}).
func customInput(tc *runtime.ToolUse) string {
	in, _ := tc.CustomInput()
	return in
}

// choiceKind refuses a tool choice of type typ (function or custom) that
// forces name, a tool of the other type or of none offered: the provider
// would be asked to force a tool other than the one named.
func choiceKind(at, typ string, tools []runtime.ToolDef, name string) error {
	if (typ == "custom") != isCustom(tools, name) {
		return fmt.Errorf("%s: %q forces a %s tool, and no tool of that type named %q is offered in tools", at, typ, typ, name)
	}
	return nil
}

// callKind refuses a proposed call of a tool the request offers that is
// not of the tool's kind: a function call of a custom tool (an upstream
// that has none, or a layer's rewrite that left no {"input": TEXT}), or a
// custom call of a function tool. The client would run its arguments as
// the other kind's, or fail on an item it has no tool for.
func callKind(offered []runtime.ToolDef, call *runtime.ToolUse) error {
	i := slices.IndexFunc(offered, func(t runtime.ToolDef) bool { return t.Name == call.Name })
	if i < 0 || (offered[i].Custom != nil) == call.Custom {
		return nil
	}
	kind, offeredAs := "function", "custom"
	if call.Custom {
		kind, offeredAs = "custom", "function"
	}
	return &runtime.BlockedError{Layer: runtime.LayerTools, Message: fmt.Sprintf("the model proposed a %s call of %s, which the request offers as a %s tool", kind, call.Name, offeredAs)}
}

// forcedOffered refuses a tool choice forcing the tool name when the
// request offers no tool so named: the provider's API refuses it, and the
// name, read by no layer as a tool's, would reach it. at is the name's
// path in the request.
func forcedOffered(at, name string, tools []runtime.ToolDef) error {
	if !slices.ContainsFunc(tools, func(t runtime.ToolDef) bool { return t.Name == name }) {
		return fmt.Errorf("%s: %q is not a tool the request offers; offer it in tools, or name one offered", at, name)
	}
	return nil
}

// customDecl is the declaration the policy gives a tool offered as a
// custom tool, as docs/serve.md shows it.
const customDecl = `args: {type: "object", required: ["input"], properties: input: type: "string"}`

// customDeclared refuses the custom offer t of a tool the policy (or an
// upstream MCP server) declares with arguments other than the custom
// shape, an object of one string, input: the tool chain reads the calls
// of a custom tool as {"input": TEXT}, so a check keyed on the declared
// arguments (an arg_patterns entry on cmd, a path_arg, a url_arg, a guard
// reading args.cmd) would read none of the text the client runs. A tool
// declared by no one (settings.allow_undeclared_tools) has no other shape.
func (g *generation) customDeclared(t *runtime.ToolDef) error {
	if t.Custom == nil {
		return nil
	}
	decl, declared := g.plan.Tools[t.Name]
	args := decl.Args
	if len(args) == 0 && g.mcp != nil {
		if up := g.mcp.tools[t.Name]; up != nil {
			args, _ = json.Marshal(up.tool.InputSchema)
			declared = true
		}
	}
	if !declared {
		return nil
	}
	refuse := func(what string) error {
		return fmt.Errorf("tools: %s is offered as a custom tool, whose calls the tool chain reads as {\"input\": TEXT}, and %s; declare it in the policy's tools: with %s, or offer it as a function", t.Name, what, customDecl)
	}
	if !customShape(args) {
		return refuse("its args are not an object of one string, input")
	}
	for _, ref := range slices.Concat([]string{decl.PathArg, decl.URLArg}, decl.PathArgs, decl.URLArgs) {
		if ref != "" && ref != "input" && ref != "/input" {
			return refuse(fmt.Sprintf("its path_arg or url_arg %s is not input", ref))
		}
	}
	return nil
}

// customShape reports whether the JSON Schema args describes the
// arguments of a custom tool's call: an object whose one property, input,
// is a string.
func customShape(args json.RawMessage) bool {
	var s struct {
		Type       json.RawMessage
		Properties map[string]struct{ Type json.RawMessage }
	}
	if len(args) == 0 || json.Unmarshal(args, &s) != nil {
		return false
	}
	in, ok := s.Properties["input"]
	return bytes.Equal(s.Type, []byte(`"object"`)) && len(s.Properties) == 1 && ok && bytes.Equal(in.Type, []byte(`"string"`))
}
