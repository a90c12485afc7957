package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
)

// The fields of a request body, at the top level and nested (messages,
// content parts, tools, tool_choice...), fall in three kinds: those the
// gateway carries to the upstream (into runtime.ChatRequest), those it
// cannot carry, and those it does not know. A field of the last two kinds
// is served only when it is absent, null, or at the API's default (a
// default asks for nothing, so nothing is lost); any other value is a 400
// naming the field by its path (messages[2].content[0].citations), never a
// request served without it.
//
// The check walks the body once, after the typed decoding has found it
// well-formed, and allocates nothing unless it refuses a field.

// shape lists the fields an object of a request carries.
type shape struct {
	fields []field
	// by names the field whose value (a string) selects the variant of
	// the object: its fields are then fields plus the variant's. An object
	// whose variant is not listed is not checked: the typed decoding
	// refuses it.
	by       string
	variants []variant
}

type variant struct {
	value  string
	fields []field
}

// field is a carried field; the objects of its value (an object, or an
// array of objects) are checked against shape, when set. A field without a
// shape holds free-form JSON (a schema, tool arguments, metadata) or a
// scalar the typed decoding checks.
type field struct {
	name  string
	shape *shape
}

// lookup returns the carried field of an object of variant v that name
// matches as encoding/json matches a key to a struct's field (exactly, or
// else whatever its case: Max_Tokens, max_to\u212aens), and its index
// among the fields of the shape then of the variant.
func (s *shape) lookup(name []byte, v *variant) (field, int, bool) {
	if f, i, ok := s.find(name, v, func(n string) bool { return n == string(name) }); ok {
		return f, i, true
	}
	return s.find(name, v, func(n string) bool { return bytes.EqualFold([]byte(n), name) })
}

func (s *shape) find(name []byte, v *variant, match func(string) bool) (field, int, bool) {
	for i, f := range s.fields {
		if match(f.name) {
			return f, i, true
		}
	}
	if v != nil {
		for i, f := range v.fields {
			if match(f.name) {
				return f, len(s.fields) + i, true
			}
		}
	}
	return field{}, 0, false
}

func fields(names ...string) []field {
	fs := make([]field, len(names))
	for i, n := range names {
		fs[i] = field{name: n}
	}
	return fs
}

func obj(names ...string) *shape { return &shape{fields: fields(names...)} }

// The Chat Completions request.
var openAIShape = func() *shape {
	part := &shape{fields: fields("type"), by: "type", variants: []variant{
		{"text", fields("text")},
		{"refusal", fields("refusal")},
		{"image_url", []field{{"image_url", obj("url", "detail")}}},
		{"file", []field{{"file", obj("file_data", "filename")}}},
	}}
	call := &shape{fields: []field{{"id", nil}, {"type", nil}, {"function", obj("name", "arguments")}, {"custom", obj("name", "input")}}}
	// A message's name (its author) is carried, but not on a tool message:
	// the API has none there.
	name := field{"name", nil}
	message := &shape{fields: []field{{"role", nil}, {"content", part}}, by: "role", variants: []variant{
		{"system", []field{name}}, {"developer", []field{name}}, {"user", []field{name}},
		{"assistant", []field{name, {"tool_calls", call}, {"refusal", nil}}},
		{"tool", fields("tool_call_id")},
	}}
	custom := obj("name", "description")
	custom.fields = append(custom.fields, field{"format", &shape{fields: []field{{"type", nil}, {"grammar", obj("definition", "syntax")}}}})
	tool := &shape{fields: []field{{"type", nil}, {"function", obj("name", "description", "parameters", "strict")}, {"custom", custom}}}
	return &shape{fields: []field{{"model", nil}, {"messages", message}, {"max_tokens", nil}, {"max_completion_tokens", nil},
		{"tools", tool}, {"tool_choice", &shape{fields: []field{{"type", nil}, {"function", obj("name")}, {"custom", obj("name")}}}},
		{"temperature", nil}, {"top_p", nil}, {"stop", nil}, {"seed", nil},
		{"response_format", &shape{fields: []field{{"type", nil}, {"json_schema", obj("name", "schema", "strict")}}}},
		{"stream", nil},
		// include_obfuscation pads the chunks against a side channel; the
		// gateway sends none, which either value allows.
		{"stream_options", obj("include_usage", "include_obfuscation")},
		{"metadata", nil}, {"n", nil}, {"user", nil}, {"parallel_tool_calls", nil}, {"reasoning_effort", nil},
		{"verbosity", nil}, {"safety_identifier", nil}, {"prompt_cache_key", nil},
		{"frequency_penalty", nil}, {"presence_penalty", nil}, {"logit_bias", nil}}}
}()

