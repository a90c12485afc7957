package mask_test

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/builtins/internal/scanned"
	"github.com/agentc-dev/agentc/runtime"
)

// secret masks every "s3cret" and every "4111" (digits a number may hold),
// counting its calls.
type secret struct{ calls int }

func (s *secret) mask(text string) (string, int) {
	s.calls++
	n := strings.Count(text, "s3cret") + strings.Count(text, "4111")
	if n == 0 {
		return text, 0
	}
	return strings.NewReplacer("s3cret", "[S]", "4111", "[N]").Replace(text), n
}

func attachment(text string) runtime.ContentPart {
	return runtime.ContentPart{Type: runtime.PartImage, ImageURL: "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte(text))}
}

// TestMessagesMasksEveryText: every text the model reads is masked on a
// copy, the caller's messages untouched.
func TestMessagesMasksEveryText(t *testing.T) {
	png := runtime.ContentPart{Type: runtime.PartImage, ImageURL: "data:image/png;base64,iVBORw0K"}
	transcript := func() []runtime.Message {
		return []runtime.Message{
			{Role: "system", Content: "sys s3cret"},
			{Role: "user", Content: "hi s3cret", Parts: []runtime.ContentPart{
				{Type: runtime.PartText, Text: "part s3cret"}, png, attachment("att s3cret"), attachment("att clean")}},
			{Role: "assistant", Content: "clean", ToolCalls: []runtime.ToolUse{
				{ID: "c0", Name: "a", Arguments: json.RawMessage(`{"q":"s3cret","n":4111,"m":7,"s3cret":1,"[S]":2}`)},
				{ID: "c1", Name: "b", Arguments: json.RawMessage(`{"q":"clean"}`)},
				{ID: "c2", Name: "c", Arguments: json.RawMessage(`not json s3cret`)}}},
			{Role: "tool", ToolCallID: "c0", Content: "result s3cret"},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c0", Text: "res s3cret"}}},
		}
	}
	msgs := transcript()
	s := &secret{}
	got, ok := mask.Transcript{Mask: s.mask, System: true}.Messages("", msgs)
	require.True(t, ok)
	assert.Equal(t, "sys [S]", got[0].Content)
	assert.Equal(t, "hi [S]", got[1].Content)
	assert.Equal(t, []runtime.ContentPart{{Type: runtime.PartText, Text: "part [S]"}, png,
		{Type: runtime.PartText, Text: "att [S]"}, msgs[1].Parts[3]}, got[1].Parts,
		"text carried in place of an image goes on as a text part once masked; the rest is kept")
	assert.JSONEq(t, `{"q":"[S]","n":"[N]","m":7,"[S]":2,"[S]#2":1}`, string(got[2].ToolCalls[0].Arguments),
		"strings, numbers and keys are masked; a masked key whose name is taken gets #2")
	assert.Equal(t, msgs[2].ToolCalls[1], got[2].ToolCalls[1])
	assert.Equal(t, "not json [S]", string(got[2].ToolCalls[2].Arguments), "arguments that are not JSON are masked as text")
	assert.Equal(t, "result [S]", got[3].Content)
	assert.Equal(t, runtime.ContentPart{Type: runtime.PartToolResult, ToolCallID: "c0", Text: "res [S]"}, got[4].Parts[0])
	assert.Equal(t, transcript(), msgs, "the caller's messages are untouched")

	got, ok = mask.Transcript{Mask: s.mask}.Messages("", msgs)
	require.True(t, ok)
	assert.Equal(t, "sys s3cret", got[0].Content, "without System, system messages are left as they are")
	assert.Equal(t, "hi [S]", got[1].Content)
}

// TestMessagesMasksNames: the names a message carries reach the model too:
// its author, its tool calls' names and ids, and its results' call ids, an
// id masked alike in the call and in its result.
func TestMessagesMasksNames(t *testing.T) {
	msgs := []runtime.Message{
		{Role: "user", Name: "s3cret", Content: "hi"},
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "call_s3cret", Name: "get_s3cret", Arguments: json.RawMessage(`{}`)}}},
		{Role: "tool", ToolCallID: "call_s3cret", Content: "ok"},
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_s3cret", Text: "ok"},
			{Type: runtime.PartImage, ToolCallID: "call_s3cret", ImageURL: "https://example.com/a.png"}}},
	}
	s := &secret{}
	got, ok := mask.Transcript{Mask: s.mask}.Messages("", msgs)
	require.True(t, ok)
	assert.Equal(t, "[S]", got[0].Name)
	assert.Equal(t, runtime.ToolUse{ID: "call_[S]", Name: "get_[S]", Arguments: json.RawMessage(`{}`)}, got[1].ToolCalls[0])
	assert.Equal(t, "call_[S]", got[2].ToolCallID)
	assert.Equal(t, runtime.ContentPart{Type: runtime.PartToolResult, ToolCallID: "call_[S]", Text: "ok"}, got[3].Parts[0])
	assert.Equal(t, runtime.ContentPart{Type: runtime.PartImage, ToolCallID: "call_[S]", ImageURL: "https://example.com/a.png"}, got[3].Parts[1],
		"an image of the result keeps its pairing")
	assert.Equal(t, "s3cret", msgs[0].Name, "the caller's messages are untouched")
	assert.Equal(t, "call_s3cret", msgs[1].ToolCalls[0].ID)
}

