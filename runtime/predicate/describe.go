package predicate

import (
	"slices"

	"github.com/google/cel-go/common/types"
)

// VariableDoc describes a variable of a stage, for documentation.
type VariableDoc struct {
	// Name is the variable, such as "request".
	Name string
	// Type is its CEL type as cel-go prints it ("agentc.request",
	// "list(agentc.message)", "dyn").
	Type string
	// AfterOnly is set for a variable that exists only in the after phase
	// (a guard with phase: "after"): the call's outcome.
	AfterOnly bool
	// Doc says what the variable holds.
	Doc string
}

// FieldDoc describes a field of an object type, for documentation.
type FieldDoc struct {
	Name string
	Type string
	// Doc says what the field holds, and what it holds where there is
	// nothing to hold ("" for text when the answer is only tool calls).
	Doc string
}

// Variables lists the variables a predicate of stage s can read, before
// and after the call. The tool stage's args is listed as a map of dyn: an
// entry scoped with tools: to tools with schemas sees it typed.
func Variables(s Stage) []VariableDoc {
	var out []VariableDoc
	before := map[string]bool{}
	for _, v := range stageVariables(s, Before) {
		before[v.name] = true
		out = append(out, VariableDoc{Name: v.name, Type: v.typ.String()})
	}
	if s == Tool {
		out = append(out, VariableDoc{Name: "args", Type: types.NewMapType(types.StringType, types.DynType).String()})
	}
	if s == State {
		// Typed from the field's schema and from every field's.
		out = append(out, VariableDoc{Name: "value", Type: types.DynType.String()},
			VariableDoc{Name: "state", Type: types.NewMapType(types.StringType, types.DynType).String()})
	} else if s != Admit {
		for _, v := range stageVariables(s, After) {
			if !before[v.name] {
				out = append(out, VariableDoc{Name: v.name, Type: v.typ.String(), AfterOnly: true})
			}
		}
	}
	for i := range out {
		out[i].Doc = variableDocs[string(s)+"."+out[i].Name]
		if out[i].Doc == "" {
			out[i].Doc = variableDocs[out[i].Name]
		}
	}
	return out
}

// variableDocs documents the variables, by name, or by stage and name
// where a name means something else in another stage. Every variable has
// one (TestVariables).
var variableDocs = map[string]string{
	"run":         "the agent run the call belongs to",
	"request":     "the request to the model",
	"messages":    "request.messages",
	"response":    "the model's answer",
	"tool":        "the called tool's declaration",
	"args":        "the call's arguments, checked against the tool's schema before any layer",
	"result":      "the tool's result; a read of its fields is checked against the tools' result_schema",
	"input":       "the turn's input",
	"session":     "the session the turn belongs to",
	"output":      "the turn's answer, then each earlier answer's text beside its tool calls (output.final tells them apart)",
	"turn.status": `ok or failed: a turn that ended blocked, over budget or in doubt is returned as it ended, without running the guard`,
	"item":        "one retrieved grounding item",
	"field":       "the name of the state field set or appended to",
	"value":       "the value set, or the element appended, typed from the field's schema",
	"state":       "the run's state fields, typed from their schemas; a field not set is absent",
}

