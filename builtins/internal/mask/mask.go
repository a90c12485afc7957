package mask

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/builtins/internal/jsonvalue"
	"github.com/agentc-dev/agentc/builtins/internal/scanned"
	"github.com/agentc-dev/agentc/runtime"
)

// Func masks a text: it returns the text to put in its place and how many
// items it masked; with 0 the text is left as it is.
type Func func(text string) (string, int)

// Transcript masks the texts of a chat call's transcript with Mask.
type Transcript struct {
	Mask Func
	// Find, when not nil, finds the items Mask masks, for the values cut across the strings
	// of an array in a tool call's arguments or a schema (Args).
	Find Find
	// System masks the messages of role "system" too; without it they are
	// left as they are, except the grounding block (scanned.IsGrounding),
	// which is retrieved text and always masked.
	System bool
	// Seen, when not nil, records for the run each text Mask found nothing
	// in, which is then not masked again in the run. Tool call arguments are
	// not recorded.
	Seen *scanned.Record
	// ids maps the tool-call ids of the transcript Messages masks to
	// their masks (toolIDs); nil masks each id as a text.
	ids map[string]string
}

// Messages returns a copy of msgs with every text masked, and whether
// anything was; without a change it returns msgs itself. msgs is never
// modified: a message that changed is a copy whose slices were copied before
// they changed, and the others are shared with msgs.
func (t Transcript) Messages(run string, msgs []runtime.Message) ([]runtime.Message, bool) {
	t.ids = t.toolIDs(run, msgs)
	var out []runtime.Message
	for i := range msgs {
		if msgs[i].Role == "system" && !t.System && !scanned.IsGrounding(&msgs[i]) {
			continue
		}
		msg, changed := t.Message(run, &msgs[i])
		if !changed {
			continue
		}
		if out == nil {
			out = slices.Clone(msgs)
		}
		out[i] = msg
	}
	if out == nil {
		return msgs, false
	}
	return out, true
}

// Message returns msg with its texts masked (whatever its role), and whether
// anything was: its content, its text and tool_result parts, the text its
// image parts carry in place of an image (scanned.AttachmentText; such a
// part goes on as a text part when it is masked, or, when a tool returned
// it, as the image part of its result holding the masked text), the arguments of its
// tool calls (Args), and the names it carries (scanned.NamesText: its
// author, its tool calls' names and ids, its results' call ids; an id is
// masked alike wherever it is, so a call and its result still pair, and
// Messages keeps distinct ids distinct: toolIDs). The
// parts keep their number and order, so each tool call keeps its place
// among them (runtime.ToolUse.PartsAfter). msg is never modified.
func (t Transcript) Message(run string, msg *runtime.Message) (runtime.Message, bool) {
	out := *msg
	changed := false
	if red, ok := t.text(run, msg.Content); ok {
		out.Content, changed = red, true
	}
	if red, ok := t.text(run, msg.Name); ok {
		out.Name, changed = red, true
	}
	if red, ok := t.id(run, msg.ToolCallID); ok {
		out.ToolCallID, changed = red, true
	}
	cloned := false
	for j, p := range msg.Parts {
		var red string
		var ok, inResult bool
		if att := scanned.AttachmentText(p); att != "" {
			if red, ok = t.text(run, att); ok && p.ToolCallID != "" {
				// A tool returned it: it stays in its result, as the
				// result's text does, rather than reach the model as the
				// user's words.
				p, ok, inResult = withAttachmentText(p, red), false, true
			} else if ok {
				p = runtime.ContentPart{Type: runtime.PartText}
			}
		} else if p.Type == runtime.PartText || p.Type == runtime.PartToolResult {
			red, ok = t.text(run, p.Text)
		}
		id, idMasked := "", false
		if p.Type == runtime.PartToolResult || p.ToolCallID != "" {
			// An image of a tool result carries its call's id too.
			id, idMasked = t.id(run, p.ToolCallID)
		}
		if !ok && !idMasked && !inResult {
			continue
		}
		if !cloned {
			out.Parts, cloned = slices.Clone(msg.Parts), true
		}
		if ok {
			p.Text = red
		}
		if idMasked {
			p.ToolCallID = id
		}
		out.Parts[j], changed = p, true
	}
	cloned = false
	for j, tc := range msg.ToolCalls {
		args, ok := Args(tc.Arguments, t.Mask, t.Find)
		name, nameMasked := t.text(run, tc.Name)
		id, idMasked := t.id(run, tc.ID)
		if !ok && !nameMasked && !idMasked {
			continue
		}
		if !cloned {
			out.ToolCalls, cloned = slices.Clone(msg.ToolCalls), true
		}
		if ok {
			out.ToolCalls[j].Arguments = args
		}
		if nameMasked {
			out.ToolCalls[j].Name = name
		}
		if idMasked {
			out.ToolCalls[j].ID = id
		}
		changed = true
	}
	return out, changed
}

