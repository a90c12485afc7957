package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentc-dev/agentc/internal/jsonnum"
	"github.com/agentc-dev/agentc/internal/jsonpointer"
)

// LayerTools is the layer name of the refusals made on entry to the tool
// chain, before any layer runs, by the policy's tool declarations: a call
// to a tool the policy does not declare (unless its
// settings.allow_undeclared_tools is true), and arguments that do not
// match the tool's declared args schema. Both are *BlockedError.
const LayerTools = "tools"

// maxArgFaults bounds the per-field messages of one refusal, and
// maxFaultLen the length of each.
const (
	maxArgFaults = 10
	maxFaultLen  = 200
)

// argsSchemaURL is the name a tool's schema is compiled under.
const argsSchemaURL = "agentc:///args.json"

// errNoRemoteRefs refuses every $ref that leaves the schema: compiling a
// tool's schema never reads a file or the network.
var errNoRemoteRefs = errors.New("a tool's args schema may only refer inside itself ($ref to another document)")

// compileArgs compiles a tool's JSON Schema (draft 2020-12 unless it names
// another with $schema). It returns nil for an absent schema or one that
// accepts everything (true, {}).
func compileArgs(raw json.RawMessage) (*jsonschema.Schema, error) {
	trimmed := bytes.TrimSpace(raw)
	switch string(trimmed) {
	case "", "true", "{}", "null":
		return nil, nil
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.LoadURL = func(string) (io.ReadCloser, error) { return nil, errNoRemoteRefs }
	if err := c.AddResource(argsSchemaURL, bytes.NewReader(trimmed)); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	s, err := c.Compile(argsSchemaURL)
	if err != nil {
		return nil, errors.New(strings.ReplaceAll(strings.TrimPrefix(err.Error(), "jsonschema: "), argsSchemaURL, "args"))
	}
	return s, nil
}

// DecodeArgs decodes JSON arguments into v (a pointer, as for
// json.Unmarshal) so that every number is the one its text spells: a
// number float64 holds exactly (its shortest decimal form is the number
// written: 5, 0.1, 1e300) is a float64, as encoding/json decodes it; an
// integer written without fraction or exponent that float64 cannot hold
// but int64 can (9007199254740993) is an int64; any other number (more
// digits than float64 holds, an exponent out of its range, an integer
// beyond int64) is a json.Number of its text. encoding/json would round
// each of the latter to a float64 neighbour, and the tool chain would
// decide on another number than the one the call carries; it refuses a
// call whose arguments hold such a json.Number (see ToolRequest).
func DecodeArgs(data []byte, v any) error { return jsonnum.Decode(data, v) }

// checkNumbers refuses arguments holding a json.Number that neither
// float64 nor int64 holds exactly (DecodeArgs leaves such numbers so):
// every check would decide on a rounded value, while the call carries the
// number written.
func checkNumbers(tool string, args map[string]any) error {
	if !jsonnum.HasInexact(args) {
		return nil
	}
	var faults []string
	jsonnum.Inexact(args, "args", func(path string, n json.Number) bool {
		faults = append(faults, fmt.Sprintf("%s: %s", path, clip(string(n), 40)))
		return true
	})
	sort.Strings(faults)
	if len(faults) > maxArgFaults {
		faults = append(faults[:maxArgFaults], fmt.Sprintf("and %d more", len(faults)-maxArgFaults))
	}
	return &BlockedError{Layer: LayerTools, Message: fmt.Sprintf(
		"the arguments of %s hold a number that cannot be checked exactly (more digits or a larger exponent than a float64 holds, or an integer beyond int64): %s",
		tool, strings.Join(faults, "; "))}
}

// CheckArgsSchema reports why raw is not a tool args schema Build
// compiles (a declaration's args, Deps.ToolArgs), or nil.
func CheckArgsSchema(raw json.RawMessage) error {
	_, err := compileArgs(raw)
	return err
}

// checkArgs validates a call's arguments against the tool's schema. It
// returns the refusal, naming each field that does not match, or nil.
func checkArgs(tool string, s *jsonschema.Schema, args map[string]any) error {
	if args == nil {
		args = map[string]any{}
	}
	err := validateGo(s, args)
	var bad jsonschema.InvalidJSONTypeError
	if errors.As(err, &bad) || errors.Is(err, errValidatorPanic) {
		// Go values of types JSON does not have (an int16, a struct, a
		// []string), or that it cannot hold (a NaN or infinite number,
		// which the validator cannot compare with a bound): validate
		// their JSON form, which refuses the latter. A json.Number the
		// validator cannot read as a number (1e999999999) fails it on the
		// JSON form too: the call cannot be checked, and is refused.
		v, jerr := jsonForm(args)
		if jerr != nil {
			return &BlockedError{Layer: LayerTools, Message: fmt.Sprintf("the arguments of %s are not JSON: %v", tool, jerr)}
		}
		err = validateGo(s, v)
	}
	if err == nil {
		if faults := caseFaults(s, args); len(faults) > 0 {
			if len(faults) > maxArgFaults {
				faults = append(faults[:maxArgFaults], fmt.Sprintf("and %d more", len(faults)-maxArgFaults))
			}
			return &BlockedError{Layer: LayerTools, Message: fmt.Sprintf("the arguments of %s do not match its args schema: %s", tool, strings.Join(faults, "; "))}
		}
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &BlockedError{Layer: LayerTools, Message: fmt.Sprintf("the arguments of %s cannot be checked against its args schema: %v", tool, err)}
	}
	faults := argFaults(ve)
	if len(faults) > maxArgFaults {
		faults = append(faults[:maxArgFaults], fmt.Sprintf("and %d more", len(faults)-maxArgFaults))
	}
	return &BlockedError{Layer: LayerTools, Message: fmt.Sprintf("the arguments of %s do not match its args schema: %s", tool, strings.Join(faults, "; "))}
}

// errValidatorPanic marks a panic of the schema validator on a Go value.
var errValidatorPanic = errors.New("the args schema validator failed on the value")

// validateGo validates the Go value v against s, turning a panic of the
// validator (it compares a NaN or infinite float64 with a numeric bound
// through a nil big.Rat) into an error wrapping errValidatorPanic.
func validateGo(s *jsonschema.Schema, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errValidatorPanic, r)
		}
	}()
	return s.Validate(v)
}

