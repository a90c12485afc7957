package openai

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3/shared"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// maxStop is the most stop sequences the Chat Completions API takes.
const maxStop = 4

// body encodes the request body of req: the JSON the SDK would encode from
// the same request in its parameter types, written straight into a byte
// slice (the SDK's reflective encoding cost about as much as the rest of
// sending the request).
func (c *Client) body(req *runtime.ChatRequest) ([]byte, error) {
	if len(req.Betas) > 0 {
		// Beta features of Anthropic's API: an OpenAI-shaped model cannot
		// honour them, and the call must not be served without them.
		return nil, runtime.ProviderRefused(fmt.Errorf("the request asks for Anthropic beta features (anthropic-beta: %s), which an OpenAI-shaped model cannot honour", strings.Join(req.Betas, ",")))
	}
	if req.TopK != nil {
		// Anthropic's sampling parameter: the API has none, and the
		// model would sample otherwise than asked.
		return nil, runtime.ProviderRefused(fmt.Errorf("the request sets top_k %d, which an OpenAI-shaped model cannot honour", *req.TopK))
	}
	if req.Thinking != nil {
		// Anthropic's extended thinking, on a token budget: an
		// OpenAI-shaped model reasons by effort level, and the call must
		// not be served without what it asked for.
		return nil, runtime.ProviderRefused(fmt.Errorf("the request asks for extended thinking (thinking type %q), which an OpenAI-shaped model cannot honour (use reasoning_effort)", req.Thinking.Type))
	}
	if req.Effort != "" {
		// Anthropic's effort bounds the whole answer (text, tool calls,
		// thinking); OpenAI's reasoning_effort bounds the reasoning
		// alone, and a model that does not reason refuses it.
		return nil, runtime.ProviderRefused(fmt.Errorf("the request sets output_config.effort %q, which an OpenAI-shaped model cannot honour (use reasoning_effort)", req.Effort))
	}
	if len(req.Stop) > maxStop {
		// An Anthropic client's stop_sequences have no such bound; the
		// API refuses more, and a model stopped at some alone would run
		// past the others.
		return nil, runtime.ProviderRefused(fmt.Errorf("the request sets %d stop sequences, more than the %d an OpenAI-shaped model takes", len(req.Stop), maxStop))
	}
	for _, e := range req.ContextEdits {
		// Clearing thinking blocks asks for nothing here: they are never
		// sent to an OpenAI-shaped model. Any other edit would leave out
		// what the model is sent.
		if e.Type != runtime.ClearThinking {
			return nil, runtime.ProviderRefused(fmt.Errorf("the request asks for the context management edit %s, which an OpenAI-shaped model cannot honour: it would read what the edit clears", e.Type))
		}
	}
	b := make([]byte, 0, 256+c.sizeHint(req))
	b = append(b, `{"stream":true,"model":`...)
	b = wire.AppendString(b, c.cfg.Model)
	b = append(b, `,"stream_options":{"include_usage":true},"messages":`...)
	b, err := appendMessages(b, req.Messages)
	if err != nil {
		return nil, err
	}
	if n := req.MaxTokens; n > 0 || c.cfg.MaxTokens > 0 {
		if n <= 0 {
			n = c.cfg.MaxTokens
		}
		if c.official {
			b = append(b, `,"max_completion_tokens":`...)
		} else {
			b = append(b, `,"max_tokens":`...)
		}
		b = wire.AppendInt(b, int64(n))
	}
	if len(req.Tools) > 0 {
		b = append(b, `,"tools":[`...)
		for i, t := range req.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			if t.Custom != nil {
				b = appendCustomTool(b, &t)
				continue
			}
			b = append(b, `{"type":"function","function":{"name":`...)
			b = wire.AppendString(b, t.Name)
			if t.Description != "" {
				b = append(b, `,"description":`...)
				b = wire.AppendString(b, t.Description)
			}
			if len(t.Parameters) > 0 {
				if b, err = appendParameters(b, t.Parameters); err != nil {
					return nil, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
				}
			}
			if t.Strict {
				b = append(b, `,"strict":true`...)
			}
			b = append(b, "}}"...)
		}
		b = append(b, ']')
		// The API takes parallel_tool_calls only with tools.
		if p := req.ParallelToolCalls; p != nil {
			b = append(b, `,"parallel_tool_calls":`...)
			b = strconv.AppendBool(b, *p)
		}
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		b = append(b, `,"tool_choice":`...)
		b = wire.AppendString(b, req.ToolChoice)
	default:
		typ := "function"
		if i := slices.IndexFunc(req.Tools, func(t runtime.ToolDef) bool { return t.Name == req.ToolChoice }); i >= 0 && req.Tools[i].Custom != nil {
			typ = "custom"
		}
		b = append(b, `,"tool_choice":{"type":"`...)
		b = append(b, typ...)
		b = append(b, `","`...)
		b = append(b, typ...)
		b = append(b, `":{"name":`...)
		b = wire.AppendString(b, req.ToolChoice)
		b = append(b, "}}"...)
	}
	if b, err = wire.AppendSampling(b, req.Temperature, req.TopP); err != nil {
		return nil, err
	}
	if req.ReasoningEffort != "" {
		b = append(b, `,"reasoning_effort":`...)
		b = wire.AppendString(b, req.ReasoningEffort)
	}
	if req.Verbosity != "" {
		b = append(b, `,"verbosity":`...)
		b = wire.AppendString(b, req.Verbosity)
	}
	if req.Seed != nil {
		b = append(b, `,"seed":`...)
		b = wire.AppendInt(b, *req.Seed)
	}
	if b, err = appendPenalties(b, req); err != nil {
		return nil, err
	}
	if id := req.Metadata["user_id"]; id != "" {
		// The end user's id, as the Anthropic client forwards it.
		b = append(b, `,"user":`...)
		b = wire.AppendString(b, id)
	}
	if id := req.SafetyIdentifier; id != "" {
		b = append(b, `,"safety_identifier":`...)
		b = wire.AppendString(b, id)
	}
	if k := req.PromptCacheKey; k != "" {
		b = append(b, `,"prompt_cache_key":`...)
		b = wire.AppendString(b, k)
	}
	if len(req.Stop) > 0 {
		b = append(b, `,"stop":`...)
		b = wire.AppendStrings(b, req.Stop)
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case runtime.FormatText, runtime.FormatJSONObject:
			b = append(b, `,"response_format":{"type":`...)
			b = wire.AppendString(b, rf.Type)
			b = append(b, '}')
		case runtime.FormatJSONSchema:
			name := rf.Name
			if name == "" {
				name = "output"
			}
			b = append(b, `,"response_format":{"type":"json_schema","json_schema":{"name":`...)
			b = wire.AppendString(b, name)
			if rf.Strict {
				b = append(b, `,"strict":true`...)
			}
			if len(rf.Schema) > 0 {
				b = append(b, `,"schema":`...)
				if b, err = wire.AppendRaw(b, rf.Schema); err != nil {
					return nil, fmt.Errorf("response_format: schema: %w", err)
				}
			}
			b = append(b, "}}"...)
		default:
			return nil, fmt.Errorf("unknown response format %q", rf.Type)
		}
	}
	return append(b, '}'), nil
}

