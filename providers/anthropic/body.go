package anthropic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// maxTokens is the max_tokens sent with req: its own bound, else the
// client's (Config.MaxTokens).
func (c *Client) maxTokens(req *runtime.ChatRequest) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return c.cfg.MaxTokens
}

// body encodes the request body of req: the JSON the SDK would encode from
// the same request in its parameter types (sampling parameters included),
// written straight into a byte slice, as providers/openai does (the SDK's
// reflective encoding cost more than the rest of building the request).
func (c *Client) body(req *runtime.ChatRequest) ([]byte, error) {
	if req.ReasoningEffort != "" {
		// OpenAI's reasoning control: an Anthropic model thinks on a
		// token budget (thinking), which no effort level names.
		return nil, runtime.ProviderRefused(&wire.Unhonoured{Field: "reasoning_effort", Value: req.ReasoningEffort, Why: "an Anthropic model cannot honour",
			Remedy: "ask for extended thinking with thinking: {type: enabled, budget_tokens: N}"})
	}
	if req.Verbosity != "" {
		// OpenAI's control of the answer's length, which no parameter of
		// the Messages API sets: served without it, the answer would run
		// at a length the client did not ask for.
		return nil, runtime.ProviderRefused(&wire.Unhonoured{Field: "verbosity", Value: req.Verbosity, Why: "an Anthropic model cannot honour"})
	}
	if rf := req.ResponseFormat; rf != nil && (rf.Type == runtime.FormatJSONObject || rf.Type == runtime.FormatJSONSchema && len(rf.Schema) == 0) {
		// An Anthropic model's structured output follows a JSON schema;
		// served without one, the answer need not be JSON at all.
		return nil, runtime.ProviderRefused(fmt.Errorf("the request sets response_format %s without a schema, which an Anthropic model cannot honour (send json_schema with a schema)", rf.Type))
	}
	if err := penalties(req); err != nil {
		return nil, err
	}
	if err := customTools(req); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 256+sizeHint(req))
	b = append(b, `{"stream":true,"model":`...)
	b = wire.AppendString(b, c.cfg.Model)
	b = append(b, `,"max_tokens":`...)
	b = wire.AppendInt(b, int64(c.maxTokens(req)))
	b, carried, err := appendMessages(b, req.Messages)
	if err != nil {
		return nil, err
	}
	tools, called := req.Tools, historyTools(req)
	if called != nil {
		tools = called
	}
	if len(tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i := range tools {
			if i > 0 {
				b = append(b, ',')
			}
			t := &tools[i]
			if i == len(tools)-1 && carried != nil && t.CacheControl == nil {
				// The breakpoint of an empty text block before any
				// other block: the tools come first in the prefix.
				last := *t
				last.CacheControl = carried
				t = &last
			}
			if b, err = appendTool(b, t); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	// One tool call at a time is the tool choice's
	// disable_parallel_tool_use, which needs a tool choice (auto by
	// default); it means nothing with none, nor without tools.
	serial := req.ParallelToolCalls != nil && !*req.ParallelToolCalls && len(req.Tools) > 0
	choice := ""
	switch req.ToolChoice {
	case "":
		if serial {
			choice = "auto"
		}
	case "auto", "none":
		choice = req.ToolChoice
	case "required":
		choice = "any"
	default:
		choice = "tool"
	}
	if called != nil {
		choice = "none"
	}
	if choice != "" {
		b = append(b, `,"tool_choice":{"type":"`...)
		b = append(b, choice...)
		b = append(b, '"')
		if choice == "tool" {
			b = append(b, `,"name":`...)
			b = wire.AppendString(b, req.ToolChoice)
		}
		if serial && choice != "none" {
			b = append(b, `,"disable_parallel_tool_use":true`...)
		}
		b = append(b, '}')
	}
	if req.CacheControl != nil {
		b = appendCacheControl(b, req.CacheControl)
	}
	if b, err = wire.AppendSampling(b, req.Temperature, req.TopP); err != nil {
		return nil, err
	}
	if req.TopK != nil {
		b = append(b, `,"top_k":`...)
		b = wire.AppendInt(b, int64(*req.TopK))
	}
	if len(req.Stop) > 0 {
		b = append(b, `,"stop_sequences":`...)
		b = wire.AppendStrings(b, req.Stop)
	}
	rf := req.ResponseFormat
	schema := rf != nil && rf.Type == runtime.FormatJSONSchema && len(rf.Schema) > 0
	if schema && !wire.IsObject(rf.Schema) {
		var v map[string]any
		err := json.Unmarshal(rf.Schema, &v)
		if err == nil {
			err = fmt.Errorf("not an object")
		}
		return nil, fmt.Errorf("response_format schema is not a JSON object: %w", err)
	}
	if schema || req.Effort != "" {
		b = append(b, `,"output_config":{`...)
		if req.Effort != "" {
			b = append(b, `"effort":`...)
			b = wire.AppendString(b, req.Effort)
			if schema {
				b = append(b, ',')
			}
		}
		if schema {
			b = append(b, `"format":{"type":"json_schema","schema":`...)
			if b, err = wire.AppendRaw(b, rf.Schema); err != nil {
				return nil, fmt.Errorf("response_format schema is not a JSON object: %w", err)
			}
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if len(req.ContextEdits) > 0 {
		b = append(b, `,"context_management":{"edits":[`...)
		for i, e := range req.ContextEdits {
			if i > 0 {
				b = append(b, ',')
			}
			edit, err := e.MarshalJSON()
			if err == nil && !wire.IsObject(edit) {
				err = errors.New("not a JSON object")
			}
			if err != nil {
				return nil, fmt.Errorf("context edit %d (%s): %w", i, e.Type, err)
			}
			if b, err = wire.AppendRaw(b, edit); err != nil {
				return nil, fmt.Errorf("context edit %d (%s): %w", i, e.Type, err)
			}
		}
		b = append(b, "]}"...)
	}
	if id := endUser(req); id != "" {
		b = append(b, `,"metadata":{"user_id":`...)
		b = wire.AppendString(b, id)
		b = append(b, '}')
	}
	if t := req.Thinking; t != nil {
		b = append(b, `,"thinking":{"type":`...)
		b = wire.AppendString(b, t.Type)
		if t.Type == "enabled" {
			b = append(b, `,"budget_tokens":`...)
			b = wire.AppendInt(b, int64(t.BudgetTokens))
		}
		if t.Display != "" {
			b = append(b, `,"display":`...)
			b = wire.AppendString(b, t.Display)
		}
		b = append(b, '}')
	}
	if !slices.ContainsFunc(req.Messages, func(m runtime.Message) bool { return m.Role != "system" && m.Role != "developer" }) {
		return nil, errors.New("messages: none besides the system prompt, and Anthropic's API wants at least one user message")
	}
	return append(b, '}'), nil
}

// penalties refuses OpenAI's sampling penalties and logit bias when they
// ask for something: the API has neither, and the model would answer
// otherwise than asked. At their neutral values (0, no bias) they ask for
// nothing.
func penalties(req *runtime.ChatRequest) error {
	for _, p := range [...]struct {
		name string
		v    *float64
	}{{"frequency_penalty", req.FrequencyPenalty}, {"presence_penalty", req.PresencePenalty}} {
		if p.v != nil && *p.v != 0 {
			return runtime.ProviderRefused(fmt.Errorf("the request sets %s %g, which an Anthropic model cannot honour", p.name, *p.v))
		}
	}
	for _, bias := range req.LogitBias {
		if bias != 0 {
			return runtime.ProviderRefused(errors.New("the request sets logit_bias, which an Anthropic model cannot honour (its token ids are another tokenizer's)"))
		}
	}
	return nil
}

// endUser is the end user's id sent as metadata.user_id: OpenAI's
// safety_identifier, which names the user for abuse monitoring as the API's
// user_id does, else Metadata's user_id (OpenAI's user).
func endUser(req *runtime.ChatRequest) string {
	if req.SafetyIdentifier != "" {
		return req.SafetyIdentifier
	}
	return req.Metadata["user_id"]
}

// sizeHint estimates the encoded size of req's texts.
func sizeHint(req *runtime.ChatRequest) int {
	n := 0
	for i := range req.Messages {
		m := &req.Messages[i]
		n += len(m.Content) + 48
		for j := range m.Parts {
			n += len(m.Parts[j].Text) + len(m.Parts[j].ImageURL) + 4*len(m.Parts[j].Data)/3 + len(m.Parts[j].Signature) + 64
		}
		for j := range m.ToolCalls {
			n += len(m.ToolCalls[j].Arguments) + len(m.ToolCalls[j].Name) + 64
		}
	}
	for i := range req.Tools {
		n += len(req.Tools[i].Description) + len(req.Tools[i].Parameters) + 64
	}
	return n
}

// appendCacheControl appends a prompt-cache breakpoint member.
func appendCacheControl(b []byte, c *runtime.CacheControl) []byte {
	b = append(b, `,"cache_control":{"type":"ephemeral"`...)
	if c.TTL != "" {
		b = append(b, `,"ttl":`...)
		b = wire.AppendString(b, c.TTL)
	}
	return append(b, '}')
}

// appendTool appends a tool definition; the schema's properties and
// required list have fields of their own, its other keywords ride along.
// Every tool has an input schema, which the API requires.
func appendTool(b []byte, t *runtime.ToolDef) ([]byte, error) {
	b = append(b, `{"name":`...)
	b = wire.AppendString(b, t.Name)
	if t.Description != "" {
		b = append(b, `,"description":`...)
		b = wire.AppendString(b, t.Description)
	}
	if t.Strict {
		b = append(b, `,"strict":true`...)
	}
	if t.CacheControl != nil {
		b = appendCacheControl(b, t.CacheControl)
	}
	// The API requires an input schema of every tool: one of no
	// parameters (its schema absent, {} or a bare {"type":"object"}) is
	// an object of no properties.
	var schema map[string]json.RawMessage
	if len(t.Parameters) > 0 {
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			// The error decoding it as the SDK's parameters would give.
			var m map[string]any
			if err := json.Unmarshal(t.Parameters, &m); err != nil {
				return b, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
			}
			return b, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
		}
	}
	b = append(b, `,"input_schema":{"type":"object","properties":`...)
	var err error
	if p := schema["properties"]; len(p) > 0 && string(p) != "null" {
		if b, err = wire.AppendRaw(b, p); err != nil {
			return b, err
		}
	} else {
		b = append(b, "{}"...)
	}
	var required []any
	if json.Unmarshal(schema["required"], &required) == nil {
		sep := `,"required":[`
		for _, r := range required {
			if s, ok := r.(string); ok {
				b = append(b, sep...)
				b = wire.AppendString(b, s)
				sep = ","
			}
		}
		if sep == "," {
			b = append(b, ']')
		}
	}
	keys := make([]string, 0, len(schema))
	for k := range schema {
		if k != "properties" && k != "required" && k != "type" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = append(b, ',')
		b = wire.AppendString(b, k)
		b = append(b, ':')
		if b, err = wire.AppendRaw(b, schema[k]); err != nil {
			return b, err
		}
	}
	b = append(b, '}')
	return append(b, '}'), nil
}

// appendMessages appends the system blocks and the messages of the
// transcript: system messages become the system blocks; tool messages and
// tool_result parts become tool_result blocks, and consecutive results
// share one user message, as the API wants them.
//
// An empty text part is left out (the API refuses an empty text block);
// its prompt-cache breakpoint goes to the last block written before it
// that takes one (a thinking block takes none), which ends the same prefix
// or the longest shorter one: the system block before, the last block of
// the message before. Of one before any such block it returns the
// breakpoint, for the last tool, the tools coming first in the prefix.
func appendMessages(b []byte, in []runtime.Message) ([]byte, *runtime.CacheControl, error) {
	for i := range in {
		if err := unsentParts(&in[i]); err != nil {
			return b, nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
	}
	// last is where the last block written that takes a breakpoint
	// begins and ends (its closing brace); carried, a breakpoint for the
	// last tool.
	var last struct{ start, end int }
	last.start = -1
	var carried *runtime.CacheControl
	took := func(start int) { last.start, last.end = start, len(b)-1 }
	carry := func(cc *runtime.CacheControl) {
		switch {
		case cc == nil:
		case last.start >= 0:
			b = carryBreakpoint(b, last.start, last.end, cc)
		case carried == nil:
			carried = cc
		}
	}
	// The system blocks, first.
	sys := false
	sysBlock := func(text string, cc *runtime.CacheControl) {
		if !sys {
			b = append(b, `,"system":[`...)
			sys = true
		} else {
			b = append(b, ',')
		}
		start := len(b)
		b = appendText(b, text, cc)
		took(start)
	}
	for i := range in {
		m := &in[i]
		if m.Role != "system" && m.Role != "developer" {
			continue
		}
		if m.Content != "" {
			sysBlock(m.Content, nil)
		}
		for _, p := range m.Parts {
			if p.Type != runtime.PartText {
				continue
			}
			if p.Text == "" {
				carry(p.CacheControl)
			} else {
				sysBlock(p.Text, p.CacheControl)
			}
		}
	}
	if sys {
		b = append(b, ']')
	}
	b = append(b, `,"messages":[`...)
	first := true
	open := func(role string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, `{"role":"`...)
		b = append(b, role...)
		b = append(b, `","content":[`...)
	}
	// results counts the tool results of the user message left open for
	// more, until the next message that is not a tool message.
	results := 0
	start := 0 // where the block being written begins
	block := func() {
		if results > 0 {
			b = append(b, ',')
		}
		start = len(b)
		results++
	}
	result := func(id, text string, isError bool, cc *runtime.CacheControl, images []runtime.ContentPart) {
		if results == 0 {
			open("user")
		}
		block()
		b = append(b, `{"type":"tool_result","tool_use_id":`...)
		b = appendToolID(b, id)
		// A result without text has no text block, the API refusing an
		// empty one, and one of nothing no content, as the API takes it.
		if text != "" || len(images) > 0 {
			b = append(b, `,"content":[`...)
			if text != "" {
				b = appendText(b, text, nil)
				if len(images) > 0 {
					b = append(b, ',')
				}
			}
			for k := range images {
				if k > 0 {
					b = append(b, ',')
				}
				b = appendImage(b, images[k])
			}
			b = append(b, ']')
		}
		b = append(b, `,"is_error":`...)
		b = strconv.AppendBool(b, isError)
		if cc != nil {
			b = appendCacheControl(b, cc)
		}
		b = append(b, '}')
		took(start)
	}
	closeResults := func() {
		if results > 0 {
			b = append(b, "]}"...)
			results = 0
		}
	}
	for i := range in {
		m := &in[i]
		switch m.Role {
		case "system", "developer":
		case "tool":
			// The results are the message's tool_result parts, or else its
			// text (content and text parts, as the layers read it)
			// answering ToolCallID.
			n := results
			if err := resultImagesPaired(m.Parts); err != nil {
				return b, nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
			for j, p := range m.Parts {
				if p.Type == runtime.PartToolResult {
					result(p.ToolCallID, p.Text, p.IsError, p.CacheControl, resultImages(m.Parts, j))
				}
			}
			if results == n && m.ToolCallID != "" {
				result(m.ToolCallID, m.Text(), false, nil, nil)
			}
		case "user":
			// The results pending and the message's own come first, in
			// the same user message.
			if err := resultImagesPaired(m.Parts); err != nil {
				return b, nil, fmt.Errorf("messages[%d]: %w", i, err)
			}
			for j, p := range m.Parts {
				if p.Type == runtime.PartToolResult {
					result(p.ToolCallID, p.Text, p.IsError, p.CacheControl, resultImages(m.Parts, j))
				}
			}
			if results == 0 {
				open("user")
			}
			had := results
			if m.Content != "" {
				block()
				b = appendText(b, m.Content, nil)
				took(start)
			}
			for _, p := range m.Parts {
				switch p.Type {
				case runtime.PartText:
					if p.Text == "" {
						// The API refuses an empty text block.
						carry(p.CacheControl)
						continue
					}
					block()
					if p.Document {
						b = appendDocument(b, p)
					} else {
						b = appendText(b, p.Text, p.CacheControl)
					}
					took(start)
				case runtime.PartDocument:
					block()
					b = appendDocument(b, p)
					took(start)
				case runtime.PartImage:
					if p.ToolCallID == "" { // else in its result, above
						block()
						b = appendImage(b, p)
						took(start)
					}
				}
			}
			if results == 0 && had == 0 {
				return b, nil, fmt.Errorf("messages[%d]: a user message with nothing in it (no text, no image, no tool result), which Anthropic's API refuses (text content blocks must be non-empty)", i)
			}
			b = append(b, "]}"...)
			results = 0
		case "assistant":
			closeResults()
			open("assistant")
			k := 0
			sep := func() {
				if k > 0 {
					b = append(b, ',')
				}
				start = len(b)
				k++
			}
			// Blank text beside the calls is left out: the API refuses
			// a text block of white space alone.
			calls := len(m.ToolCalls) > 0
			if m.Content != "" && !(calls && strings.TrimSpace(m.Content) == "") {
				sep()
				b = appendText(b, m.Content, nil)
				took(start)
			}
			// The parts and the tool calls go in the message's order:
			// interleaved thinking sits between tool_use blocks.
			for j, k := range m.Blocks() {
				if k >= 0 {
					sep()
					var err error
					if b, err = appendToolUse(b, &m.ToolCalls[k]); err != nil {
						return b, nil, fmt.Errorf("messages[%d]: %w", i, err)
					}
					took(start)
					continue
				}
				switch p := &m.Parts[j]; {
				case p.Type == runtime.PartText && (p.Text == "" || calls && strings.TrimSpace(p.Text) == ""):
					carry(p.CacheControl)
				case p.Type == runtime.PartText:
					sep()
					b = appendText(b, p.Text, p.CacheControl)
					took(start)
				case p.Type == runtime.PartThinking:
					// Sent back as the model returned it: a changed
					// block fails its signature, and one takes no
					// breakpoint.
					sep()
					b = append(b, `{"type":"thinking","thinking":`...)
					b = wire.AppendString(b, p.Text)
					b = append(b, `,"signature":`...)
					b = wire.AppendString(b, p.Signature)
					b = append(b, '}')
				case p.Type == runtime.PartRedactedThinking:
					sep()
					b = append(b, `{"type":"redacted_thinking","data":`...)
					b = wire.AppendString(b, p.Signature)
					b = append(b, '}')
				}
			}
			b = append(b, "]}"...)
		default:
			return b, nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	closeResults()
	return append(b, ']'), carried, nil
}

// unsentParts refuses a part the message's role has no block for, which
// would otherwise be left out of the request: an image or a PDF in a tool
// message that is not an image of one of its results, a PDF in a message
// that is not the user's. The Messages API takes them in a user message
// alone, and a model not sent them would answer without them. It refuses
// too an image part holding data that is neither an image nor UTF-8 text
// (runtime.ContentPart.Unread), which the API refuses as an image and no
// other block holds.
func unsentParts(m *runtime.Message) error {
	for j := range m.Parts {
		p := &m.Parts[j]
		switch {
		case p.Type == runtime.PartImage && p.Unread():
			return fmt.Errorf("parts[%d]: an image part holding data that is neither an image nor UTF-8 text, which no block of the Messages API takes (send an image, the text as UTF-8, or a PDF as a document)", j)
		case m.Role == "user":
		case p.Type == runtime.PartDocument:
			return fmt.Errorf("parts[%d]: a PDF document in a message of role %s, which an Anthropic model reads in a user message alone", j, m.Role)
		case p.Type == runtime.PartImage && m.Role == "tool" && p.ToolCallID == "":
			return fmt.Errorf("parts[%d]: an image in a tool message that is part of no tool result (its tool_call_id is empty)", j)
		}
	}
	return nil
}

// resultImages returns the image parts of the tool result parts[j]: those
// that follow it answering the same call (runtime.ContentPart.ToolCallID).
func resultImages(parts []runtime.ContentPart, j int) []runtime.ContentPart {
	k := j + 1
	for k < len(parts) && parts[k].Type == runtime.PartImage && parts[k].ToolCallID == parts[j].ToolCallID {
		k++
	}
	return parts[j+1 : k]
}

// resultImagesPaired checks that each image part of a tool result follows
// its result (resultImages): one whose result is not there (a layer left it
// out) would otherwise be lost.
func resultImagesPaired(parts []runtime.ContentPart) error {
	for k := range parts {
		p := &parts[k]
		if p.Type != runtime.PartImage || p.ToolCallID == "" {
			continue
		}
		j := k - 1
		for j >= 0 && parts[j].Type == runtime.PartImage && parts[j].ToolCallID == p.ToolCallID {
			j--
		}
		if j < 0 || parts[j].Type != runtime.PartToolResult || parts[j].ToolCallID != p.ToolCallID {
			return fmt.Errorf("an image of the result of tool call %s does not follow that result", p.ToolCallID)
		}
	}
	return nil
}

// appendToolUse appends a tool_use block.
func appendToolUse(b []byte, tc *runtime.ToolUse) ([]byte, error) {
	b = append(b, `{"type":"tool_use","id":`...)
	b = appendToolID(b, tc.ID)
	b = append(b, `,"name":`...)
	b = wire.AppendString(b, tc.Name)
	b = append(b, `,"input":`...)
	if len(tc.Arguments) == 0 {
		b = append(b, "{}"...)
	} else {
		var err error
		if b, err = wire.AppendRaw(b, tc.Arguments); err != nil {
			return b, fmt.Errorf("tool call %s: arguments are not JSON: %w", tc.ID, err)
		}
		if !wire.IsObject(tc.Arguments) {
			// OpenAI's API takes any string as an earlier call's
			// arguments; a tool_use input is an object, and the call
			// would be refused upstream, or read as another call.
			return b, runtime.ProviderRefused(fmt.Errorf("tool call %s: arguments are JSON but not an object, which an Anthropic model's tool_use input must be", tc.ID))
		}
	}
	if tc.CacheControl != nil {
		b = appendCacheControl(b, tc.CacheControl)
	}
	return append(b, '}'), nil
}

// appendToolID appends a tool call's id as the API takes it: letters,
// digits, _ and - alone (^[a-zA-Z0-9_-]+$). An id outside that pattern
// (an OpenAI-format history may hold functions.get_weather:0, as some
// OpenAI-compatible servers write them) is sent with each other character
// as _ and a suffix of its hash: the same for a call and its result, and
// distinct for distinct ids. The model answers with ids of its own, so no
// id sent comes back.
func appendToolID(b []byte, id string) []byte {
	safe := id != ""
	for i := 0; i < len(id) && safe; i++ {
		safe = idByte(id[i])
	}
	if safe {
		return wire.AppendString(b, id)
	}
	b = append(b, '"')
	for _, r := range id {
		if r < utf8.RuneSelf && idByte(byte(r)) {
			b = append(b, byte(r))
		} else {
			b = append(b, '_')
		}
	}
	sum := sha256.Sum256([]byte(id))
	b = append(b, '_')
	b = hex.AppendEncode(b, sum[:6])
	return append(b, '"')
}

// idByte reports whether c may be in a tool call id the API takes.
func idByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// carryBreakpoint gives the block b[start:end+1] (end its closing brace)
// the prompt-cache breakpoint cc of an empty text block left out after it:
// the prefix up to the empty block is the prefix up to that one. A block
// with a breakpoint of its own (its members name one, which a JSON
// string's escaped quotes cannot fake; a tool call's input can, and then
// the breakpoint is left out) keeps it.
func carryBreakpoint(b []byte, start, end int, cc *runtime.CacheControl) []byte {
	if cc == nil || start < 0 || end >= len(b) || b[end] != '}' || bytes.Contains(b[start:end], []byte(`"cache_control":`)) {
		return b
	}
	return slices.Insert(b, end, appendCacheControl(nil, cc)...)
}

// appendText appends a text block.
func appendText(b []byte, text string, cc *runtime.CacheControl) []byte {
	b = append(b, `{"type":"text","text":`...)
	b = wire.AppendString(b, text)
	if cc != nil {
		b = appendCacheControl(b, cc)
	}
	return append(b, '}')
}

// appendDocument appends a document block: a plain-text document (a text
// part), or a PDF from a URL or base64 data (a data: URL).
func appendDocument(b []byte, p runtime.ContentPart) []byte {
	b = append(b, `{"type":"document","source":`...)
	switch {
	case p.Type == runtime.PartText:
		b = append(b, `{"type":"text","media_type":"text/plain","data":`...)
		b = wire.AppendString(b, p.Text)
	case isDataURL(p.ImageURL):
		media, data, _ := runtime.DataSource(p.ImageURL)
		b = append(b, `{"type":"base64","media_type":`...)
		b = wire.AppendString(b, media)
		b = append(b, `,"data":`...)
		b = wire.AppendString(b, data)
	default:
		b = append(b, `{"type":"url","url":`...)
		b = wire.AppendString(b, p.ImageURL)
	}
	b = append(b, '}')
	if p.CacheControl != nil {
		b = appendCacheControl(b, p.CacheControl)
	}
	return append(b, '}')
}

// appendImage appends an image block: a URL source, or base64 data. An
// image part holding text in place of an image (data:text/plain, an SVG:
// runtime.ContentPart.Attachment), which the API refuses as an image, is
// a plain-text document holding the text the layers read.
func appendImage(b []byte, p runtime.ContentPart) []byte {
	if text := p.HeldText(); text != "" {
		return appendDocument(b, runtime.ContentPart{Type: runtime.PartText, Text: text, CacheControl: p.CacheControl})
	}
	b = append(b, `{"type":"image","source":`...)
	if p.ImageURL != "" && !isDataURL(p.ImageURL) {
		b = append(b, `{"type":"url","url":`...)
		b = wire.AppendString(b, p.ImageURL)
	} else {
		media, data, inline := runtime.DataSource(p.ImageURL)
		if !inline {
			media, data = p.MediaType, wire.Base64(p.Data)
		}
		b = append(b, `{"type":"base64","media_type":`...)
		b = wire.AppendString(b, media)
		b = append(b, `,"data":`...)
		b = wire.AppendString(b, data)
	}
	b = append(b, '}')
	if p.CacheControl != nil {
		b = appendCacheControl(b, p.CacheControl)
	}
	return append(b, '}')
}

// isDataURL reports whether u is a data: URL as the layers read it, in any
// case and past white space (runtime.DataURL): it is sent as the data they
// read (runtime.DataSource), never as a URL to fetch.
func isDataURL(u string) bool {
	_, ok := runtime.DataURL(u)
	return ok
}

// historyTools returns, for a request that offers no tools, the tools its
// history calls, each once in the order first called, with an empty
// schema (nil when it offers tools or calls none). The Messages API
// refuses a request whose messages hold tool_use or tool_result blocks
// and that defines no tools, which a client sends when it asks for an
// answer without tools once some were called (Codex compacting a
// conversation); the body declares these, with tool_choice none, so that
// the model calls none of them.
func historyTools(req *runtime.ChatRequest) []runtime.ToolDef {
	if len(req.Tools) > 0 {
		return nil
	}
	var out []runtime.ToolDef
	var seen map[string]bool
	for i := range req.Messages {
		for j := range req.Messages[i].ToolCalls {
			name := req.Messages[i].ToolCalls[j].Name
			if seen[name] {
				continue
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			seen[name] = true
			out = append(out, runtime.ToolDef{Name: name, Parameters: emptySchema})
		}
	}
	return out
}

// emptySchema is the input schema of a tool declared for its calls in a
// request's history (historyTools).
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// customTools refuses OpenAI's custom (free-form) tools and their calls:
// the Messages API has none. Offered as a tool of one string parameter,
// the tool's grammar would bind nothing (a model could call it with any
// text, which the client would run as if the grammar held it).
func customTools(req *runtime.ChatRequest) error {
	for i := range req.Tools {
		if req.Tools[i].Custom != nil {
			return runtime.ProviderRefused(fmt.Errorf("the request offers the custom (free-form) tool %s, which an Anthropic model cannot honour: it has no custom tools, and would not hold its input to the tool's format", req.Tools[i].Name))
		}
	}
	for i := range req.Messages {
		for _, tc := range req.Messages[i].ToolCalls {
			if tc.Custom {
				return runtime.ProviderRefused(fmt.Errorf("messages[%d]: the call %s of the custom (free-form) tool %s, which an Anthropic model cannot read: it has no custom tools", i, tc.ID, tc.Name))
			}
		}
	}
	return nil
}