// jsonForm returns the JSON form of v (numbers as json.Number).
func jsonForm(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// argFaults returns one message per failing leaf of a validation, "FIELD:
// PROBLEM" with the field as args.a.b (args for the object itself), sorted
// and without repeats.
func argFaults(ve *jsonschema.ValidationError) []string { return valueFaults(ve, "args") }

// valueFaults lists the faults of a validation as argFaults does, naming
// the value's root root.
func valueFaults(ve *jsonschema.ValidationError, root string) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		field := root
		for _, tok := range jsonpointer.Tokens(e.InstanceLocation) {
			field += "." + tok
		}
		f := field + ": " + clip(e.Message, maxFaultLen)
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	walk(ve)
	sort.Strings(out)
	return out
}

// maxCaseDepth bounds the nesting caseFaults follows, in the value and
// through the schema's references.
const maxCaseDepth = 64

// caseFaults lists the members of the objects of the arguments args whose
// names differ only in case (Unicode simple folding, as strings.EqualFold
// and Go's encoding/json compare them) from a property the schema declares
// for that object, or, declared themselves, from another member the object
// gives, as "args.a.B: ..." sorted. A tool that decodes its
// arguments case-insensitively, as encoding/json does into a struct, reads
// such a member as the property, the last one winning: {"amount": 5,
// "Amount": 500} refunds 500 where a guard reading args.amount saw 5. The
// schema's properties are found through $ref, allOf, anyOf, oneOf, items
// and prefixItems.
func caseFaults(s *jsonschema.Schema, args map[string]any) []string {
	w := caseWalkers.Get().(*caseWalker)
	w.path = append(w.path[:0], "args")
	root := append(w.scratch(0), s)
	w.keep(0, root)
	w.walk(root, args, 0)
	out := w.out
	w.out = nil
	clear(w.path[:cap(w.path)]) // the names of this call's members are not kept
	caseWalkers.Put(w)
	sort.Strings(out)
	return out
}

// caseWalkers recycles the walkers of caseFaults: a clean call allocates
// nothing for its walk.
var caseWalkers = sync.Pool{New: func() any { return new(caseWalker) }}

// A caseWalker holds the state of one caseFaults walk: the faults found,
// the path down to the value walked (joined only for a fault) and, for
// each depth, the schemas of the member walked at it, reused from one
// member to the next.
type caseWalker struct {
	out   []string
	path  []string
	depth [][]*jsonschema.Schema
	// exp holds, for each depth, the schemas of the value walked at it
	// with those their references lead to (expandSchemas).
	exp [][]*jsonschema.Schema
}

// scratch returns the empty slice of schemas of depth d.
func (w *caseWalker) scratch(d int) []*jsonschema.Schema {
	for len(w.depth) <= d {
		w.depth = append(w.depth, nil)
	}
	return w.depth[d][:0]
}

// expand returns expandSchemas of schemas, the value of depth d's, on
// the walker's buffer of that depth.
func (w *caseWalker) expand(d int, schemas []*jsonschema.Schema) []*jsonschema.Schema {
	for len(w.exp) <= d {
		w.exp = append(w.exp, nil)
	}
	out := expandSchemas(w.exp[d][:0], schemas)
	if len(out) > 0 && len(schemas) > 0 && &out[0] != &schemas[0] {
		w.exp[d] = out[:0]
	}
	return out
}

