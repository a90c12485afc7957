package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The top-level fields of a request body fall in three kinds: those the
// gateway carries to the upstream (into runtime.ChatRequest), those it
// cannot carry, and those it does not know. A field of the last two kinds
// is served only when it is absent, null, or at the API's default (a
// default asks for nothing, so nothing is lost); any other value is a 400
// naming the field, never a request served without it.

// openAICarried are the Chat Completions fields the gateway carries.
var openAICarried = []string{"model", "messages", "max_tokens", "max_completion_tokens", "tools", "tool_choice",
	"temperature", "top_p", "stop", "seed", "response_format", "stream", "stream_options", "metadata", "n", "user",
	"parallel_tool_calls"}

// anthropicCarried are the Messages fields the gateway carries.
var anthropicCarried = []string{"model", "max_tokens", "system", "messages", "tools", "tool_choice",
	"temperature", "top_p", "stop_sequences", "stream", "metadata", "output_config", "cache_control"}

// fieldDefaults are, for the fields whose default is not their JSON zero
// value, the values at which the field asks for nothing (besides null).
var fieldDefaults = map[string][]string{
	"web_search_options": {}, // {} asks for a web search
	"service_tier":       {`""`, `"auto"`, `"default"`},
	"modalities":         {"[]", `["text"]`},
	"thinking":           {`{"type":"disabled"}`},
}

// checkFields refuses the top-level fields of body that are not carried
// and not at their default.
func checkFields(body []byte, carried []string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil // the typed decoding reports it
	}
	var refused []string
	for name, v := range fields {
		if slices.Contains(carried, name) || isDefault(name, v) {
			continue
		}
		refused = append(refused, name)
	}
	if len(refused) == 0 {
		return nil
	}
	slices.Sort(refused)
	return fmt.Errorf("%s: not carried by the gateway to the model, which would answer without it; remove it (docs/serve.md lists the fields served)", strings.Join(refused, ", "))
}

// isDefault reports whether v is null, a zero value, or the default of the
// field name.
func isDefault(name string, v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	if string(t) == "null" {
		return true
	}
	defaults, ok := fieldDefaults[name]
	if !ok {
		defaults = []string{"false", "0", `""`, "{}", "[]"}
	}
	var c bytes.Buffer
	if json.Compact(&c, t) != nil {
		return false
	}
	return slices.Contains(defaults, c.String())
}

// notCarried is the error of a nested field the gateway cannot carry.
func notCarried(field string) error {
	return fmt.Errorf("%s: not carried by the gateway to the model, which would answer without it; remove it (docs/serve.md lists the fields served)", field)
}
