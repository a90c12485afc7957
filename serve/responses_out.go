package serve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// rsResponse is a response object of the Responses API, as it stands.
type rsResponse struct {
	id      string
	created int64
	model   string
	// status is in_progress, completed, incomplete or failed.
	status string
	// incomplete is the reason of an incomplete response.
	incomplete string
	// failure is the error of a failed response.
	failure *errDoc
	output  []rsOut
	usage   *runtime.Usage
	p       *chatParams
}

// rsOut is an output item: a message, a function call, a custom tool's
// call or a reasoning item.
type rsOut struct {
	kind rsKind
	id   string
	// text is a message's text (a refusal's, when refusal is set), or a
	// reasoning item's thinking.
	text    []byte
	refusal bool
	// callID, name and args are a function call's (args the text of a
	// custom tool's call).
	callID, name string
	args         []byte
	// signature is a reasoning item's thinking signature, or a redacted
	// one's data (redacted).
	signature string
	redacted  bool
	// cut marks the item that was being written when the response
	// failed, or was cut short: its status is incomplete.
	cut bool
}

type rsKind uint8

const (
	rsMessage rsKind = iota
	rsFunctionCall
	rsReasoningItem
	// rsCustomCall is a custom tool's call: its args are its text.
	rsCustomCall
)

// newRSOut returns an output item of kind with a fresh id.
func newRSOut(kind rsKind) rsOut {
	prefix := [...]string{rsMessage: "msg_", rsFunctionCall: "fc_", rsReasoningItem: "rs_", rsCustomCall: "ctc_"}[kind]
	return rsOut{kind: kind, id: responseID(prefix)}
}

// appendItem appends the item, whole (done) or as it begins.
func appendItem(b []byte, it *rsOut, done bool) []byte {
	status := `"in_progress"`
	switch {
	case done && it.cut:
		status = `"incomplete"`
	case done:
		status = `"completed"`
	}
	b = append(b, `{"id":`...)
	b = wire.AppendString(b, it.id)
	switch it.kind {
	case rsMessage:
		b = append(b, `,"type":"message","status":`...)
		b = append(b, status...)
		b = append(b, `,"role":"assistant","content":[`...)
		if done {
			b = appendRSPart(b, it, string(it.text))
		}
		b = append(b, ']')
	case rsFunctionCall:
		b = append(b, `,"type":"function_call","status":`...)
		b = append(b, status...)
		b = append(b, `,"call_id":`...)
		b = wire.AppendString(b, it.callID)
		b = append(b, `,"name":`...)
		b = wire.AppendString(b, it.name)
		b = append(b, `,"arguments":`...)
		if done {
			b = wire.AppendString(b, string(it.args))
		} else {
			b = append(b, `""`...)
		}
	case rsCustomCall:
		// The API's custom_tool_call has no status.
		b = append(b, `,"type":"custom_tool_call","call_id":`...)
		b = wire.AppendString(b, it.callID)
		b = append(b, `,"name":`...)
		b = wire.AppendString(b, it.name)
		b = append(b, `,"input":`...)
		if done {
			b = wire.AppendString(b, string(it.args))
		} else {
			b = append(b, `""`...)
		}
	case rsReasoningItem:
		b = append(b, `,"type":"reasoning","status":`...)
		b = append(b, status...)
		b = append(b, `,"summary":[],"content":[`...)
		if done && !it.redacted {
			b = append(b, `{"type":"reasoning_text","text":`...)
			b = wire.AppendString(b, string(it.text))
			b = append(b, '}')
		}
		b = append(b, `],"encrypted_content":`...)
		switch {
		case !done:
			b = append(b, "null"...)
		case it.redacted:
			b = wire.AppendString(b, rsRedacted+it.signature)
		default:
			b = wire.AppendString(b, it.signature)
		}
	}
	return append(b, '}')
}

// appendRSPart appends a message's content part holding text: output_text,
// or a refusal.
func appendRSPart(b []byte, it *rsOut, text string) []byte {
	if it.refusal {
		b = append(b, `{"type":"refusal","refusal":`...)
		b = wire.AppendString(b, text)
		return append(b, '}')
	}
	b = append(b, `{"type":"output_text","text":`...)
	b = wire.AppendString(b, text)
	return append(b, `,"annotations":[],"logprobs":[]}`...)
}