// keep stores sub, built on scratch(d), for the next member of depth d.
func (w *caseWalker) keep(d int, sub []*jsonschema.Schema) {
	w.depth[d] = sub[:0]
}

func (w *caseWalker) walk(schemas []*jsonschema.Schema, v any, depth int) {
	if depth > maxCaseDepth {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		schemas = w.expand(depth, schemas)
		for k, x := range v {
			sub := w.scratch(depth + 1)
			for _, sc := range schemas {
				if ps, ok := sc.Properties[k]; ok {
					sub = append(sub, ps)
				}
			}
			w.keep(depth+1, sub)
			if len(sub) > 0 {
				if twin := givenTwin(schemas, k, v); twin != "" {
					w.out = append(w.out, fmt.Sprintf("%s: differs only in case from the member %q the same object gives, both declared properties, which a tool decoding its arguments case-insensitively reads as one", strings.Join(append(w.path, k), "."), twin))
				}
				w.path = append(w.path, k)
				w.walk(sub, x, depth+1)
				w.path = w.path[:len(w.path)-1]
				continue
			}
			if name := foldedProperty(schemas, k); name != "" {
				w.out = append(w.out, fmt.Sprintf("%s: differs only in case from the declared property %q, which a tool decoding its arguments case-insensitively reads it as", strings.Join(append(w.path, k), "."), name))
			}
		}
	case []any:
		schemas = w.expand(depth, schemas)
		for i, el := range v {
			switch el.(type) {
			case map[string]any, []any:
			default:
				continue
			}
			sub := w.scratch(depth + 1)
			for _, sc := range schemas {
				if i < len(sc.PrefixItems) {
					sub = append(sub, sc.PrefixItems[i])
				} else if sc.Items2020 != nil {
					sub = append(sub, sc.Items2020)
				}
				switch it := sc.Items.(type) {
				case *jsonschema.Schema:
					sub = append(sub, it)
				case []*jsonschema.Schema:
					if i < len(it) {
						sub = append(sub, it[i])
					}
				}
			}
			w.keep(depth+1, sub)
			if len(sub) > 0 {
				w.path = append(w.path, strconv.Itoa(i))
				w.walk(sub, el, depth+1)
				w.path = w.path[:len(w.path)-1]
			}
		}
	}
}

// givenTwin returns the first, in sorted order, of the properties the
// schemas declare that obj gives beside k, whose names differ from k only
// in case and sort before it (so that a pair is reported once), or "".
func givenTwin(schemas []*jsonschema.Schema, k string, obj map[string]any) string {
	best := ""
	for _, sc := range schemas {
		for name := range sc.Properties {
			if name < k && (best == "" || name < best) && strings.EqualFold(k, name) {
				if _, given := obj[name]; given {
					best = name
				}
			}
		}
	}
	return best
}

// foldedProperty returns the first, in sorted order, of the properties the
// schemas declare whose name differs from k only in case, or "".
func foldedProperty(schemas []*jsonschema.Schema, k string) string {
	best := ""
	for _, sc := range schemas {
		for name := range sc.Properties {
			if strings.EqualFold(k, name) && (best == "" || name < best) {
				best = name
			}
		}
	}
	return best
}

// expandSchemas returns schemas with every schema their $ref, allOf,
// anyOf and oneOf lead to, each once, appended to buf (empty), unless
// none leads to another: then schemas.
func expandSchemas(buf, schemas []*jsonschema.Schema) []*jsonschema.Schema {
	if !slices.ContainsFunc(schemas, func(sc *jsonschema.Schema) bool {
		return sc.Ref != nil || sc.DynamicRef != nil || sc.RecursiveRef != nil || len(sc.AllOf) > 0 || len(sc.AnyOf) > 0 || len(sc.OneOf) > 0
	}) {
		return schemas
	}
	out := buf
	// seen is made only for a schema of many branches: below, a scan of
	// out is cheaper than a map, and allocates nothing.
	var seen map[*jsonschema.Schema]bool
	var add func(sc *jsonschema.Schema, depth int)
	add = func(sc *jsonschema.Schema, depth int) {
		if sc == nil || depth > maxCaseDepth {
			return
		}
		if seen == nil && len(out) >= 32 {
			seen = map[*jsonschema.Schema]bool{}
			for _, x := range out {
				seen[x] = true
			}
		}
		if seen != nil && seen[sc] || seen == nil && slices.Contains(out, sc) {
			return
		}
		if seen != nil {
			seen[sc] = true
		}
		out = append(out, sc)
		add(sc.Ref, depth+1)
		add(sc.DynamicRef, depth+1)
		add(sc.RecursiveRef, depth+1)
		for _, list := range [][]*jsonschema.Schema{sc.AllOf, sc.AnyOf, sc.OneOf} {
			for _, x := range list {
				add(x, depth+1)
			}
		}
	}
	for _, sc := range schemas {
		add(sc, 0)
	}
	return out
}
