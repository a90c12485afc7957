package pii_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// A card or an IBAN cut across consecutive string elements of an array, after a group or
// inside one, is found: masked in every element it runs over with "redact", refused with
// "block". Elements of different arrays or values are read apart; read run together, numbers
// of one length are a list, not a card, and an address whole where its element ends keeps
// a word starting the next.
func TestCardAcrossArrayElements(t *testing.T) {
	for name, parts := range map[string][]any{
		"groups over elements":       {"card 4111 1111", "1111 1111 thanks"},
		"after a number in the list": {7.0, "4111 1111", "1111 1111"},
		"cut inside a group":         {"card 4111 11", "11 1111 1111"},
		"digits cut":                 {"4111111111", "111111"},
		"cut after a space":          {"card 4111 1111 ", "1111 1111"},
		"fixed-size chunks":          {"the card is 4", "111 1111 111", "1 1111, than", "ks"},
		"iban in groups":             {"IBAN GB29 NWBK 6016", "1331 9268 19"},
		"iban cut":                   {"IBAN GB29NWBK60", "161331926819"},
		"iban cut inside a group":    {"GB29 NWBK 60", "16 1331 9268 19"},
	} {
		t.Run(name+"/tool arguments", func(t *testing.T) {
			assertArgsMaskedAndBlocked(t, map[string]any{"lines": parts}, "/lines")
		})
		t.Run(name+"/tool call arguments sent back", func(t *testing.T) {
			args, err := json.Marshal(map[string]any{"lines": parts})
			require.NoError(t, err)
			got, err := seenByModel(t, `{"action":"redact"}`, []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: args}}}})
			require.NoError(t, err)
			assert.Contains(t, got, "[REDACTED:")
			assertNoPiece(t, got)
		})
		t.Run(name+"/tool message holding JSON", func(t *testing.T) {
			assertToolMessageMaskedAndBlocked(t, map[string]any{"lines": parts})
		})
		t.Run(name+"/model tool call", func(t *testing.T) {
			args, err := json.Marshal(map[string]any{"lines": parts})
			require.NoError(t, err)
			deltas := []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "post", Arguments: string(args)}}},
				{FinishReason: runtime.FinishToolCalls}}
			_, calls, err := streamPII(t, `{"action":"redact"}`, deltas)
			require.NoError(t, err)
			assert.Contains(t, calls, "[REDACTED:")
			assertNoPiece(t, calls)
			_, _, err = streamPII(t, `{}`, deltas)
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
		})
	}
	t.Run("apart", func(t *testing.T) {
		var seen map[string]any
		pl := toolPipeline(t, `{"action":"redact"}`, func(_ context.Context, c *runtime.ToolCall) (any, error) {
			seen = c.Args
			return "done", nil
		})
		args := map[string]any{"a": []any{"4111 1111"}, "b": []any{"1111 1111"}, "c": []any{"4111 1111", 7.0, "1111 1111"},
			"d": []any{"1234", "5678", "9012", "3456"}, "e": []any{"write to bob@example.com", "ok"},
			"f": []any{"4111", "1111", "1111", "1111", "2027"}, "g": []any{"jane@example.com", "42"}}
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: args})
		require.NoError(t, err)
		want := maps.Clone(args)
		want["e"] = []any{"write to [REDACTED:email]", "ok"} // whole where its element ends
		want["g"] = []any{"[REDACTED:email]", "42"}
		assert.Equal(t, want, seen)

		// nor in a tool message holding them as JSON, which keeps its layout when nothing is
		// cut across strings
		content := `{"a": ["4111 1111"], "b": ["1111 1111"], "d": ["1234", "5678", "9012", "3456"],  "f": ["4111", "1111", "1111", "1111", "2027"]}`
		got, err := seenByModel(t, `{"action":"redact"}`, []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: content}})
		require.NoError(t, err)
		assert.Contains(t, got, strconv.Quote(content)[1:len(strconv.Quote(content))-1])

		_, err = seenByModel(t, `{}`, []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: `{"lines": ["card 4111 1111", "1111 1111 thanks"]}`}})
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b)
		assert.Equal(t, "message 0 tool result contains personal data (card, cut across the strings of an array)", b.Message)
	})
}

// assertArgsMaskedAndBlocked checks that a tool's arguments args reach it with no piece of
// the values of TestCardAcrossArrayElements with "redact", and are refused naming path with
// "block".
func assertArgsMaskedAndBlocked(t *testing.T, args map[string]any, path string) {
	t.Helper()
	var seen map[string]any
	pl := toolPipeline(t, `{"action":"redact"}`, func(_ context.Context, c *runtime.ToolCall) (any, error) {
		seen = c.Args
		return "done", nil
	})
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: args})
	require.NoError(t, err)
	got := fmt.Sprint(seen)
	assert.Contains(t, got, "[REDACTED:")
	assertNoPiece(t, got)

	pl = toolPipeline(t, `{}`, func(context.Context, *runtime.ToolCall) (any, error) { return "done", nil })
	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: args})
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Contains(t, b.Message, path)
}

