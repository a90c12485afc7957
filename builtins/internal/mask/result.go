package mask

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentc-dev/agentc/builtins/internal/jsonvalue"
	"github.com/agentc-dev/agentc/runtime"
)

// Result returns a tool's result v with what f masks masked, and how many items it masked
// (find finds them, for the values cut across the strings of an array: Value). Strings, maps,
// slices and other JSON-like values are masked as they are (a copy; the tool's value is never
// modified); bytes, and raw JSON that is not valid JSON, are masked as text; raw JSON is read
// as written and stays raw JSON (Args); any other value (a struct, also one nested in a map)
// is converted to its JSON form first, and returned in that form when it held an item. A
// result with no JSON form (a NaN) cannot be checked: the error says why.
func Result(v any, f Func, find Find) (any, int, error) {
	switch x := v.(type) {
	case nil:
		return v, 0, nil
	case []byte:
		// Read as text, as the agent loop reads it.
		if red, n := f(string(x)); n > 0 {
			return []byte(red), n, nil
		}
		return v, 0, nil
	case json.RawMessage:
		// Read as written (a key written twice holds two members, which the model reads
		// both, where a decoder into a map keeps the last) and returned as raw JSON; text
		// that is not JSON is read as text (Args).
		if red, ok := Args(x, f, find); ok {
			return red, 1, nil
		}
		return v, 0, nil
	}
	// Any other value is read as it is when it has the shapes of decoded JSON, else as its
	// JSON form (a struct, also one nested in a map), which is what the agent loop sends the
	// model; one with no JSON form cannot be checked.
	plain, err := jsonvalue.ToPlain(v)
	if err != nil {
		return nil, 0, err
	}
	red, n := Value(plain, f, find)
	if n == 0 {
		return v, 0, nil
	}
	return red, n, nil
}

// Results wraps next so that what f masks is masked in the result of a call and in the text of
// its error, as a layer of the tool chain masks what the model will read. A successful result
// is masked by Result; one that cannot be checked fails the call with a permanent error
// marked runtime.Ran, naming layer and finding ("secrets", "personal data"). A failed call's
// error text is masked too: the model reads it as it reads a result (an MCP upstream's error
// result is one), and the error still unwraps to the failure it stands for (its kind, its
// layer, whether the tool ran).
func Results(next runtime.ToolHandler, f Func, find Find, layer, finding string) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		v, err := next(ctx, c)
		if err != nil {
			if red, n := f(err.Error()); n > 0 {
				err = &maskedError{text: red, err: err, f: f}
			}
			return v, err
		}
		red, _, rerr := Result(v, f, find)
		if rerr != nil {
			return nil, runtime.Ran(&runtime.CallError{Kind: runtime.KindPermanent, Layer: layer,
				Message: fmt.Sprintf("tool %s: its result cannot be checked for %s: %v", c.Name, finding, rerr)})
		}
		return red, nil
	}
}

// maskedError is a failed call's error whose text held an item: Error is the masked text,
// and the error it wraps still tells what the failure is.
type maskedError struct {
	text string
	err  error
	f    Func
}

func (e *maskedError) Error() string { return e.text }
func (e *maskedError) Unwrap() error { return e.err }

// MaskText masks s as the error's text was masked: a reader that rewrites the text of the
// error it wraps (agentc serve withholds a transport's words) masks its rewriting so, to
// put it in the place of Error.
func (e *maskedError) MaskText(s string) string {
	red, _ := e.f(s)
	return red
}
