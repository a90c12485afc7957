package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

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
