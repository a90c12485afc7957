package pii_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/runtime"
)

// TestDuplicatedKeyBlockedIsMasked: an object whose key is written twice holds two members,
// which the model reads both, though a JSON decoder keeps the last. Whichever member holds the
// data, "block" refuses the arguments of a tool call the model makes, sent back or written in
// a tool message, and "redact" masks it, neither member left in clear.
func TestDuplicatedKeyBlockedIsMasked(t *testing.T) {
	for _, args := range []string{
		`{"q": "4111111111111111", "q": "x"}`,
		`{"q": "x", "q": "4111111111111111"}`,
		`{"q": {"card": "4111 1111 1111 1111"}, "q": {"card": "x"}}`,
		`{"q": "4111 1111", "q": "1111 1111"}`,
		`[{"q": "jane.doe@example.com", "q": 7}]`,
	} {
		t.Run(args+"/model tool call", func(t *testing.T) {
			deltas := []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "post", Arguments: args}}},
				{FinishReason: runtime.FinishToolCalls}}
			_, _, err := streamPII(t, `{}`, deltas)
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Contains(t, b.Message, "the model's call of tool post")
			_, calls, err := streamPII(t, `{"action":"redact"}`, deltas)
			require.NoError(t, err)
			assert.Contains(t, calls, "[REDACTED:")
			assertNoPiece(t, calls)
			assert.NotContains(t, calls, "jane.doe")
		})
		for name, msgs := range map[string][]runtime.Message{
			"sent back":    {{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: json.RawMessage(args)}}}},
			"tool message": {{Role: "tool", ToolCallID: "c1", Content: args}},
		} {
			t.Run(args+"/"+name, func(t *testing.T) {
				assert.NotContains(t, assertMsgsBlockedAndMasked(t, msgs), "jane.doe")
			})
		}
	}
}