// toolIDs maps the tool-call ids of msgs (of their calls and results) to
// their masks, or returns nil when no id holds anything to mask. Masks
// stay distinct, so that each call still pairs with its own result (and
// Anthropic's API, which refuses two calls of one id, takes them): an id
// whose mask another id of msgs already has, or that is an id of msgs, is
// masked with a suffix _2, _3... in the order the ids first appear, so
// the first keeps its mask and a transcript that grows keeps its ids.
func (t Transcript) toolIDs(run string, msgs []runtime.Message) map[string]string {
	var ids []string
	for i := range msgs {
		m := &msgs[i]
		if m.Role == "system" && !t.System && !scanned.IsGrounding(m) {
			continue
		}
		for k := range m.ToolCalls {
			ids = append(ids, m.ToolCalls[k].ID)
		}
		if m.ToolCallID != "" {
			ids = append(ids, m.ToolCallID)
		}
		for j := range m.Parts {
			if id := m.Parts[j].ToolCallID; id != "" {
				ids = append(ids, id)
			}
		}
	}
	var masks map[string]string
	for _, id := range ids {
		if _, done := masks[id]; done {
			continue
		}
		red, ok := t.text(run, id)
		if !ok {
			continue
		}
		if masks == nil {
			masks = make(map[string]string)
		}
		masks[id] = red
	}
	if masks == nil {
		return nil
	}
	taken := make(map[string]bool, len(ids))
	for _, id := range ids {
		if _, masked := masks[id]; !masked {
			taken[id] = true
		}
	}
	done := make(map[string]bool, len(masks))
	for _, id := range ids {
		red, masked := masks[id]
		if !masked || done[id] {
			continue
		}
		done[id] = true
		unique := red
		for n := 2; taken[unique]; n++ {
			unique = red + "_" + strconv.Itoa(n)
		}
		masks[id], taken[unique] = unique, true
	}
	return masks
}

// id returns a tool-call id masked (by toolIDs' map when Messages made
// one), and whether it was.
func (t Transcript) id(run, id string) (string, bool) {
	if t.ids == nil {
		return t.text(run, id)
	}
	red, ok := t.ids[id]
	if !ok {
		return id, false
	}
	return red, true
}

// withAttachmentText returns the image part p (whose data is text:
// scanned.AttachmentText) holding text in place of its data, its media type
// and its other fields kept. A data: URL's head is taken as a parser reads
// it, without the tabs and line breaks it drops: a base64 marker broken
// over two lines (";base\n64") is one, and is not written twice.
func withAttachmentText(p runtime.ContentPart, text string) runtime.ContentPart {
	if u, ok := runtime.CanonicalDataURL(p.ImageURL); ok {
		head, _, _ := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
		if n := len(";base64"); len(head) >= n && strings.EqualFold(head[len(head)-n:], ";base64") {
			head = head[:len(head)-n]
		}
		p.ImageURL = "data:" + head + ";base64," + base64.StdEncoding.EncodeToString([]byte(text))
		return p
	}
	p.Data = []byte(text)
	return p
}

// text returns s masked and whether anything was; a text Mask finds nothing
// in is recorded for the run and not masked again.
func (t Transcript) text(run, s string) (string, bool) {
	if s == "" || (t.Seen != nil && t.Seen.Has(run, s)) {
		return s, false
	}
	red, n := maskText(s, t.Mask, t.Find)
	if n == 0 {
		if t.Seen != nil {
			t.Seen.Add(run, s)
		}
		return s, false
	}
	return red, true
}

// maskText returns s masked by f, and, with find, when it is a JSON document, read as a value
// (AcrossJSON), with the number of items masked.
func maskText(s string, f Func, find Find) (string, int) {
	red, n := f(s)
	if find == nil || !looksJSON(s) {
		return red, n
	}
	// A JSON document's arrays and objects are read as in a value: an item cut across their
	// strings. What was masked, in the strings or as a text, can leave one that was not (a
	// placeholder's end read with the string after it), so the result is read again until it
	// holds none.
	if js, m := AcrossJSON(s, f, find); m > 0 {
		red, n = js, m
	}
	for pass := 0; n > 0 && pass < maxElementPasses; pass++ {
		js, m := AcrossJSON(red, f, find)
		if m == 0 {
			break
		}
		red, n = js, n+m
	}
	return red, n
}