// TestMessagesUnchanged: a transcript with nothing to mask is returned as it
// is, and with a record its clean texts are not masked again in the run.
func TestMessagesUnchanged(t *testing.T) {
	msgs := []runtime.Message{{Role: "user", Content: "hello"}, {Role: "assistant", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "hi"}}}}
	s := &secret{}
	var seen scanned.Record
	tr := mask.Transcript{Mask: s.mask, Seen: &seen}
	got, ok := tr.Messages("run", msgs)
	assert.False(t, ok)
	assert.Same(t, &msgs[0], &got[0], "the same slice")
	assert.Equal(t, 2, s.calls)

	_, ok = tr.Messages("run", msgs)
	assert.False(t, ok)
	assert.Equal(t, 2, s.calls, "clean texts are recorded for the run")
	_, _ = tr.Messages("other", msgs)
	assert.Equal(t, 4, s.calls, "another run masks them again")

	msgs = append(msgs, runtime.Message{Role: "user", Content: "s3cret"})
	for range 2 {
		got, ok = tr.Messages("run", msgs)
		require.True(t, ok)
		assert.Equal(t, "[S]", got[2].Content, "a text that was masked is masked again at every call")
	}
}

func TestArgsAndCalls(t *testing.T) {
	s := &secret{}
	raw := json.RawMessage(`{"a":"x"}`)
	got, ok := mask.Args(raw, s.mask, nil)
	assert.False(t, ok)
	assert.Equal(t, raw, got)

	calls := []runtime.ToolUse{{Name: "a", Arguments: json.RawMessage(`{"k":["s3cret",41110]}`)}, {Name: "b", Arguments: raw}}
	out, err := mask.Calls(s.mask, nil)(calls)
	require.NoError(t, err)
	assert.JSONEq(t, `{"k":["[S]","[N]0"]}`, string(out[0].Arguments))
	assert.Equal(t, raw, out[1].Arguments)

	v, n := mask.Value(map[string]string{"s3cret": "s3cret", "[S]": "x"}, s.mask, nil)
	assert.Equal(t, map[string]string{"[S]": "x", "[S]#2": "[S]"}, v)
	assert.Equal(t, 2, n)
}