// The Messages request.
var anthropicShape = func() *shape {
	cc := obj("type", "ttl")
	block := &shape{fields: []field{{"type", nil}, {"cache_control", cc}}, by: "type"}
	block.variants = []variant{
		{"text", fields("text")},
		{"image", []field{{"source", obj("type", "media_type", "data", "url")}}},
		// A document's title and context are text the model reads that
		// the policy's layers do not; citations answer with blocks the
		// gateway does not carry.
		{"document", []field{{"source", obj("type", "media_type", "data", "url")}}},
		{"tool_use", fields("id", "name", "input")},
		{"tool_result", []field{{"tool_use_id", nil}, {"content", block}, {"is_error", nil}}},
		{"thinking", fields("thinking", "signature")},
		{"redacted_thinking", fields("data")},
	}
	message := &shape{fields: []field{{"role", nil}, {"content", block}}}
	toolFields := []field{{"name", nil}, {"description", nil}, {"input_schema", nil}, {"strict", nil}, {"cache_control", cc}}
	tool := &shape{fields: fields("type"), by: "type", variants: []variant{{"", toolFields}, {"custom", toolFields}}}
	return &shape{fields: []field{{"model", nil}, {"max_tokens", nil}, {"system", block}, {"messages", message},
		{"tools", tool}, {"tool_choice", obj("type", "name", "disable_parallel_tool_use")},
		{"temperature", nil}, {"top_p", nil}, {"top_k", nil}, {"stop_sequences", nil}, {"stream", nil},
		{"metadata", obj("user_id")},
		{"output_config", &shape{fields: []field{{"effort", nil}, {"format", obj("type", "schema")}}}},
		{"cache_control", cc},
		{"thinking", obj("type", "budget_tokens", "display")},
		// An edit's parameters (keep, trigger...) are relayed as sent,
		// once the decoding checked their shapes (editParams);
		// compaction is refused by the decoding.
		{"context_management", &shape{fields: []field{{"edits", &shape{fields: fields("type"), by: "type", variants: []variant{
			{runtime.ClearThinking, fields("keep")},
			{runtime.ClearToolUses, fields("trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs")},
		}}}}}}}}
}()

// fieldDefaults are, for the fields whose default is not their JSON zero
// value, the values at which the field asks for nothing (besides null).
var fieldDefaults = map[string][]string{
	"web_search_options": {}, // {} asks for a web search
	"service_tier":       {`""`, `"auto"`, `"default"`},
	"modalities":         {"[]", `["text"]`},
}

// zeroValues are the values at which any other field asks for nothing.
var zeroValues = []string{"false", "0", `""`, "{}", "[]"}

// checkFields refuses the fields of body, at any depth s describes, that
// are not carried and not at their default. body is well-formed JSON.
func checkFields(body []byte, s *shape) error {
	c := fieldCheck{b: body}
	i := c.ws(0)
	if i >= len(body) || body[i] != '{' {
		return nil // the typed decoding reports it
	}
	c.object(i, s)
	if len(c.keys) > 0 {
		return errors.New(c.keys[0])
	}
	if len(c.refused) == 0 {
		return nil
	}
	slices.Sort(c.refused)
	return notCarried(strings.Join(slices.Compact(c.refused), ", "))
}

