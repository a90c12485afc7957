package serve

import (
	"bytes"
	"encoding/json"
	"strings"
)

// oldDrafts name, in a schema's $schema, the JSON Schema drafts before
// 2019-09, which have no unevaluatedProperties: the validator ignores the
// keyword in a schema that names one.
var oldDrafts = []string{"draft-03", "draft-04", "draft-06", "draft-07"}

// applicators are the keywords of an object schema that evaluate its
// properties in other schemas, beside which unevaluatedProperties is not
// additionalProperties.
var applicators = []string{"allOf", "anyOf", "oneOf", "not", "$ref", "if", "then", "else", "dependencies"}

// closeUnevaluated returns an upstream tool's input schema raw as it is
// checked. A schema naming a draft before 2019-09 whose top level closes
// its object with unevaluatedProperties, which the draft does not have,
// would be checked as an open object: where the keyword stands beside
// properties and patternProperties alone, it means what
// additionalProperties means there, and the schema is returned with
// additionalProperties set to its value, so that a call carrying another
// argument is refused as the upstream declared. inert reports an
// unevaluatedProperties left checking nothing: beside an applicator
// (allOf, $ref...) at the top level, or in a schema nested below it.
func closeUnevaluated(raw json.RawMessage) (out json.RawMessage, inert bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return raw, false
	}
	var draft string
	if json.Unmarshal(top["$schema"], &draft) != nil || !oldDraft(draft) {
		return raw, false
	}
	closing, ok := top["unevaluatedProperties"]
	rest := raw
	if ok {
		delete(top, "unevaluatedProperties")
		b, err := json.Marshal(top)
		if err != nil {
			return raw, false
		}
		rest = b
	}
	// A member of properties that is called so counts too: a warning
	// more, never a check less.
	inert = bytes.Contains(rest, []byte(`"unevaluatedProperties"`))
	if !ok {
		return raw, inert
	}
	if _, has := top["additionalProperties"]; has {
		// additionalProperties evaluates every other member: none is left
		// for unevaluatedProperties.
		return raw, inert
	}
	for _, k := range applicators {
		if _, has := top[k]; has {
			return raw, true
		}
	}
	top["additionalProperties"] = closing
	b, err := json.Marshal(top)
	if err != nil {
		return raw, true
	}
	return b, inert
}

// oldDraft reports whether the $schema id names a draft before 2019-09.
func oldDraft(id string) bool {
	for _, d := range oldDrafts {
		if strings.Contains(id, d) {
			return true
		}
	}
	return false
}