// TestArgsKeepNumbers: numbers of masked arguments are written back as they
// were sent, however large, and one written with a fraction or an exponent
// is read as the integer it stands for.
func TestArgsKeepNumbers(t *testing.T) {
	s := &secret{}
	got, ok := mask.Args(json.RawMessage(`{"q":"s3cret","id":12345678901234567891,"f":1.25,"e":2e3}`), s.mask, nil)
	require.True(t, ok)
	assert.JSONEq(t, `{"q":"[S]","id":12345678901234567891,"f":1.25,"e":2e3}`, string(got))
	assert.Contains(t, string(got), `12345678901234567891`)

	for _, n := range []string{`4111`, `4111.0`, `4.111e3`, `41110e-1`} {
		got, ok = mask.Args(json.RawMessage(`{"n":`+n+`}`), s.mask, nil)
		require.True(t, ok, n)
		assert.JSONEq(t, `{"n":"[N]"}`, string(got), n)
	}
}

// Masking an interleaved turn (thinking, a call, text, a call) keeps each
// call in its place among the parts: a masked attachment stays a part, in
// its place, and a masked call keeps its PartsAfter.
func TestMessageKeepsCallsInPlace(t *testing.T) {
	msg := runtime.Message{Role: "assistant",
		Parts: []runtime.ContentPart{{Type: runtime.PartThinking, Text: "think", Signature: "sig"}, attachment("a s3cret"), {Type: runtime.PartText, Text: "s3cret text"}},
		ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"q":"s3cret"}`), PartsAfter: 2},
			{ID: "c2", Name: "f", Arguments: json.RawMessage(`{"q":"s3cret"}`)}}}
	s := &secret{}
	got, changed := mask.Transcript{Mask: s.mask}.Message("", &msg)
	require.True(t, changed)
	require.Len(t, got.Parts, 3)
	assert.Equal(t, msg.Parts[0], got.Parts[0], "the thinking is not touched")
	assert.Equal(t, "a [S]", got.Parts[1].Text)
	assert.Equal(t, "[S] text", got.Parts[2].Text)
	assert.Equal(t, 2, got.ToolCalls[0].PartsAfter)
	assert.Zero(t, got.ToolCalls[1].PartsAfter)
	assert.JSONEq(t, `{"q":"[S]"}`, string(got.ToolCalls[0].Arguments))
	assert.JSONEq(t, `{"q":"s3cret"}`, string(msg.ToolCalls[0].Arguments), "the caller's message is untouched")
}

// keyValue finds each "k=" followed by letters, masking the letters.
func keyValue(text string) []mask.Item {
	var out []mask.Item
	for _, loc := range regexp.MustCompile(`k=([a-z]+)`).FindAllStringSubmatchIndex(text, -1) {
		out = append(out, mask.Item{From: loc[0], To: loc[1], Start: loc[2], End: loc[3], With: "[K]"})
	}
	return out
}

// TestAcrossParts: an item cut across two text pieces of a message is masked, its masked
// part placed in the first piece it starts in; an item within one piece is left to the piece
// itself; with turns, the messages of one turn are read together, and only those.
func TestAcrossParts(t *testing.T) {
	text := func(s string) runtime.ContentPart { return runtime.ContentPart{Type: runtime.PartText, Text: s} }
	msgs := []runtime.Message{
		{Role: "user", Content: "a k", Parts: []runtime.ContentPart{text("=abc"), text("def b"), text("k=own ")}},
		{Role: "user", Content: "c k="},
		{Role: "user", Content: "xyz d"},
		{Role: "assistant", Content: "k="},
		{Role: "system", Content: "k=", Parts: []runtime.ContentPart{text("sys")}},
	}
	tr := mask.Transcript{}
	got, ok := tr.AcrossParts(msgs, keyValue, false)
	require.True(t, ok)
	assert.Equal(t, "a k", got[0].Content)
	assert.Equal(t, []runtime.ContentPart{text("=[K]"), text(" b"), text("k=own ")}, got[0].Parts,
		"the value goes in the first piece it starts in; an item within one piece is left as it is")
	assert.Equal(t, msgs[1:], got[1:], "each message on its own; system messages left without System")

	got, ok = tr.AcrossParts(msgs, keyValue, true)
	require.True(t, ok)
	assert.Equal(t, "c k=", got[1].Content)
	assert.Equal(t, "[K] d", got[2].Content, "consecutive user messages are read together")
	assert.Equal(t, "k=", got[3].Content, "a message of another role is not")
	assert.Equal(t, "k=own ", msgs[0].Parts[2].Text, "the caller's messages are untouched")

	got, ok = mask.Transcript{System: true}.AcrossParts(msgs[4:], keyValue, true)
	require.True(t, ok)
	assert.Equal(t, "k=", got[0].Content)
	assert.Equal(t, "[K]", got[0].Parts[0].Text)

	// A tool result and the user's text after it are one user turn (a tool message, or a
	// tool_result part, which Anthropic's API sends before the message's text); two results
	// are each its own block.
	result := func(s string) runtime.ContentPart {
		return runtime.ContentPart{Type: runtime.PartToolResult, ToolCallID: "c1", Text: s}
	}
	got, ok = tr.AcrossParts([]runtime.Message{{Role: "tool", ToolCallID: "c1", Content: "a k="}, {Role: "user", Content: "abc d"}}, keyValue, true)
	require.True(t, ok)
	assert.Equal(t, []string{"a k=", "[K] d"}, []string{got[0].Content, got[1].Content})
	got, ok = tr.AcrossParts([]runtime.Message{{Role: "user", Content: "abc d", Parts: []runtime.ContentPart{result("a k=")}}}, keyValue, true)
	require.True(t, ok)
	assert.Equal(t, "a k=", got[0].Parts[0].Text, "the result is read before the message's text")
	assert.Equal(t, "[K] d", got[0].Content)
	two := []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: "a k="}, {Role: "tool", ToolCallID: "c2", Content: "abc d"},
		{Role: "user", Parts: []runtime.ContentPart{result("b k="), result("abc"), text(" e")}}}
	got, ok = tr.AcrossParts(two, keyValue, true)
	assert.False(t, ok)
	assert.Equal(t, two, got)
}

// bracketed finds each "<...>" of letters and line breaks, masking what it holds.
func bracketed(text string) []mask.Item {
	var out []mask.Item
	for _, loc := range regexp.MustCompile(`<([a-z\n]+)>`).FindAllStringSubmatchIndex(text, -1) {
		out = append(out, mask.Item{From: loc[0], To: loc[1], Start: loc[2], End: loc[3], With: "[K]"})
	}
	return out
}

// With a find, the consecutive strings of an array are read side by side, as a list of
// lines: a value cut across them is masked in every element it runs over, in a value, in a
// tool call's arguments and in a transcript's. Strings of other arrays or other values, and
// strings with a number between them, are read apart.
func TestValueAcrossArrayElements(t *testing.T) {
	s := &secret{}
	v := map[string]any{"a": []any{"x <ab", "cd", "e> y"}, "b": []string{"<", "ab>"}, "c": []any{"<a", 1, "b>"},
		"d": []any{"<a"}, "e": "b>"}
	got, n := mask.Value(v, s.mask, bracketed)
	assert.Equal(t, 2, n)
	assert.Equal(t, map[string]any{"a": []any{"x <[K]", "", "> y"}, "b": []string{"<", "[K]>"}, "c": []any{"<a", 1, "b>"},
		"d": []any{"<a"}, "e": "b>"}, got)
	assert.Equal(t, []any{"x <ab", "cd", "e> y"}, v["a"], "v is untouched")

	got, n = mask.Value(v, s.mask, nil)
	assert.Zero(t, n, "without a find each string is read on its own")
	assert.Equal(t, v, got)

	args, ok := mask.Args(json.RawMessage(`{"lines":["<ab","cd>"],"n":2}`), s.mask, bracketed)
	require.True(t, ok)
	assert.JSONEq(t, `{"lines":["<[K]",">"],"n":2}`, string(args))

	msgs := []runtime.Message{{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"lines":["<ab","cd>"]}`)}}}}
	out, ok := mask.Transcript{Mask: s.mask, Find: bracketed}.Messages("", msgs)
	require.True(t, ok)
	assert.JSONEq(t, `{"lines":["<[K]",">"]}`, string(out[0].ToolCalls[0].Arguments))
	calls, err := mask.Calls(s.mask, bracketed)([]runtime.ToolUse{{Name: "f", Arguments: json.RawMessage(`["<ab","cd>"]`)}})
	require.NoError(t, err)
	assert.JSONEq(t, `["<[K]",">"]`, string(calls[0].Arguments))
}