// TestCardInGroupFields: a card whose groups are posted as fields of their own, as a payment
// form's four boxes are ({"cc1": "4111", "cc2": "1111", ...}, or an array of the groups), is
// refused by "block" and masked by "redact", in a tool's arguments, a tool call's arguments
// and a tool message holding the JSON: the fields' keys name the parts of one value (one stem
// and a counter, the same text after it or none: "cc1", "card_a", "0", "number[0]",
// "group_1_digits"; or a card word in each: "card_first"). Digits of a
// card's lengths next to other fields of digits alone are a list of numbers, as are fields of
// other lengths, and fields under keys that name other things (an invoice's codes), and are
// left.
func TestCardInGroupFields(t *testing.T) {
	for name, v := range map[string]any{
		"fields":         map[string]any{"cc1": "4111", "cc2": "1111", "cc3": "1111", "cc4": "1111", "exp": "12/27", "name": "Jane"},
		"array":          []any{"4111", "1111", "1111", "1111"},
		"amex in three":  map[string]any{"a": "3782", "b": "822463", "c": "10005"},
		"snake counter":  map[string]any{"card_1": "4111", "card_2": "1111", "card_3": "1111", "card_4": "1111"},
		"camel counter":  map[string]any{"cardNumber1": "4111", "cardNumber2": "1111", "cardNumber3": "1111", "cardNumber4": "1111"},
		"from zero":      map[string]any{"number_part_0": "4111", "number_part_1": "1111", "number_part_2": "1111", "number_part_3": "1111"},
		"letters":        map[string]any{"pan-a": "4111", "pan-b": "1111", "pan-c": "1111", "pan-d": "1111"},
		"camel letters":  map[string]any{"ccA": "3782", "ccB": "822463", "ccC": "10005"},
		"card words":     map[string]any{"card_first": "4111", "card_fourth": "1111", "card_second": "1111", "card_third": "1111"},
		"index keys":     map[string]any{"0": "4111", "1": "1111", "2": "1111", "3": "1111"},
		"bracket index":  map[string]any{"number[0]": "4111", "number[1]": "1111", "number[2]": "1111", "number[3]": "1111"},
		"counter within": map[string]any{"group_1_digits": "4111", "group_2_digits": "1111", "group_3_digits": "1111", "group_4_digits": "1111"},
	} {
		t.Run(name+"/tool arguments", func(t *testing.T) {
			assertArgsMaskedAndBlocked(t, map[string]any{"card": v}, "/card")
		})
		t.Run(name+"/tool message holding JSON", func(t *testing.T) {
			assertToolMessageMaskedAndBlocked(t, map[string]any{"card": v})
		})
		args, err := json.Marshal(map[string]any{"card": v})
		require.NoError(t, err)
		t.Run(name+"/tool call arguments sent back", func(t *testing.T) {
			got := callSentBackBlockedAndMasked(t, args)
			assert.NotContains(t, got, "822463")
			assert.NotContains(t, got, `"1111"`)
		})
	}
	for name, v := range map[string]any{
		"longer list":      []any{"4111", "1111", "1111", "1111", "2020"},
		"digits around":    map[string]any{"a": "4111", "b": "1111", "c": "1111", "d": "1111", "e": "7"},
		"other lengths":    map[string]any{"a": "41111", "b": "111", "c": "1111", "d": "1111"},
		"numbers in a row": []any{"1234", "5678", "9012", "3456"},
		"invoice codes":    map[string]any{"invoice": "2224", "line": "5568", "sku": "8912", "qty": "0090"},
		"other stems":      map[string]any{"cc1": "4111", "cc2": "1111", "pin3": "1111", "cc4": "1111"},
		"counter skips":    map[string]any{"part1": "4111", "part2": "1111", "part3": "1111", "part5": "1111"},
		"other endings":    map[string]any{"part1_code": "4111", "part2_code": "1111", "part3_sku": "1111", "part4_code": "1111"},
		"counter moved":    map[string]any{"a1b": "4111", "a2b": "1111", "ab3": "1111", "ab4": "1111"},
		"a word missing":   map[string]any{"card_first": "4111", "card_fourth": "1111", "card_second": "1111", "third": "1111"},
		"word inside":      map[string]any{"discard": "4111", "placard": "1111", "scan": "1111", "span": "1111"},
	} {
		t.Run(name+"/left alone", func(t *testing.T) {
			s, err := pii.New(pii.Config{})
			require.NoError(t, err)
			in := map[string]any{"v": v}
			got, n := s.RedactValue(in)
			assert.Zero(t, n)
			assert.Equal(t, in, got)
			assert.Empty(t, s.ScanValue(in))
			text, err := json.Marshal(in)
			require.NoError(t, err)
			msgs := []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: string(text)}}
			_, err = seenByModel(t, `{}`, msgs)
			require.NoError(t, err, "%s", text)
			seen, err := seenByModel(t, `{"action":"redact"}`, msgs)
			require.NoError(t, err)
			assert.NotContains(t, seen, "REDACTED", "%s", text)
			call := []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: text}}}}
			_, err = seenByModel(t, `{}`, call)
			require.NoError(t, err, "%s", text)
		})
	}
}

// TestCountedGroupsAreNoCard: four numbers of four digits counting up by one step (line ids,
// "2200", "2201", "2202", "2203"; "4000", "5000", "6000", "7000") are a sequence, not the
// groups of a card, though one in eleven reads as a card joined by spaces: neither action
// takes them, in an array or as fields.
func TestCountedGroupsAreNoCard(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	for _, v := range []any{
		[]any{"2200", "2201", "2202", "2203"},
		[]any{"2221", "2222", "2223", "2224"},
		map[string]any{"line1": "2234", "line2": "2235", "line3": "2236", "line4": "2237"},
		[]any{"note", "2226", "2227", "2228", "2229"},
	} {
		in := map[string]any{"line_ids": v}
		got, n := s.RedactValue(in)
		assert.Zero(t, n, "%v", v)
		assert.Equal(t, in, got)
		assert.Empty(t, s.ScanValue(in), "%v", v)
		args, err := json.Marshal(in)
		require.NoError(t, err)
		msgs := []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: args}}}}
		_, err = seenByModel(t, `{}`, msgs)
		require.NoError(t, err, "%s", args)
		got2, err := seenByModel(t, `{"action":"redact"}`, msgs)
		require.NoError(t, err)
		assert.NotContains(t, got2, "REDACTED", "%s", args)
	}
}

