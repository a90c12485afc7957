package serve

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"regexp"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/runtime"
)

// rawArgs is the text of a tools/call's arguments as its client wrote
// them, the tool it names, and a copy of the arguments decoded from the
// text, the chain's own not shared with it.
type rawArgs struct {
	tool    string
	text    json.RawMessage
	decoded map[string]any
}

type rawArgsKey struct{}

// withRawArgs returns ctx carrying the arguments text of the call of tool,
// and decoded, the arguments the text decodes to (runtime.DecodeArgs; nil
// for no arguments) that the call's chain is handed.
func withRawArgs(ctx context.Context, tool string, text json.RawMessage, decoded map[string]any) context.Context {
	if len(text) == 0 {
		return ctx
	}
	var own map[string]any
	if decoded != nil {
		own, _ = copyJSON(decoded).(map[string]any)
	}
	return context.WithValue(ctx, rawArgsKey{}, rawArgs{tool: tool, text: text, decoded: own})
}

// sentArgs returns the arguments the upstream is sent for call c, whose
// decoded arguments are args: the text the client wrote (500.0, 1e2 and
// 1.50 as written, not as 500, 100 and 1.5) when the call is the client's
// and the chain passed its arguments unchanged; else args, as a layer
// rewrote them (file_check's resolved path), their numbers encoded from the
// values decoded (an integer beyond 2^53 keeps its digits:
// runtime.DecodeArgs). The chain passed them unchanged when args equal a
// copy of the map decoded from the text, made before the chain ran, which
// the text need not be decoded again to tell: a layer that wrote into the
// map it was handed (runtime.ToolCall.Args asks layers to keep it
// read-only; a host's layer may not), at its top or below, has its edit
// sent, not the client's text. Text the chain read other than as written is not sent either:
// bytes that are not UTF-8, or a \uD800 escape of half a surrogate pair,
// which decode as U+FFFD, while the upstream may read them otherwise.
func sentArgs(ctx context.Context, c *runtime.ToolCall, args map[string]any) any {
	raw, ok := ctx.Value(rawArgsKey{}).(rawArgs)
	if !ok || raw.tool != c.Name || raw.decoded == nil || !utf8.Valid(raw.text) || surrogateEscape.Match(raw.text) {
		return args
	}
	if !equalJSON(raw.decoded, args) {
		return args
	}
	return raw.text
}

// copyJSON returns a copy of v, a value runtime.DecodeArgs decodes, that
// shares no map or slice with it.
func copyJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = copyJSON(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyJSON(e)
		}
		return out
	}
	return v
}

// equalJSON reports whether a and b, values runtime.DecodeArgs decodes
// (a and b may be of any other type a layer put there, compared as
// reflect.DeepEqual compares them), are equal.
func equalJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, e := range a {
			f, ok := b[k]
			if !ok || !equalJSON(e, f) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !equalJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case string:
		b, ok := b.(string)
		return ok && a == b
	case float64:
		b, ok := b.(float64)
		return ok && a == b && math.Signbit(a) == math.Signbit(b)
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	case nil:
		return b == nil
	}
	return reflect.DeepEqual(a, b)
}

// surrogateEscape matches a JSON escape of a UTF-16 surrogate (either half).
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F]`)