// Args returns the arguments of a tool call masked, and whether anything
// was. JSON arguments are masked as a value (Value, with find; their objects
// read in the order written, which is how the model reads them and how
// SplitInJSON reads them, jsonvalue.DecodeOrdered) and stay valid JSON, their
// members in that order and their numbers written back as they were sent (a
// 20-digit id is not rounded to a float64's precision); arguments that are
// not JSON are masked as text, as the model reads them. With find, what their keys and strings
// read one a line hold across them is masked too (AsLines), as a detector reads them.
func Args(raw json.RawMessage, f Func, find Find) (json.RawMessage, bool) {
	var v any
	err := errors.New("not JSON")
	if json.Valid(raw) {
		v, err = jsonvalue.DecodeOrdered(string(raw))
	}
	if err != nil {
		red, n := f(string(raw))
		if n == 0 {
			return raw, false
		}
		return json.RawMessage(red), true
	}
	red, n := Value(v, f, find)
	// What the lines mask can leave a value cut across strings (a placeholder's end read with
	// the string after it), and what that masks one across the lines: both are read again
	// until neither finds one.
	for pass := 0; find != nil && pass < maxElementPasses; pass++ {
		var m int
		if red, m = AsLines(red, find); m == 0 {
			break
		}
		n += m
		if red, m = Value(red, f, find); m == 0 {
			break
		}
		n += m
	}
	if n == 0 {
		return raw, false
	}
	b, err := json.Marshal(red)
	if err != nil {
		return raw, false
	}
	return b, true
}

// joinedJSON returns joined (Elements) followed, for each string of the run that is a JSON
// document, by its reading as one (maskText): a string among others is read as JSON as a
// string alone is (`{"status": "ok", "body": "{...}"}`). Nil for a nil joined.
func joinedJSON(joined func(elems, keys []string) ([]string, int), f Func, find Find) func(elems, keys []string) ([]string, int) {
	if joined == nil {
		return nil
	}
	return func(elems, keys []string) ([]string, int) {
		out, n := joined(elems, keys)
		cloned := false
		for i, e := range out {
			if !looksJSON(e) {
				continue
			}
			red, m := maskText(e, f, find)
			if m == 0 {
				continue
			}
			if !cloned && n == 0 {
				out, cloned = slices.Clone(out), true
			}
			out[i], n = red, n+m
		}
		return out, n
	}
}

// Calls masks the arguments of calls in place (Args) and returns calls; its
// signature is that of runtime.HoldToolCalls' rewrite.
func Calls(f Func, find Find) func(calls []runtime.ToolUse) ([]runtime.ToolUse, error) {
	return func(calls []runtime.ToolUse) ([]runtime.ToolUse, error) {
		for i := range calls {
			if args, ok := Args(calls[i].Arguments, f, find); ok {
				calls[i].Arguments = args
			}
		}
		return calls, nil
	}
}

// Value returns a copy of a JSON-like value masked, and the number of items
// masked: its strings, its object keys (a key that changes is renamed, with
// "#2", "#3"... when the name is taken, so no value is lost) and its
// integral numbers, read as their digits (one that changes becomes the
// masked string). With find, the consecutive strings of an array, and the
// consecutive string values of an object in the order of its keys, are also
// read side by side, and a value cut across them is masked (Elements), and
// the value of an object key is read with its key, and what runs from the
// key into it is masked (Members), and a string that is itself a JSON object or array is
// read as one (AcrossJSON). See jsonvalue.MapTextJoined. v is never modified.
func Value(v any, f Func, find Find) (any, int) {
	pair, key := Members(find, f)
	leaf := f
	if find != nil {
		// a string that is a JSON document (JSON text escaped in the JSON around it) is read
		// as one, as a text of the transcript is
		leaf = func(s string) (string, int) { return maskText(s, f, find) }
	}
	rd := jsonvalue.Readers{Joined: joinedJSON(Elements(find), f, find), Pair: pair, Key: key}
	red, n := jsonvalue.MapTextReaders(v, leaf, rd)
	// What was masked changes what is read: a key renamed to its mask takes another place
	// among the keys, and its value is read between other values, or alone. The result is
	// read again until it holds nothing.
	for pass := 0; find != nil && n > 0 && pass < maxElementPasses; pass++ {
		again, m := jsonvalue.MapTextReaders(red, leaf, rd)
		if m == 0 {
			break
		}
		red, n = again, n+m
	}
	return red, n
}