// TestArgumentsReadAsLinesBlockedIsMasked: the arguments of a tool call sent back are refused
// by "block" when their keys and strings, read one a line in the order written, hold personal
// data across them (a card begun in a key and ended in its value, or ended in the next key);
// "redact" masks what "block" refuses, the arguments still valid JSON.
func TestArgumentsReadAsLinesBlockedIsMasked(t *testing.T) {
	for _, args := range []string{
		`{"4111 1111 1111": "1111"}`,
		`{"note": "4111 1111 1111", "1111": true}`,
		`["4111 1111 1111", 1111]`,
		`{"q": {"4111 1111": "1111 1111"}, "n": 1}`,
	} {
		t.Run(args, func(t *testing.T) {
			got := argsBlockedAreMasked(t, args)
			assert.Contains(t, got, "[REDACTED:card]")
		})
	}
}

// TestValueAfterALabelCutOverElements: a value that starts an element after a label of its own
// ("card", "id") and is cut over the elements after it is masked by "redact" and refused by
// "block": read run together, the label glued to its start, and as lines, no element holds it.
func TestValueAfterALabelCutOverElements(t *testing.T) {
	for _, parts := range [][]any{
		{"card", "4111 11", "11 1111", " 1111"},
		{"Card", "4111 ", "1111 11", "11 1111"},
		{"id", "card", "4111 1111 ", "1111 ", "1111"},
	} {
		t.Run(fmt.Sprint(parts), func(t *testing.T) {
			assertArgsMaskedAndBlocked(t, map[string]any{"lines": parts}, "/lines")
			assertToolMessageMaskedAndBlocked(t, map[string]any{"lines": parts})
		})
	}
}

// TestJSONInAString: a JSON document held in a string (a tool's argument or result that is
// JSON text, escaped in the JSON around it) is read as the model reads it, as JSON: a card cut
// across its strings is refused by "block" and masked by "redact", in a tool message, in the
// arguments of a tool call sent back or made by the model, and in a tool's arguments.
func TestJSONInAString(t *testing.T) {
	for _, v := range []any{
		map[string]any{"body": `{"first": "4111 1111", "last": "1111 1111"}`},
		[]any{`{"a": "4111 1111", "b": "1111 1111"}`},
		map[string]any{"body": `["card 4111 1111", "1111 1111"]`, "n": 2},
	} {
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		t.Run(string(raw), func(t *testing.T) {
			for name, msgs := range map[string][]runtime.Message{
				"tool message": {{Role: "tool", ToolCallID: "c1", Content: string(raw)}},
				"sent back":    {{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: raw}}}},
			} {
				assert.Contains(t, assertMsgsBlockedAndMasked(t, msgs), "[REDACTED:card]", name)
			}
			deltas := []runtime.Delta{{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "post", Arguments: string(raw)}}},
				{FinishReason: runtime.FinishToolCalls}}
			_, _, err := streamPII(t, `{}`, deltas)
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b, "model tool call")
			_, calls, err := streamPII(t, `{"action":"redact"}`, deltas)
			require.NoError(t, err)
			assert.Contains(t, calls, "[REDACTED:card]")
			assertNoPiece(t, calls)
			if args, ok := v.(map[string]any); ok {
				assertArgsMaskedAndBlocked(t, map[string]any{"q": args}, "/q")
			}
		})
	}
}

// TestArgumentsReadAsJSONLines: the keys and strings of a tool call's arguments, read one a
// line, can write out a JSON document of their own (a string ending in `"4111 1111"`, the next
// starting with `"b": "1111 1111"}`); "block" refuses what it holds cut across its strings, and
// "redact" masks it.
func TestArgumentsReadAsJSONLines(t *testing.T) {
	assertNoPiece(t, argsBlockedAreMasked(t, `["{\"a\": \"4111 1111\",", "\"b\": \"1111 1111\"}"]`))
}