// digitsOrAddress finds each run of exactly eight digits, masked "[D]", and each word@word.word,
// masked "[E]", counting its calls.
type digitsOrAddress struct{ calls int }

func (d *digitsOrAddress) find(text string) []mask.Item {
	d.calls++
	var out []mask.Item
	for _, loc := range regexp.MustCompile(`[0-9]+|[a-z]+@[a-z]+\.[a-z]+`).FindAllStringIndex(text, -1) {
		switch {
		case text[loc[0]] >= '0' && text[loc[0]] <= '9' && loc[1]-loc[0] == 8:
			out = append(out, mask.Item{From: loc[0], To: loc[1], Start: loc[0], End: loc[1], With: "[D]"})
		case strings.Contains(text[loc[0]:loc[1]], "@"):
			out = append(out, mask.Item{From: loc[0], To: loc[1], Start: loc[0], End: loc[1], With: "[E]", Label: "email", EndsAtBreak: true})
		}
	}
	return out
}

// The strings of an array are read in one text as lines, and run together: an item within
// an element is masked in it, one cut across elements, at a line break or inside a word, in
// every element it runs over. Read run together, an item takes the place of the items of the
// lines it covers; numbers of a list (whole elements of digits of one length) are not taken.
func TestReadElements(t *testing.T) {
	for _, tt := range []struct {
		name     string
		in, want []string
		elem     []any
	}{
		{"within an element", []string{"a 12345678 b", "c"}, []string{"a [D] b", "c"}, []any{0}},
		{"cut inside a word", []string{"ab12", "345678 c"}, []string{"ab[D]", " c"}, []any{-1}},
		{"cut in three", []string{"x 12", "3456", "78"}, []string{"x [D]", "", ""}, []any{-1}},
		{"digits of other lengths", []string{"12345", "678"}, []string{"[D]", ""}, []any{-1}},
		{"a list of numbers", []string{"1234", "5678"}, []string{"1234", "5678"}, nil},
		{"an address whole where its element ends keeps a word starting the next", []string{"to bob@ex.com", "ok"}, []string{"to [E]", "ok"}, []any{0}},
		{"but not a word after a space", []string{"to bob@ex.com", " ok"}, []string{"to [E]", " ok"}, []any{0}},
		{"an address cut", []string{"to bob@ex", ".com ok"}, []string{"to [E]", " ok"}, []any{-1}},
		{"nothing", []string{"a", "b"}, []string{"a", "b"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &digitsOrAddress{}
			got, found := mask.ReadElements(tt.in, d.find)
			assert.Equal(t, tt.want, got)
			if len(tt.elem) == 0 {
				assert.Equal(t, 2, d.calls, "the elements are read once as lines and once run together")
			}
			var elem []any
			for _, it := range found {
				elem = append(elem, it.Elem)
			}
			assert.Equal(t, tt.elem, elem)
		})
	}
	_, found := mask.ReadElements([]string{"a 12345678 b", "c"}, (&digitsOrAddress{}).find)
	require.Len(t, found, 1)
	assert.Equal(t, [2]int{2, 10}, [2]int{found[0].From, found[0].To}, "offsets of the element")

	// An item of the lines that ends its element: read a third time, run together only
	// there, the element before not glued to it.
	glued := func(text string) []mask.Item {
		var out []mask.Item
		for _, loc := range regexp.MustCompile(`(?:^|\n)(key=[a-z]+)`).FindAllStringSubmatchIndex(text, -1) {
			out = append(out, mask.Item{From: loc[2], To: loc[3], Start: loc[2], End: loc[3], With: "[K]"})
		}
		return out
	}
	got, found := mask.ReadElements([]string{"x", "key=abc", "def"}, glued)
	assert.Equal(t, []string{"x", "[K]", ""}, got, "one placeholder for the item of the lines and the longer one over it")
	require.Len(t, found, 2)
	assert.Equal(t, []int{1, -1}, []int{found[0].Elem, found[1].Elem})
}