// append appends the response object, repeating the request's parameters
// as the API does. Its JSON holds no line break (it goes in an event's
// data line).
func (r *rsResponse) append(b []byte) []byte {
	req, rs := &r.p.req, r.p.rs
	b = append(b, `{"id":`...)
	b = wire.AppendString(b, r.id)
	b = append(b, `,"object":"response","created_at":`...)
	b = appendInt(b, r.created)
	b = append(b, `,"status":`...)
	b = wire.AppendString(b, r.status)
	b = append(b, `,"error":`...)
	if e := r.failure; e != nil {
		b = append(b, `{"code":`...)
		b = wire.AppendString(b, e.kind)
		b = append(b, `,"message":`...)
		b = wire.AppendString(b, e.msg)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"incomplete_details":`...)
	if r.incomplete != "" {
		b = append(b, `{"reason":`...)
		b = wire.AppendString(b, r.incomplete)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"instructions":`...)
	b = appendNullString(b, rs.instructions)
	b = append(b, `,"max_output_tokens":`...)
	if req.MaxTokens > 0 {
		b = appendInt(b, int64(req.MaxTokens))
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"metadata":`...)
	b = appendMetadata(b, rs.metadata)
	b = append(b, `,"model":`...)
	b = wire.AppendString(b, r.model)
	b = append(b, `,"output":[`...)
	for i := range r.output {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendItem(b, &r.output[i], true)
	}
	b = append(b, `],"parallel_tool_calls":`...)
	if req.ParallelToolCalls != nil && !*req.ParallelToolCalls {
		b = append(b, "false"...)
	} else {
		b = append(b, "true"...)
	}
	b = append(b, `,"previous_response_id":null,"reasoning":{"effort":`...)
	if req.ReasoningEffort != "" {
		b = wire.AppendString(b, req.ReasoningEffort)
	} else {
		b = append(b, "null"...)
	}
	// Nothing is kept: the gateway stores no response.
	b = append(b, `,"summary":null},"store":false,"temperature":`...)
	b = appendNumber(b, req.Temperature)
	b = append(b, `,"text":{"format":`...)
	b = appendRSFormat(b, req.ResponseFormat)
	b = append(b, `},"tool_choice":`...)
	switch req.ToolChoice {
	case "":
		b = append(b, `"auto"`...)
	case "auto", "none", "required":
		b = wire.AppendString(b, req.ToolChoice)
	default:
		typ := "function"
		if isCustom(req.Tools, req.ToolChoice) {
			typ = "custom"
		}
		b = append(b, `{"type":"`...)
		b = append(b, typ...)
		b = append(b, `","name":`...)
		b = wire.AppendString(b, req.ToolChoice)
		b = append(b, '}')
	}
	b = append(b, `,"tools":[`...)
	for i, t := range req.Tools {
		if i > 0 {
			b = append(b, ',')
		}
		if t.Custom != nil {
			b = appendRSCustomTool(b, &t)
			continue
		}
		b = append(b, `{"type":"function","name":`...)
		b = wire.AppendString(b, t.Name)
		b = append(b, `,"description":`...)
		if t.Description != "" {
			b = wire.AppendString(b, t.Description)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"parameters":`...)
		b = appendCompact(b, t.Parameters)
		b = append(b, `,"strict":`...)
		b = appendBool(b, t.Strict)
		b = append(b, '}')
	}
	b = append(b, `],"top_p":`...)
	b = appendNumber(b, req.TopP)
	b = append(b, `,"truncation":"disabled","usage":`...)
	if u := r.usage; u != nil {
		b = appendRSUsage(b, u)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"user":`...)
	if rs.user != "" {
		b = wire.AppendString(b, rs.user)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}')
}

// appendRSUsage appends a response's usage object.
func appendRSUsage(b []byte, u *runtime.Usage) []byte {
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, u.InputTokens)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, u.CachedInputTokens)
	b = append(b, `},"output_tokens":`...)
	b = appendInt(b, u.OutputTokens)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = appendInt(b, u.ReasoningTokens)
	b = append(b, `},"total_tokens":`...)
	b = appendInt(b, u.Total())
	return append(b, '}')
}

// appendRSCustomTool appends a custom tool, as the request offered it.
func appendRSCustomTool(b []byte, t *runtime.ToolDef) []byte {
	b = append(b, `{"type":"custom","name":`...)
	b = wire.AppendString(b, t.Name)
	if t.Description != "" {
		b = append(b, `,"description":`...)
		b = wire.AppendString(b, t.Description)
	}
	switch c := t.Custom; c.Format {
	case runtime.CustomGrammar:
		b = append(b, `,"format":{"type":"grammar","syntax":`...)
		b = wire.AppendString(b, c.Syntax)
		b = append(b, `,"definition":`...)
		b = wire.AppendString(b, c.Definition)
		b = append(b, '}')
	default:
		b = append(b, `,"format":{"type":"text"}`...)
	}
	return append(b, '}')
}