// notCarried is the error of fields the gateway cannot carry.
func notCarried(fields string) error {
	return fmt.Errorf("%s: not carried by the gateway to the model, which would answer without it; remove it (docs/serve.md lists the fields served)", fields)
}

type fieldCheck struct {
	b       []byte
	refused []string
	// keys are the problems of keys that encoding/json and a reader of
	// the text that reads keys exactly, and may read the first of a key
	// given twice (the API, a log, a guard before the gateway), would
	// read apart: a carried field given twice (whatever the case of
	// either) or spelt in another case.
	keys []string
	// at is the path to the value checked: a field of an object, or an
	// element of an array (index >= 0).
	at    [16]step
	depth int
}

type step struct {
	name  string
	index int
}

// path returns the path to the value checked, then to the field name, as
// messages[2].content[0].citations.
func (c *fieldCheck) path(name []byte) string {
	var b []byte
	for _, s := range c.at[:c.depth] {
		if s.index >= 0 {
			b = append(b, '[')
			b = strconv.AppendInt(b, int64(s.index), 10)
			b = append(b, ']')
			continue
		}
		if len(b) > 0 {
			b = append(b, '.')
		}
		b = append(b, s.name...)
	}
	if len(b) > 0 {
		b = append(b, '.')
	}
	return string(append(b, name...))
}

// object checks the object at b[i] ('{').
func (c *fieldCheck) object(i int, s *shape) {
	var v *variant
	if s.by != "" {
		// The variant is the one the typed decoding reads: its key may be
		// spelt with escapes, and given twice it is refused, since
		// encoding/json reads the last and a parser upstream (of an object
		// relayed as sent) may read the first.
		var sel []byte
		found := false
		for k, val := c.member(c.ws(i + 1)); val >= 0; k, val = c.member(c.after(val)) {
			if k = unescaped(k); !bytes.EqualFold(k, []byte(s.by)) {
				continue
			}
			if found {
				c.twice(k)
				return
			}
			if string(k) != s.by {
				c.spelt(k, s.by)
				return
			}
			found = true
			if c.b[val] == '"' {
				sel = unescaped(c.b[val+1 : c.skip(val)-1])
			}
		}
		for n := range s.variants {
			if s.variants[n].value == string(sel) {
				v = &s.variants[n]
			}
		}
		if v == nil {
			return
		}
	}
	var seen uint64 // the carried fields given, by index
	for k, val := c.member(c.ws(i + 1)); val >= 0; k, val = c.member(c.after(val)) {
		k = unescaped(k)
		f, n, ok := s.lookup(k, v)
		if ok && n < 64 {
			if seen&(1<<n) != 0 {
				c.twice(k)
				continue
			}
			seen |= 1 << n
		}
		switch {
		case ok && f.name != string(k):
			c.spelt(k, f.name)
		case !ok:
			if !isDefault(k, c.b[val:c.skip(val)]) {
				c.refused = append(c.refused, c.path(k))
			}
		case f.shape != nil && (c.b[val] == '{' || c.b[val] == '[') && c.depth < len(c.at):
			// (Deeper than any request the typed decoding accepts.)
			c.at[c.depth] = step{name: f.name, index: -1}
			c.depth++
			if c.b[val] == '{' {
				c.object(val, f.shape)
			} else {
				c.array(val, f.shape)
			}
			c.depth--
		}
	}
}

// twice notes the key k of the object checked, which gives a carried
// field given before it in this object.
func (c *fieldCheck) twice(k []byte) {
	c.keys = append(c.keys, c.path(k)+": given twice (keys differing only in case count as one); send it once")
}

// spelt notes the key k of the object checked, which encoding/json reads
// as the carried field name, spelt otherwise.
func (c *fieldCheck) spelt(k []byte, name string) {
	c.keys = append(c.keys, fmt.Sprintf("%s: the field is spelt %q; keys are read exactly", c.path(k), name))
}

// array checks the objects of the array at b[i] ('[').
func (c *fieldCheck) array(i int, s *shape) {
	i = c.ws(i + 1)
	for n := 0; i < len(c.b) && c.b[i] != ']'; n++ {
		if c.b[i] == '{' && c.depth < len(c.at) {
			c.at[c.depth] = step{index: n}
			c.depth++
			c.object(i, s)
			c.depth--
		}
		i = c.after(i)
	}
}

