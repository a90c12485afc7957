package vet

import (
	"encoding/json"
	"slices"

	"github.com/agentc-dev/agentc/dsl"
)

// CheckOutsideTruncate reports a check of a tool result's structure that
// sits outside a truncate in the tool chain.
var CheckOutsideTruncate = &Rule{
	Name:     "order/check-outside-truncate",
	Severity: dsl.Error,
	Doc: `a check of a tool result's structure sits outside truncate, so every result long enough to be cut fails it.

A tool result passes the layers from the inside out. truncate turns a
structured result (an object, a list) longer than max_chars into a string:
its JSON text, cut, and the marker. A layer outside it sees that string,
not the result: an output_coerce (mode "enforce") checking the result
against a schema that wants an object refuses it ("expected object, but
got string") and the call fails after the tool ran; a guard with phase
"after" reading a field of the result (result.status, result['rows'])
fails to evaluate, so it blocks the call (on_error "closed") or lets it
through unchecked, its deny never firing (on_error "open"). Neither
message says the cut is the cause, and short results pass, so tests with
small fixtures do not show it. Move the check inside truncate: it then
reads the whole result, and truncate cuts what passed. A guard reading
result whole (type(result) == string && result.contains(...)) and a
schema that accepts a string are not reported.`,
	Run: func(p *Pass) {
		chain := p.Policy.Chains["tool"]
		for _, t := range chain {
			if t.Use != "truncate" {
				continue
			}
			for _, e := range chain[:t.Index] {
				if !p.Overlap(e, t) {
					continue
				}
				rel := []dsl.Related{at(t, "%s is here, inside %s", t.Ref(), e.Ref())}
				switch e.Use {
				case "output_coerce":
					if stringField(e, "mode") == "annotate" || !p.coercesStructure(e, t) {
						continue
					}
					p.Reportf(e.Pos, rel, "%s sits outside %s: a result longer than %d characters reaches it cut, as a string, which its schema refuses, so the call fails after the tool ran with a schema error that does not name the cut; move %s inside %s",
						e.Ref(), t.Ref(), intField(t, "max_chars", 8000), e.Ref(), t.Ref())
				case "guard":
					if stringField(e, "phase") != "after" {
						continue
					}
					for _, f := range []string{"deny", "require"} {
						x := e.Expr(f)
						if x == nil {
							continue
						}
						reads := ResultReads(x.Source)
						if len(reads) == 0 {
							continue
						}
						effect := "so the guard blocks the call (on_error \"closed\") after the tool ran, with an evaluation error that does not name the cut"
						if stringField(e, "on_error") == "open" {
							effect = "and on_error \"open\" lets the call through unchecked: the " + f + " never applies to a long result"
						}
						p.Reportf(x.PosAt(reads[0].Offset), rel, "%s reads result.%s, but it sits outside %s: a result longer than %d characters reaches it cut, as a string, which has no field, %s; move %s inside %s",
							e.Ref(), reads[0].Field, t.Ref(), intField(t, "max_chars", 8000), effect, e.Ref(), t.Ref())
					}
				}
			}
		}
	},
}

// coercesStructure reports whether the output_coerce entry e refuses a
// string where a tool result reaches both e and the truncate t: its schema,
// or else the result_schema of one of those tools, does not accept one. A
// schema given as a file path has been read by the loader, its content
// standing in the entry's fields for the path.
func (a *Analysis) coercesStructure(e, t *dsl.Entry) bool {
	if s, set := e.Fields["schema"]; set {
		raw, err := json.Marshal(s)
		return err == nil && !acceptsString(raw)
	}
	return slices.ContainsFunc(a.SharedTools(e, t), func(tool *dsl.Tool) bool {
		return len(tool.ResultSchema) > 0 && !acceptsString(tool.ResultSchema)
	})
}

// acceptsString reports whether a JSON Schema may accept a string: its type
// is absent or names "string". A schema that does not decode is taken to
// accept one (the schema's own check reports it).
func acceptsString(raw json.RawMessage) bool {
	var s struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return true
	}
	switch t := s.Type.(type) {
	case string:
		return t == "string"
	case []any:
		return slices.Contains(t, any("string"))
	}
	return true
}