// appendRSFormat appends text.format: the output's format as requested.
func appendRSFormat(b []byte, f *runtime.ResponseFormat) []byte {
	if f == nil || f.Type != runtime.FormatJSONSchema {
		typ := runtime.FormatText
		if f != nil {
			typ = f.Type
		}
		b = append(b, `{"type":`...)
		b = wire.AppendString(b, typ)
		return append(b, '}')
	}
	b = append(b, `{"type":"json_schema","name":`...)
	b = wire.AppendString(b, f.Name)
	b = append(b, `,"schema":`...)
	b = appendCompact(b, f.Schema)
	b = append(b, `,"strict":`...)
	b = appendBool(b, f.Strict)
	return append(b, '}')
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// appendNumber appends a sampling parameter, 1 (the API's default) when
// unset.
func appendNumber(b []byte, v *float64) []byte {
	if v == nil {
		return append(b, '1')
	}
	j, _ := json.Marshal(*v)
	return append(b, j...)
}

func appendNullString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return wire.AppendString(b, *s)
}

func appendMetadata(b []byte, m map[string]string) []byte {
	if len(m) == 0 {
		return append(b, "{}"...)
	}
	j, _ := json.Marshal(m) // sorted keys
	return append(b, j...)
}

// appendCompact appends the JSON value raw without its white space; null
// when there is none.
func appendCompact(b []byte, raw json.RawMessage) []byte {
	if nullIsEmpty(raw) == nil {
		return append(b, "null"...)
	}
	var c bytes.Buffer
	if json.Compact(&c, raw) != nil {
		return append(b, "null"...)
	}
	return append(b, c.Bytes()...)
}

// rsStatus sets the status of a response that ended with resp's finish
// reason: completed, or incomplete when the answer was cut short (at the
// output bound, or by a content filter without a refusal).
func (r *rsResponse) rsStatus(resp *runtime.ChatResponse) {
	r.status = "completed"
	switch resp.FinishReason {
	case runtime.FinishLength, runtime.FinishPauseTurn:
		r.status, r.incomplete = "incomplete", "max_output_tokens"
	case runtime.FinishContentFilter:
		// A refusal's text (an OpenAI model's, an Anthropic model's
		// explanation) is the API's refusal part, in a completed
		// response; a streamed response's is in its items alone.
		refused := resp.Refusal || slices.ContainsFunc(r.output, func(it rsOut) bool { return it.kind == rsMessage && it.refusal })
		if !refused {
			r.status, r.incomplete = "incomplete", "content_filter"
		}
	}
	u := resp.Usage
	r.usage = &u
	if r.status == "incomplete" && len(r.output) > 0 {
		// The last item is the one the cut ended.
		r.output[len(r.output)-1].cut = true
	}
}

// completeResponses answers a response object, its output items in the
// order the model sent them.
func completeResponses(x *exchange, p *chatParams, resp *runtime.ChatResponse) {
	r := rsResponse{id: responseID("resp_"), created: unixNow(), model: servedName(resp, p), p: p}
	for _, bl := range blocksOf(&p.blocks, resp) {
		switch bl.Kind {
		case runtime.BlockThinking:
			t := &resp.Thinking[bl.Index]
			it := newRSOut(rsReasoningItem)
			it.text, it.signature, it.redacted = []byte(t.Text), t.Signature, t.Type == runtime.PartRedactedThinking
			r.output = append(r.output, it)
		case runtime.BlockText:
			it := newRSOut(rsMessage)
			it.text, it.refusal = []byte(resp.Text[bl.From:bl.To]), bl.Refusal || resp.Refusal && len(p.blocks.Blocks) == 0
			r.output = append(r.output, it)
		case runtime.BlockToolCall:
			tc := &resp.ToolCalls[bl.Index]
			it := newRSOut(rsFunctionCall)
			it.args = tc.Arguments
			if tc.Custom {
				it = newRSOut(rsCustomCall)
				it.args = []byte(customInput(tc))
			}
			it.callID, it.name = tc.ID, tc.Name
			r.output = append(r.output, it)
		}
	}
	r.rsStatus(resp)
	b := r.append(make([]byte, 0, 512+len(resp.Text)))
	writeRaw(x, http.StatusOK, append(b, '\n'))
}

