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
// them, and the tool it names.
type rawArgs struct {
	tool string
	text json.RawMessage
}

type rawArgsKey struct{}

// withRawArgs returns ctx carrying the arguments text of the call of tool.
func withRawArgs(ctx context.Context, tool string, text json.RawMessage) context.Context {
	if len(text) == 0 {
		return ctx
	}
	return context.WithValue(ctx, rawArgsKey{}, rawArgs{tool: tool, text: text})
}

// sentArgs returns the arguments the upstream is sent for call c, whose
// decoded arguments are args: the text the client wrote (500.0, 1e2 and
// 1.50 as written, not as 500, 100 and 1.5) when the call is the client's
// and the chain passed its arguments unchanged, which the text decoded
// again tells; else args, as a layer rewrote them (file_check's resolved
// path), their numbers encoded from the values decoded (an integer beyond
// 2^53 keeps its digits: runtime.DecodeArgs). Text the chain read other
// than as written is not sent either: bytes that are not UTF-8, or a
// \uD800 escape of half a surrogate pair, which decode as U+FFFD, while
// the upstream may read them otherwise.
func sentArgs(ctx context.Context, c *runtime.ToolCall, args map[string]any) any {
	raw, ok := ctx.Value(rawArgsKey{}).(rawArgs)
	if !ok || raw.tool != c.Name || !utf8.Valid(raw.text) || surrogateEscape.Match(raw.text) {
		return args
	}
	var again map[string]any
	if runtime.DecodeArgs(raw.text, &again) != nil || again == nil || !reflect.DeepEqual(again, args) {
		return args
	}
	return raw.text
}

// surrogateEscape matches a JSON escape of a UTF-16 surrogate (either half).
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F]`)