// The values of an object read together (ReadFields): fields of digits alone are numbers
// whatever their lengths, and an item made of them is not taken; one cut inside a field with
// other characters is.
func TestReadFields(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{[]string{"12345", "678"}, []string{"12345", "678"}},
		{[]string{"id 12345", "678 ok"}, []string{"id [D]", " ok"}},
		{[]string{"a 12345678 b", "c"}, []string{"a [D] b", "c"}},
	} {
		got, _ := mask.ReadFields(tt.in, []string{"a", "b"}, (&digitsOrAddress{}).find)
		assert.Equal(t, tt.want, got, "%q", tt.in)
	}
}

// Fields of digits alone in a card's groups are read joined by spaces when their keys name the
// parts of one value, a stem and a counter from 0 or 1 or a card word in each, and are left
// under other keys (a year each); an array's elements are read so whatever they are.
func TestReadFieldsGroupsByKeys(t *testing.T) {
	groups := regexp.MustCompile(`^[0-9]{4} [0-9]{4} [0-9]{4} [0-9]{4}$`)
	find := func(text string) []mask.Item {
		var out []mask.Item
		start := 0
		for line := range strings.SplitAfterSeq(text, "\n") {
			if l := strings.TrimSuffix(line, "\n"); groups.MatchString(l) {
				out = append(out, mask.Item{From: start, To: start + len(l), Start: start, End: start + len(l), With: "[C]"})
			}
			start += len(line)
		}
		return out
	}
	in := []string{"4111", "1111", "1111", "1111"}
	masked := []string{"[C]", "", "", ""}
	for _, tt := range []struct {
		keys []string
		want []string
	}{
		{[]string{"cc1", "cc2", "cc3", "cc4"}, masked},
		{[]string{"card_0", "card_1", "card_2", "card_3"}, masked},
		{[]string{"cardNumber1", "cardNumber2", "cardNumber3", "cardNumber4"}, masked},
		{[]string{"box7", "box8", "box9", "box10"}, in},
		{[]string{"2021", "2022", "2023", "2024"}, in},
		{[]string{"b", "c", "d", "e"}, in},
		{[]string{"part-a", "part-b", "part-c", "part-d"}, masked},
		{[]string{"partA", "partB", "partC", "partD"}, masked},
		{[]string{"a", "b", "c", "d"}, masked},
		{[]string{"1", "2", "3", "4"}, masked},
		{[]string{"card_first", "CCSecond", "pan.third", "ccNum_last"}, masked},
		{[]string{"invoice", "line", "sku", "qty"}, in},
		{[]string{"cc1", "cc2", "cc4", "cc3"}, masked}, // a card word in each
		{[]string{"part1", "part2", "part4", "part3"}, in},
		{[]string{"part1", "part2", "part3", "piece4"}, in},
		{[]string{"parta", "partb", "partc", "partd"}, in},
		{[]string{"discard", "placard", "scan", "span"}, in},
		{[]string{"code1", "code2", "code3", "code"}, in},
	} {
		got, _ := mask.ReadFields(in, tt.keys, find)
		assert.Equal(t, tt.want, got, "%q", tt.keys)
	}
	got, _ := mask.ReadElements(in, find)
	assert.Equal(t, masked, got)
}

