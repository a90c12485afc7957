package serve

import (
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