// responsesStream writes the Responses stream: response.created and
// response.in_progress, then each output item's events
// (response.output_item.added, its content's deltas and done events,
// response.output_item.done), and response.completed (or
// response.incomplete) holding the whole response. Each event carries its
// sequence_number.
type responsesStream struct {
	sse
	r      rsResponse
	served *servedSlot
	seq    int64
	begun  bool
	// open is the index of the output item not yet done, -1 for none.
	open int
	// calls and thinks map a tool call's and a thinking block's index to
	// its output item's.
	calls, thinks blocks
}

func newResponsesStream(x *exchange, p *chatParams, served *servedSlot) chatStream {
	return &responsesStream{sse: newSSE(x, served), served: served, open: -1,
		r: rsResponse{id: responseID("resp_"), created: unixNow(), status: "in_progress", p: p}}
}

// event opens an event of type name, up to its sequence_number; the
// caller appends its other fields and closes it with endEvent.
func (s *responsesStream) event(name string) {
	b := append(s.buf, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, name...)
	b = append(b, `","sequence_number":`...)
	s.buf = appendInt(b, s.seq)
	s.seq++
}

func (s *responsesStream) endEvent() { s.buf = append(s.buf, "}\n\n"...) }

// responseEvent writes an event holding the response as it stands.
func (s *responsesStream) responseEvent(name string) {
	s.event(name)
	s.buf = append(s.buf, `,"response":`...)
	s.buf = s.r.append(s.buf)
	s.endEvent()
}

// begin writes response.created and response.in_progress, once.
func (s *responsesStream) begin(model string) {
	if s.begun {
		return
	}
	s.begun = true
	s.r.model = model
	s.responseEvent("response.created")
	s.responseEvent("response.in_progress")
}

// itemEvent opens an event of the output item at index, up to its
// output_index (and item_id).
func (s *responsesStream) itemEvent(name string, index int, withID bool) {
	s.event(name)
	b := append(s.buf, `,"output_index":`...)
	b = appendInt(b, int64(index))
	if withID {
		b = append(b, `,"item_id":`...)
		b = wire.AppendString(b, s.r.output[index].id)
	}
	s.buf = b
}

// add begins an output item of kind: the open one ends, and
// response.output_item.added (and a message's content_part.added) is
// written for the new one, which is open until the next begins.
func (s *responsesStream) add(it rsOut) int {
	s.done()
	s.r.output = append(s.r.output, it)
	s.open = len(s.r.output) - 1
	s.itemEvent("response.output_item.added", s.open, false)
	s.buf = append(s.buf, `,"item":`...)
	s.buf = appendItem(s.buf, &s.r.output[s.open], false)
	s.endEvent()
	if it.kind == rsMessage {
		s.itemEvent("response.content_part.added", s.open, true)
		s.buf = append(s.buf, `,"content_index":0,"part":`...)
		s.buf = appendRSPart(s.buf, &it, "")
		s.endEvent()
	}
	return s.open
}

// done ends the open output item: its content's done events, then
// response.output_item.done with the whole item.
func (s *responsesStream) done() {
	if s.open < 0 {
		return
	}
	i := s.open
	it := &s.r.output[i]
	s.open = -1
	switch it.kind {
	case rsMessage:
		kind, field := "response.output_text.done", `,"text":`
		if it.refusal {
			kind, field = "response.refusal.done", `,"refusal":`
		}
		s.itemEvent(kind, i, true)
		s.buf = append(s.buf, `,"content_index":0`...)
		s.buf = append(s.buf, field...)
		s.buf = wire.AppendString(s.buf, string(it.text))
		if !it.refusal {
			s.buf = append(s.buf, `,"logprobs":[]`...)
		}
		s.endEvent()
		s.itemEvent("response.content_part.done", i, true)
		s.buf = append(s.buf, `,"content_index":0,"part":`...)
		s.buf = appendRSPart(s.buf, it, string(it.text))
		s.endEvent()
	case rsFunctionCall:
		s.itemEvent("response.function_call_arguments.done", i, true)
		s.buf = append(s.buf, `,"name":`...)
		s.buf = wire.AppendString(s.buf, it.name)
		s.buf = append(s.buf, `,"arguments":`...)
		s.buf = wire.AppendString(s.buf, string(it.args))
		s.endEvent()
	case rsCustomCall:
		s.itemEvent("response.custom_tool_call_input.done", i, true)
		s.buf = append(s.buf, `,"input":`...)
		s.buf = wire.AppendString(s.buf, string(it.args))
		s.endEvent()
	case rsReasoningItem:
		if !it.redacted {
			s.itemEvent("response.reasoning_text.done", i, true)
			s.buf = append(s.buf, `,"content_index":0,"text":`...)
			s.buf = wire.AppendString(s.buf, string(it.text))
			s.endEvent()
		}
	}
	s.itemEvent("response.output_item.done", i, false)
	s.buf = append(s.buf, `,"item":`...)
	s.buf = appendItem(s.buf, it, true)
	s.endEvent()
}

