package serve

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/runtime"
)

// rawArgs is the text of a tools/call's arguments as its client wrote
// them, the tool it names, and the arguments decoded from the text, which
// the chain was handed.
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
	return context.WithValue(ctx, rawArgsKey{}, rawArgs{tool: tool, text: text, decoded: decoded})
}

// sentArgs returns the arguments the upstream is sent for call c, whose
// decoded arguments are args: the text the client wrote (500.0, 1e2 and
// 1.50 as written, not as 500, 100 and 1.5) when the call is the client's
// and the chain passed its arguments unchanged; else args, as a layer
// rewrote them (file_check's resolved path), their numbers encoded from the
// values decoded (an integer beyond 2^53 keeps its digits:
// runtime.DecodeArgs). Layers treat a call's arguments as read-only
// (runtime.ToolCall.Args) and hand the next a new map when they rewrite
// them: the chain passed them unchanged when args is the map decoded from
// the text, or a map equal to it, which the text need not be decoded again
// to tell. Text the chain read other than as written is not sent either:
// bytes that are not UTF-8, or a \uD800 escape of half a surrogate pair,
// which decode as U+FFFD, while the upstream may read them otherwise.
func sentArgs(ctx context.Context, c *runtime.ToolCall, args map[string]any) any {
	raw, ok := ctx.Value(rawArgsKey{}).(rawArgs)
	if !ok || raw.tool != c.Name || raw.decoded == nil || !utf8.Valid(raw.text) || surrogateEscape.Match(raw.text) {
		return args
	}
	if !sameMap(raw.decoded, args) && !reflect.DeepEqual(raw.decoded, args) {
		return args
	}
	return raw.text
}

// sameMap reports whether a and b are one map.
func sameMap(a, b map[string]any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// surrogateEscape matches a JSON escape of a UTF-16 surrogate (either half).
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F]`)