// argsBlockedAreMasked checks that "block" refuses a tool call with arguments args sent back,
// and that "redact" sends them as valid JSON "block" lets through, which it returns.
func argsBlockedAreMasked(t *testing.T, args string) string {
	t.Helper()
	msgs := []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: json.RawMessage(args)}}}}
	_, err := seenByModel(t, `{}`, msgs)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b, "the test's premise: block refuses it")
	model := &recordingModel{}
	_, err = chatPipeline(t, `{"action":"redact"}`, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	got := model.seen[0][0].ToolCalls[0].Arguments
	assert.True(t, json.Valid(got), "%s", got)
	_, err = seenByModel(t, `{}`, model.seen[0])
	require.NoError(t, err, "block lets through what redact sent: %s", got)
	return string(got)
}

// assertMsgsBlockedAndMasked checks that "block" refuses msgs and that "redact" sends them with
// a placeholder and no piece of the values of TestCardAcrossArrayElements; it returns what the
// model read.
func assertMsgsBlockedAndMasked(t *testing.T, msgs []runtime.Message) string {
	t.Helper()
	_, err := seenByModel(t, `{}`, msgs)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	got, err := seenByModel(t, `{"action":"redact"}`, msgs)
	require.NoError(t, err)
	assert.Contains(t, got, "[REDACTED:")
	assertNoPiece(t, got)
	return got
}

// TestJSONStringInARunBlockedIsMasked: a string holding a JSON document with a card cut across
// its strings is read as JSON also where it stands among other strings, in an array or among
// an object's string values (an HTTP tool's `{"status": "ok", "body": "{...}"}`), not only
// alone: "block" refuses it, "redact" masks it, in a tool's arguments, a tool call's
// arguments sent back and a tool message holding the JSON. It went through either action.
func TestJSONStringInARunBlockedIsMasked(t *testing.T) {
	doc := `{"a": "4111 1111", "b": "1111 1111"}`
	for name, v := range map[string]any{
		"array":  []any{"x", doc, "y"},
		"fields": map[string]any{"status": "ok", "body": doc, "type": "application/json"},
	} {
		t.Run(name+"/tool arguments", func(t *testing.T) {
			assertArgsMaskedAndBlocked(t, map[string]any{"r": v}, "/r")
		})
		t.Run(name+"/tool message holding JSON", func(t *testing.T) {
			assertToolMessageMaskedAndBlocked(t, map[string]any{"r": v})
		})
		t.Run(name+"/tool call arguments sent back", func(t *testing.T) {
			args, err := json.Marshal(map[string]any{"r": v})
			require.NoError(t, err)
			assert.NotContains(t, callSentBackBlockedAndMasked(t, args), "1111 1111")
		})
	}
}

// callSentBackBlockedAndMasked checks that the arguments of a tool call sent back are refused
// by "block" and hold a card "redact" masks, and returns what "redact" sent the model.
func callSentBackBlockedAndMasked(t *testing.T, args json.RawMessage) string {
	t.Helper()
	msgs := []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: args}}}}
	_, err := seenByModel(t, `{}`, msgs)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	got, err := seenByModel(t, `{"action":"redact"}`, msgs)
	require.NoError(t, err)
	assert.Contains(t, got, "[REDACTED:card]")
	return got
}

// TestModelCallReadAsLinesBlocked: a tool call the model streams whose keys and strings, read
// one a line as a detector reads them, hold a card across them (`{"4111 1111 1111": "1111"}`)
// is refused by "block", as the same call sent back is; "redact" masked it while "block" let
// it run.
func TestModelCallReadAsLinesBlocked(t *testing.T) {
	for _, args := range []string{`{"4111 1111 1111": "1111"}`, `{"4111 1111": ["1111 1111", "x"]}`} {
		deltas := []runtime.Delta{
			{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "f", Arguments: args[:len(args)/2]}}},
			{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: args[len(args)/2:]}}},
			{FinishReason: runtime.FinishToolCalls}}
		_, sent, err := streamPII(t, `{"output": true, "action": "redact"}`, deltas)
		require.NoError(t, err)
		assert.Contains(t, sent, "[REDACTED:card]", args)
		_, _, err = streamPII(t, `{"output": true}`, deltas)
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b, args)
		assert.Contains(t, b.Message, "card")
	}
}
