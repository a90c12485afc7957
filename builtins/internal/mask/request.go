package mask

import (
	"encoding/json"
	"slices"

	"github.com/agentc-dev/agentc/runtime"
)

// Tools returns a copy of the tool definitions a call offers with every
// text the model reads masked, and whether anything was: each tool's name
// (masked as a tool call's name is, so that a call and its definition still
// pair), its description and its parameters' schema (its strings, object
// keys and integral numbers: the descriptions of the parameters, an enum's
// values, a default; still valid JSON, see Args), and a custom tool's
// grammar, as text (a grammar's literal may hold a key as an enum may: the
// model reads it, and may write it). A client may paste a key
// into a description or an enum. Without a change it returns defs itself;
// defs is never modified.
func (t Transcript) Tools(run string, defs []runtime.ToolDef) ([]runtime.ToolDef, bool) {
	var out []runtime.ToolDef
	for i, d := range defs {
		name, nameMasked := t.text(run, d.Name)
		desc, descMasked := t.text(run, d.Description)
		params, paramsMasked := t.json(run, d.Parameters)
		var grammar string
		grammarMasked := false
		if d.Custom != nil {
			grammar, grammarMasked = t.text(run, d.Custom.Definition)
		}
		if !nameMasked && !descMasked && !paramsMasked && !grammarMasked {
			continue
		}
		if out == nil {
			out = slices.Clone(defs)
		}
		out[i].Name, out[i].Description, out[i].Parameters = name, desc, params
		if grammarMasked {
			c := *d.Custom
			c.Definition = grammar
			out[i].Custom = &c
		}
	}
	if out == nil {
		return defs, false
	}
	return out, true
}

// Definitions returns what a call offers the model besides its messages,
// masked: its tool definitions (Tools) and its response format (Format),
// and whether anything was; req is never modified.
func (t Transcript) Definitions(run string, req *runtime.ChatRequest) ([]runtime.ToolDef, *runtime.ResponseFormat, bool) {
	tools, toolsMasked := t.Tools(run, req.Tools)
	format, formatMasked := t.Format(run, req.ResponseFormat)
	return tools, format, toolsMasked || formatMasked
}

// Format returns a copy of a call's response format with its name and the
// JSON Schema the output must match masked (as Tools masks a tool's
// parameters: the model reads the schema's descriptions, enums and
// defaults), and whether anything was; without a change, rf itself. rf is
// never modified.
func (t Transcript) Format(run string, rf *runtime.ResponseFormat) (*runtime.ResponseFormat, bool) {
	if rf == nil {
		return rf, false
	}
	name, nameMasked := t.text(run, rf.Name)
	schema, schemaMasked := t.json(run, rf.Schema)
	if !nameMasked && !schemaMasked {
		return rf, false
	}
	out := *rf
	out.Name, out.Schema = name, schema
	return &out, true
}

// json returns a JSON document masked (Args) and whether anything was; a
// document Mask finds nothing in is recorded for the run, as a text is.
func (t Transcript) json(run string, raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) == 0 || (t.Seen != nil && t.Seen.Has(run, string(raw))) {
		return raw, false
	}
	red, ok := Args(raw, t.Mask, t.Find)
	if !ok && t.Seen != nil {
		t.Seen.Add(run, string(raw))
	}
	return red, ok
}