// member returns the key (its inside, quotes off) and the value offset of
// the object member at b[i], or a negative offset at the end of the object.
func (c *fieldCheck) member(i int) ([]byte, int) {
	if i >= len(c.b) || c.b[i] != '"' {
		return nil, -1
	}
	kend := c.skip(i)
	val := c.ws(c.ws(kend) + 1) // past the colon
	return c.b[i+1 : kend-1], val
}

// after returns the index of what follows the value at b[i] and its comma,
// if any.
func (c *fieldCheck) after(i int) int {
	i = c.ws(c.skip(i))
	if i < len(c.b) && c.b[i] == ',' {
		i = c.ws(i + 1)
	}
	return i
}

// unescaped returns the inside of a JSON string, unescaped when it holds
// an escape (keys and type names rarely do).
func unescaped(raw []byte) []byte {
	if !slices.Contains(raw, '\\') {
		return raw
	}
	var s string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	if json.Unmarshal(q, &s) != nil {
		return raw
	}
	return []byte(s)
}

func (c *fieldCheck) ws(i int) int {
	for i < len(c.b) {
		switch c.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skip returns the index after the value at b[i].
func (c *fieldCheck) skip(i int) int {
	b := c.b
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		for i++; i < len(b); i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
		return i
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = c.skip(i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// isDefault reports whether v is null, a zero value, or the default of the
// field name.
func isDefault(name, v []byte) bool {
	if compactEqual(v, "null") {
		return true
	}
	defaults, ok := fieldDefaults[string(name)]
	if !ok {
		defaults = zeroValues
	}
	for _, d := range defaults {
		if compactEqual(v, d) {
			return true
		}
	}
	return false
}

// compactEqual reports whether the JSON value v, without its insignificant
// white space, is want (compact JSON).
func compactEqual(v []byte, want string) bool {
	j := 0
	in := false // inside a string
	for i := 0; i < len(v); i++ {
		ch := v[i]
		if !in && (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
			continue
		}
		if j >= len(want) || want[j] != ch {
			return false
		}
		j++
		switch {
		case in && ch == '\\':
			if i+1 >= len(v) || j >= len(want) || want[j] != v[i+1] {
				return false
			}
			i++
			j++
		case ch == '"':
			in = !in
		}
	}
	return j == len(want)
}

// MaxOutputTokens bounds a request's output bound (max_tokens,
// max_completion_tokens, thinking.budget_tokens): no model writes that
// much in one answer (the largest take 128,000 tokens), so a larger bound
// is a client's mistake or a probe, refused rather than passed upstream or
// into a budget's estimate of the call.
const MaxOutputTokens = 1_000_000

// outputBound refuses an output bound below 1 (0 is not "no bound": the
// APIs refuse it, and read as unset it would be served without one) or
// over MaxOutputTokens. field is its path in the request; nil is unset.
func outputBound(field string, v *int) error {
	switch {
	case v == nil:
		return nil
	case *v < 1:
		return fmt.Errorf("%s: must be at least 1, got %d", field, *v)
	case *v > MaxOutputTokens:
		return fmt.Errorf("%s: at most %d, got %d: no model writes more in one answer", field, MaxOutputTokens, *v)
	}
	return nil
}

// forcedTool refuses a tool choice forcing the tool name when the call
// model would read the name as a tool choice mode (runtime.ChatRequest's
// ToolChoice holds a mode or a tool's name): forcing a tool named "none"
// would reach the model as forbidding every tool call. field is the
// name's path in the request.
func forcedTool(field, name string) error {
	switch name {
	case "auto", "none", "required":
		return fmt.Errorf("%s: %q: the gateway cannot force a tool so named, which it would pass on as the tool choice %q; rename the tool, or send the tool choice \"required\" with this tool alone", field, name, name)
	}
	return nil
}