// textDelta writes a delta of the open item's text: kind is the event,
// field the delta's name.
func (s *responsesStream) textDelta(kind string, index int, text string, logprobs bool) {
	s.itemEvent(kind, index, true)
	s.buf = append(s.buf, `,"content_index":0,"delta":`...)
	s.buf = wire.AppendString(s.buf, text)
	if logprobs {
		s.buf = append(s.buf, `,"logprobs":[]`...)
	}
	s.endEvent()
}

// item returns the output item of the entry index of m (a tool call, a
// thinking block), beginning it as it when it is new.
func (s *responsesStream) item(m *blocks, index int, it func() rsOut) (int, bool) {
	if block, ok := m.find(index); ok {
		return block, false
	}
	i := s.add(it())
	m.add(index, i)
	return i, true
}

func (s *responsesStream) delta(d runtime.Delta) bool {
	if d.Text == "" && len(d.ToolCalls) == 0 && d.Thinking == nil {
		return !s.gone // a finish reason or usage alone: sent at the end
	}
	s.begin(s.served.get(s.r.p.req.Model))
	if t := d.Thinking; t != nil {
		i, _ := s.item(&s.thinks, t.Index, func() rsOut {
			it := newRSOut(rsReasoningItem)
			it.redacted = t.Redacted
			return it
		})
		it := &s.r.output[i]
		it.signature += t.Signature
		if t.Text != "" && !it.redacted {
			it.text = append(it.text, t.Text...)
			s.textDelta("response.reasoning_text.delta", i, t.Text, false)
		}
	}
	if d.Text != "" {
		if s.open < 0 || s.r.output[s.open].kind != rsMessage || s.r.output[s.open].refusal != d.Refusal {
			it := newRSOut(rsMessage)
			it.refusal = d.Refusal
			s.add(it)
		}
		it := &s.r.output[s.open]
		it.text = append(it.text, d.Text...)
		if d.Refusal {
			s.textDelta("response.refusal.delta", s.open, d.Text, false)
		} else {
			s.textDelta("response.output_text.delta", s.open, d.Text, true)
		}
	}
	for _, tc := range d.ToolCalls {
		i, _ := s.item(&s.calls, tc.Index, func() rsOut {
			it := newRSOut(rsFunctionCall)
			if tc.Custom {
				it = newRSOut(rsCustomCall)
			}
			it.callID, it.name = tc.ID, tc.Name
			return it
		})
		if tc.Arguments != "" {
			s.r.output[i].args = append(s.r.output[i].args, tc.Arguments...)
			event := "response.function_call_arguments.delta"
			if s.r.output[i].kind == rsCustomCall {
				event = "response.custom_tool_call_input.delta"
			}
			s.itemEvent(event, i, true)
			s.buf = append(s.buf, `,"delta":`...)
			s.buf = wire.AppendString(s.buf, tc.Arguments)
			s.endEvent()
		}
	}
	return s.send(d.More)
}

func (s *responsesStream) end(resp *runtime.ChatResponse) {
	s.begin(servedName(resp, s.r.p))
	if len(s.r.output) == 0 {
		// An answer of nothing is an empty message, as a whole response's.
		s.add(newRSOut(rsMessage))
	}
	// The status first: an item the answer's cut ended is done incomplete.
	s.r.rsStatus(resp)
	s.done()
	s.r.model = servedName(resp, s.r.p)
	if s.r.status == "incomplete" {
		s.responseEvent("response.incomplete")
	} else {
		s.responseEvent("response.completed")
	}
	s.flush()
}

// fail ends a stream whose call failed after it began: an error event,
// then response.failed with the error and the output sent so far.
func (s *responsesStream) fail(err error) {
	s.begin(s.served.get(s.r.p.req.Model))
	status, _ := StatusOf(err)
	e := callError(apiOpenAI, status, err)
	s.event("error")
	s.buf = append(s.buf, `,"code":`...)
	s.buf = wire.AppendString(s.buf, e.kind)
	s.buf = append(s.buf, `,"message":`...)
	s.buf = wire.AppendString(s.buf, e.msg)
	s.buf = append(s.buf, `,"param":null`...)
	s.endEvent()
	if s.open >= 0 {
		// The item being written when the call failed: never done.
		s.r.output[s.open].cut = true
	}
	s.r.status, s.r.failure = "failed", &e
	s.responseEvent("response.failed")
	s.flush()
}