// The strings of a run are read by the find of Value alone: the mask is not run on them one
// by one, only on the strings of no run.
func TestValueReadsRunsOnce(t *testing.T) {
	d := &digitsOrAddress{}
	var masked []string
	f := func(text string) (string, int) {
		masked = append(masked, text)
		return text, 0
	}
	got, n := mask.Value(map[string]any{"lines": []any{"a", "b", "c", 7, "d"}}, f, d.find)
	assert.Zero(t, n)
	assert.Equal(t, map[string]any{"lines": []any{"a", "b", "c", 7, "d"}}, got)
	assert.Equal(t, []string{"7", "d", "lines"}, masked, "the number, the string in no run and the key")
	assert.Equal(t, 3, d.calls, "one run, read as lines and run together, and its key with a probe, after it and run together in one reading (its strings are read with it)")

	s := &secret{}

	got, n = mask.Value([]string{"12345", "678", "x 87654321"}, s.mask, d.find)
	assert.Equal(t, 2, n)
	assert.Equal(t, []string{"[D]", "", "x [D]"}, got)
}

// TestMessageMasksResultAttachmentInItsResult: text a tool returned in place
// of an image, once masked, stays an image part of that result, its call's
// id masked alike: as a text part it would reach the model as the user's
// words (an OpenAI model, which refuses an image in a tool result, would
// take it so).
func TestMessageMasksResultAttachmentInItsResult(t *testing.T) {
	att := attachment("att s3cret")
	att.ToolCallID, att.Detail = "call_s3cret", "low"
	bytes := runtime.ContentPart{Type: runtime.PartImage, ToolCallID: "call_1", MediaType: "text/csv", Data: []byte("id,s3cret")}
	msg := runtime.Message{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_s3cret", Text: "ok"}, att,
		{Type: runtime.PartToolResult, ToolCallID: "call_1"}, bytes}}
	got, ok := mask.Transcript{Mask: (&secret{}).mask}.Message("", &msg)
	require.True(t, ok)
	want := attachment("att [S]")
	want.ToolCallID, want.Detail = "call_[S]", "low"
	assert.Equal(t, want, got.Parts[1])
	assert.Equal(t, runtime.ContentPart{Type: runtime.PartImage, ToolCallID: "call_1", MediaType: "text/csv", Data: []byte("id,[S]")}, got.Parts[3])
	assert.Equal(t, "att s3cret", scanned.AttachmentText(msg.Parts[1]), "the caller's message is untouched")
}