// appendPenalties appends the frequency and presence penalties and the
// logit bias, when set (its token ids in order, as the SDK's encoding of
// a map sorts them).
func appendPenalties(b []byte, req *runtime.ChatRequest) ([]byte, error) {
	var err error
	for _, p := range [...]struct {
		name string
		v    *float64
	}{{"frequency_penalty", req.FrequencyPenalty}, {"presence_penalty", req.PresencePenalty}} {
		if p.v == nil {
			continue
		}
		b = append(b, `,"`...)
		b = append(b, p.name...)
		b = append(b, `":`...)
		if b, err = wire.AppendFloat(b, *p.v); err != nil {
			return b, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	if len(req.LogitBias) == 0 {
		return b, nil
	}
	b = append(b, `,"logit_bias":{`...)
	for i, token := range slices.Sorted(maps.Keys(req.LogitBias)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = wire.AppendString(b, token)
		b = append(b, ':')
		b = wire.AppendInt(b, int64(req.LogitBias[token]))
	}
	return append(b, '}'), nil
}

// sizeHint estimates the bytes of req's texts, to size the body at once.
func (c *Client) sizeHint(req *runtime.ChatRequest) int {
	n := 0
	for i := range req.Messages {
		m := &req.Messages[i]
		n += len(m.Content) + len(m.Name) + 64
		for _, p := range m.Parts {
			n += len(p.Text) + len(p.ImageURL) + len(p.Data)*4/3 + 64
		}
		for _, tc := range m.ToolCalls {
			n += len(tc.Arguments) + len(tc.Name) + len(tc.ID) + 64
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters) + 64
	}
	return n
}

// appendParameters appends a tool's parameters schema, which must be a
// JSON object (a null is no schema, and is left out).
func appendParameters(b []byte, raw json.RawMessage) ([]byte, error) {
	if !wire.IsObject(raw) {
		// What decoding it as an object makes of it: null, or the error.
		var m shared.FunctionParameters
		if err := json.Unmarshal(raw, &m); err != nil {
			return b, err
		}
		return b, nil
	}
	b = append(b, `,"parameters":`...)
	return wire.AppendRaw(b, raw)
}

// appendMessages appends the transcript: tool results (a tool message, or
// the tool_result parts of any message) become tool messages; text and
// images of user messages become content parts. A system, user or
// assistant message's Name (its author, among several of the same role)
// is sent as its name; a tool message has none in the API.
func appendMessages(b []byte, in []runtime.Message) ([]byte, error) {
	b = append(b, '[')
	first := true
	open := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	toolMessage := func(content, id string) {
		open()
		b = append(b, `{"role":"tool","content":`...)
		b = wire.AppendString(b, content)
		b = append(b, `,"tool_call_id":`...)
		b = wire.AppendString(b, id)
		b = append(b, '}')
	}
	for i := range in {
		m := &in[i]
		for _, p := range m.Parts {
			if p.Type == runtime.PartImage && p.ToolCallID != "" {
				// A tool message holds text alone; sent as a user
				// message, the image would be read as the user's.
				return nil, runtime.ProviderRefused(fmt.Errorf("messages[%d]: the result of tool call %s holds an image, which an OpenAI-shaped model cannot read in a tool result (its tool messages hold text alone)", i, p.ToolCallID))
			}
			if _, data := runtime.DataURL(p.ImageURL); p.Type == runtime.PartDocument && !data {
				// The API takes a file's data or the id of a file
				// uploaded to it, not a URL.
				return nil, runtime.ProviderRefused(fmt.Errorf("messages[%d]: a document known by its URL, which an OpenAI-shaped model cannot fetch (send its data)", i))
			}
		}
		text, rest := textOf(m)
		switch m.Role {
		case "system", "developer":
			open()
			b = append(b, `{"role":"system","content":`...)
			b = wire.AppendString(b, text)
			b = appendName(b, m.Name)
			b = append(b, '}')
		case "user":
			images := 0
			for _, p := range rest {
				switch p.Type {
				case runtime.PartToolResult:
					toolMessage(toolResultText(p), p.ToolCallID)
				case runtime.PartImage, runtime.PartDocument:
					images++
				}
			}
			switch {
			case images > 0:
				open()
				b = append(b, `{"role":"user","content":[`...)
				sep := false
				for _, p := range userParts(m) {
					if sep {
						b = append(b, ',')
					}
					sep = true
					if p.Type == runtime.PartText {
						b = append(b, `{"type":"text","text":`...)
						b = wire.AppendString(b, p.Text)
						b = append(b, '}')
						continue
					}
					if p.Type == runtime.PartDocument {
						b = append(b, `{"type":"file","file":{"file_data":`...)
						b = wire.AppendString(b, imageURL(p))
						if p.Filename != "" {
							b = append(b, `,"filename":`...)
							b = wire.AppendString(b, p.Filename)
						}
						b = append(b, "}}"...)
						continue
					}
					b = append(b, `{"type":"image_url","image_url":{"url":`...)
					b = wire.AppendString(b, imageURL(p))
					if p.Detail != "" {
						b = append(b, `,"detail":`...)
						b = wire.AppendString(b, p.Detail)
					}
					b = append(b, "}}"...)
				}
				b = append(b, ']')
				b = appendName(b, m.Name)
				b = append(b, '}')
			case text != "" || len(rest) == 0:
				open()
				b = append(b, `{"role":"user","content":`...)
				b = wire.AppendString(b, text)
				b = appendName(b, m.Name)
				b = append(b, '}')
			}
		case "assistant":
			open()
			b = append(b, `{"role":"assistant"`...)
			b = appendName(b, m.Name)
			if text != "" || len(m.ToolCalls) == 0 {
				b = append(b, `,"content":`...)
				b = wire.AppendString(b, text)
			}
			if len(m.ToolCalls) > 0 {
				b = append(b, `,"tool_calls":[`...)
				for k, tc := range m.ToolCalls {
					if k > 0 {
						b = append(b, ',')
					}
					if tc.Custom {
						in, err := tc.CustomInput()
						if err != nil {
							return nil, fmt.Errorf("messages[%d]: %w", i, err)
						}
						b = append(b, `{"type":"custom","id":`...)
						b = wire.AppendString(b, tc.ID)
						b = append(b, `,"custom":{"name":`...)
						b = wire.AppendString(b, tc.Name)
						b = append(b, `,"input":`...)
						b = wire.AppendString(b, in)
						b = append(b, "}}"...)
						continue
					}
					args := string(tc.Arguments)
					if args == "" {
						args = "{}"
					}
					b = append(b, `{"type":"function","id":`...)
					b = wire.AppendString(b, tc.ID)
					b = append(b, `,"function":{"name":`...)
					b = wire.AppendString(b, tc.Name)
					b = append(b, `,"arguments":`...)
					b = wire.AppendString(b, args)
					b = append(b, "}}"...)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		case "tool":
			// The results are the message's tool_result parts, or else its
			// text answering ToolCallID.
			n := 0
			for _, p := range rest {
				if p.Type == runtime.PartToolResult {
					toolMessage(toolResultText(p), p.ToolCallID)
					n++
				}
			}
			if n == 0 && m.ToolCallID != "" {
				toolMessage(text, m.ToolCallID)
			}
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	return append(b, ']'), nil
}

// toolResultText is the content of a tool message for a tool result. The
// API's tool message has no error flag, so a result marked as an error
// (Anthropic's is_error) says so in its text, which a model reads:
// "error: TEXT", unless TEXT already says so (an agent turn's "error: ..."
// and "refused: ..." results).
func toolResultText(p runtime.ContentPart) string {
	if !p.IsError || hasPrefixFold(p.Text, "error") || hasPrefixFold(p.Text, "refused") {
		return p.Text
	}
	return "error: " + p.Text
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// appendCustomTool appends a custom tool: its name, description and
// input format (the grammar as the client sent it).
func appendCustomTool(b []byte, t *runtime.ToolDef) []byte {
	b = append(b, `{"type":"custom","custom":{"name":`...)
	b = wire.AppendString(b, t.Name)
	if t.Description != "" {
		b = append(b, `,"description":`...)
		b = wire.AppendString(b, t.Description)
	}
	switch c := t.Custom; c.Format {
	case runtime.CustomText:
		b = append(b, `,"format":{"type":"text"}`...)
	case runtime.CustomGrammar:
		b = append(b, `,"format":{"type":"grammar","grammar":{"definition":`...)
		b = wire.AppendString(b, c.Definition)
		b = append(b, `,"syntax":`...)
		b = wire.AppendString(b, c.Syntax)
		b = append(b, "}}"...)
	}
	return append(b, "}}"...)
}

// appendName appends a message's name field, when it has one.
func appendName(b []byte, name string) []byte {
	if name == "" {
		return b
	}
	b = append(b, `,"name":`...)
	return wire.AppendString(b, name)
}