// assertToolMessageMaskedAndBlocked checks the same of a tool message holding v as JSON text,
// a tool result handed over as text in the transcript, as a gateway client sends it.
func assertToolMessageMaskedAndBlocked(t *testing.T, v any) {
	t.Helper()
	content, err := json.Marshal(v)
	require.NoError(t, err)
	msgs := []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: string(content)}}
	got, err := seenByModel(t, `{"action":"redact"}`, msgs)
	require.NoError(t, err)
	assert.Contains(t, got, "[REDACTED:")
	assertNoPiece(t, got)
	_, err = seenByModel(t, `{}`, msgs)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
}

// assertNoPiece checks that no piece of the card, the IBAN or the address of
// TestCardAcrossArrayElements and TestValueAcrossObjectValues is in got.
func assertNoPiece(t *testing.T, got string) {
	t.Helper()
	for _, piece := range []string{"1111 1", "1111,", "111 1111", "111111", "6016", "1331", "9268", "example.com"} {
		assert.NotContains(t, got, piece)
	}
}

// TestValueAcrossObjectValues: a card or an address cut across the consecutive string values of
// an object (in the order of its keys, as JSON writes them), in a tool's arguments or in a
// tool message holding the object as JSON text, is masked in every value it runs over with
// "redact" and refused with "block"; values apart from each other by another value, and halves
// of digits alone of one length (as in an array), are left.
func TestValueAcrossObjectValues(t *testing.T) {
	for name, obj := range map[string]map[string]any{
		"card in two values":  {"first": "4111 1111", "last": "1111 1111", "n": 7.0},
		"card cut in a group": {"a": "card 4111 11", "b": "11 1111 1111"},
		"address":             {"user": "jane.doe", "zdomain": "@example.com"},
	} {
		t.Run(name+"/tool arguments", func(t *testing.T) {
			assertArgsMaskedAndBlocked(t, map[string]any{"card": obj}, "/card")
		})
		t.Run(name+"/tool message holding JSON", func(t *testing.T) {
			assertToolMessageMaskedAndBlocked(t, obj)
		})
	}
	// A JSON text is read in the order written, which is not that of its keys: what block
	// refuses, redact masks.
	for name, content := range map[string]string{
		"card in two values":  `{"z": "4111 1111", "a": "1111 1111", "n": 7}`,
		"card cut in a group": `{"b": "card 4111 11", "a": "11 1111 1111"}`,
		"address":             `{"user": "jane.doe", "a": "@example.com"}`,
	} {
		t.Run(name+"/tool message holding JSON out of key order", func(t *testing.T) {
			assertMsgsBlockedAndMasked(t, []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: content}})
		})
	}
	t.Run("apart", func(t *testing.T) {
		var seen map[string]any
		pl := toolPipeline(t, `{"action":"redact"}`, func(_ context.Context, c *runtime.ToolCall) (any, error) {
			seen = c.Args
			return "done", nil
		})
		args := map[string]any{"a": map[string]any{"a": "4111 1111", "b": 7.0, "c": "1111 1111"},
			"b": map[string]any{"x": "41111111", "y": "11111111"}, "c": map[string]any{"zip": "94103", "city": "San Francisco"}}
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: args})
		require.NoError(t, err)
		assert.Equal(t, args, seen)
	})
}

// TestToolCallArgumentsAcrossValues: the arguments of a tool call are a JSON text the model
// reads as written, sent back in the transcript or made by the model: a card cut across two
// values of an object, in the order of its keys or not, is refused by "block" and masked by
// "redact".
func TestToolCallArgumentsAcrossValues(t *testing.T) {
	for _, args := range []string{`{"first": "4111 1111", "last": "1111 1111"}`, `{"z": "4111 1111", "a": "1111 1111", "n": 7}`,
		`{"q": {"b": "card 4111 11", "a": "11 1111 1111"}}`} {
		t.Run(args+"/sent back", func(t *testing.T) {
			msgs := []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: json.RawMessage(args)}}}}
			_, err := seenByModel(t, `{}`, msgs)
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Contains(t, b.Message, "message 0 tool call arguments")
			got, err := seenByModel(t, `{"action":"redact"}`, msgs)
			require.NoError(t, err)
			assert.Contains(t, got, "[REDACTED:card]")
			assertNoPiece(t, got)
		})
		t.Run(args+"/model tool call", func(t *testing.T) {
			deltas := []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "post", Arguments: args}}},
				{FinishReason: runtime.FinishToolCalls}}
			_, calls, err := streamPII(t, `{"action":"redact"}`, deltas)
			require.NoError(t, err)
			assert.Contains(t, calls, "[REDACTED:card]")
			assertNoPiece(t, calls)
			_, _, err = streamPII(t, `{}`, deltas)
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
		})
	}
}