// TestResultAttachmentKeepsItsDataURLHead: a tool result's text attachment
// masked in place is written back as a base64 data: URL with the media
// type and parameters it came with and one base64 marker, whatever the
// marker's case, a plain (percent-encoded) body, or the line breaks a URL
// parser drops inside the head: the layers and the model read the masked
// text from it, as they read the original.
func TestResultAttachmentKeepsItsDataURLHead(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte("att s3cret"))
	masked := base64.StdEncoding.EncodeToString([]byte("att [S]"))
	for _, c := range []struct{ url, want string }{
		{"data:text/plain;base64," + b64, "data:text/plain;base64," + masked},
		{"data:text/plain;BASE64," + b64, "data:text/plain;base64," + masked},
		{"data:text/plain;charset=utf-8;Base64," + b64, "data:text/plain;charset=utf-8;base64," + masked},
		{"DATA:text/csv;base64," + b64, "data:text/csv;base64," + masked},
		{"data:text/plain,att%20s3cret", "data:text/plain;base64," + masked},
		{"data:;base64," + b64, "data:;base64," + masked},
		{"data:text/plain;base\n64," + b64, "data:text/plain;base64," + masked},
		{"data:text/pl\tain;charset=utf-8;base64," + b64, "data:text/plain;charset=utf-8;base64," + masked},
	} {
		part := runtime.ContentPart{Type: runtime.PartImage, ToolCallID: "call_1", ImageURL: c.url}
		msg := runtime.Message{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "call_1"}, part}}
		got, ok := mask.Transcript{Mask: (&secret{}).mask}.Message("", &msg)
		require.True(t, ok, "%q", c.url)
		assert.Equal(t, c.want, got.Parts[1].ImageURL, "%q", c.url)
		assert.Equal(t, "att [S]", scanned.AttachmentText(got.Parts[1]), "%q: the masked attachment reads as text again", c.url)
	}
}