// ObjectTypes lists the names of the fixed object types the variables use
// ("agentc.request"), sorted.
func ObjectTypes() []string {
	var out []string
	for name := range fixedObjects {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// ObjectFields lists the fields of a fixed object type with their types,
// sorted by name; ok is false for a name that is not one.
func ObjectFields(typeName string) (fields []FieldDoc, ok bool) {
	o, ok := fixedObjects[typeName]
	if !ok {
		return nil, false
	}
	for _, name := range o.names {
		fields = append(fields, FieldDoc{Name: name, Type: o.fields[name].ft.Type.String(), Doc: fieldDocs[typeName+"."+name]})
	}
	return fields, true
}

// fieldDocs documents the fields of the fixed object types, by type and
// field name. Every field has one (TestObjectFields).
var fieldDocs = map[string]string{
	"agentc.input.text": "the turn's input",

	"agentc.item.content":  "the item's text",
	"agentc.item.id":       `its id, "" when the retriever gave none`,
	"agentc.item.metadata": "what the retriever attached; a key may be absent (test it with has() first)",
	"agentc.item.score":    "the retriever's relevance score, 0.0 when it gave none",
	"agentc.item.source":   `where it comes from, "" when the retriever did not say`,

	"agentc.message.content":      "its whole text, as the model reads it: a string, or its text and tool_result parts and the text its image parts carry in place of an image, adjacent text parts run together, others joined by line breaks",
	"agentc.message.name":         `its author's name, "" when none`,
	"agentc.message.role":         "system, user, assistant or tool (a host may send others); a user message's tool results (Anthropic's tool_result blocks) are each read as a tool message before it, as an OpenAI client sends them",
	"agentc.message.tool_call_id": `for a tool result, the id of the call it answers; "" otherwise`,
	"agentc.message.tool_calls":   "for an assistant message, the tool calls the model asked for",

	"agentc.output.final": "text is the turn's output (its final answer's text), not the text an earlier answer wrote beside its tool calls",
	"agentc.output.text":  "the turn's answer, or the text an earlier answer of the turn wrote beside its tool calls, each read as an output (final tells them apart)",

	"agentc.params.metadata":        "the request's metadata, as the caller sent it (agentc serve adds the end user's id as user_id: the request's safety_identifier when it has one, which the provider is sent, else its user or metadata.user_id); a key may be absent",
	"agentc.params.response_format": `the output format's type: text, json_object or json_schema; "" when unset`,
	"agentc.params.seed":            "0 when unset; has() tells a seed of 0 from none",
	"agentc.params.stop":            "the stop sequences",
	"agentc.params.temperature":     "0.0 when unset; has() tells a temperature of 0 from none",
	"agentc.params.tool_choice":     `"", auto, none, required or a tool's name`,
	"agentc.params.top_p":           "0.0 when unset; has() tells a top_p of 0 from none",

	"agentc.request.max_tokens": "the bound on the output the caller set, 0 when the request sets none",
	"agentc.request.messages":   "the transcript the model reads, also the variable messages",
	"agentc.request.model":      "the model called, as the policy names it",
	"agentc.request.params":     "the sampling and output parameters, as the caller set them",
	"agentc.request.tools":      "the tools offered to the model",

	"agentc.response.finish_reason": `stop, length, tool_calls, content_filter, pause_turn, or "" when the model did not say`,
	"agentc.response.model":         "the model that answered",
	"agentc.response.refusal":       "text is the model's refusal to answer, not an answer",
	"agentc.response.text":          `the answer's text; "" when the answer is only tool calls (read tool_calls)`,
	"agentc.response.tool_calls":    "the tool calls the model asks for, empty when none",
	"agentc.response.usage":         "the tokens the call used",

	"agentc.run.agent": "the agent the run belongs to",
	"agentc.run.id":    "the run's id (agentc serve builds it from the caller's X-Agentc-Run header)",
	"agentc.run.meta":  "what the host gave the run (agentc serve: tenant and key, from the API key it admitted); a key may be absent",

	"agentc.session.id":   "the session's id",
	"agentc.session.meta": "what the host gave the session; a key may be absent",

	"agentc.tool.name":           "the tool called",
	"agentc.tool.path_arg":       `its path_arg (the first one of a list), "" when none`,
	"agentc.tool.retry_safe":     "its retry_safe",
	"agentc.tool.side_effecting": "its side_effecting",
	"agentc.tool.url_arg":        `its url_arg (the first one of a list), "" when none`,

	"agentc.tool_call.args": "the call's arguments (reading them fails when they are not a JSON object)",
	"agentc.tool_call.id":   "the call's id",
	"agentc.tool_call.name": "the tool it calls",

	"agentc.tool_def.description": "the tool's description",
	"agentc.tool_def.name":        "the tool's name",

	"agentc.usage.cache_write_1h_input_tokens": "the part of cache_write_input_tokens written to one-hour cache entries",
	"agentc.usage.cache_write_input_tokens":    "the part of input_tokens written to the prompt cache",
	"agentc.usage.cached_input_tokens":         "the part of input_tokens read from the prompt cache",
	"agentc.usage.input_tokens":                "the input tokens",
	"agentc.usage.output_tokens":               "the output tokens",
	"agentc.usage.reasoning_tokens":            "the part of output_tokens spent reasoning",
}
