package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// anthropicChat is POST /v1/messages: Anthropic's Messages wire format.
var anthropicChat = chatAPI{decode: decodeMessages, headers: anthropicHeaders, complete: completeAnthropic, stream: newAnthropicStream,
	requestIDHeader: "Request-Id", ordered: true, wire: "anthropic"}

// anthropicHeaders carries the beta features a request asks for (the
// anthropic-beta header, repeated or comma-separated) to the model, which
// an Anthropic model honours and an OpenAI-shaped one refuses.
// (anthropic-version is the client's wire version, which the gateway
// speaks whatever it says.)
func anthropicHeaders(h http.Header, p *chatParams) error {
	for _, v := range h.Values("anthropic-beta") {
		for b := range strings.SplitSeq(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				p.req.Betas = append(p.req.Betas, b)
			}
		}
	}
	return nil
}

// The request body of the Messages API: the fields the gateway maps.
type antRequest struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []antMessage    `json:"messages"`
	Tools         []antTool       `json:"tools"`
	ToolChoice    *antToolChoice  `json:"tool_choice"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	StopSequences []string        `json:"stop_sequences"`
	Stream        bool            `json:"stream"`
	Metadata      *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	CacheControl json.RawMessage `json:"cache_control"`
	Thinking     *antThinking    `json:"thinking"`
	OutputConfig *struct {
		Effort string `json:"effort"`
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
	ContextManagement *struct {
		Edits []json.RawMessage `json:"edits"`
	} `json:"context_management"`
}

// antThinking is the thinking parameter.
type antThinking struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
	Display      string `json:"display"`
}

type antMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type antBlock struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	// Thinking, Signature and Data are a thinking block's and a
	// redacted_thinking block's.
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
	Data      string `json:"data"`
	// CacheControl marks a prompt-cache breakpoint.
	CacheControl json.RawMessage `json:"cache_control"`
}

type antTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      bool            `json:"strict"`
	// CacheControl marks a prompt-cache breakpoint.
	CacheControl json.RawMessage `json:"cache_control"`
}

type antToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// decodeMessages decodes a request of the Messages route, where max_tokens
// is required, as the API requires it: a request without it is not served
// with a bound of the gateway's choosing.
func decodeMessages(body []byte, p *chatParams) error {
	if err := decodeAnthropic(body, p); err != nil {
		return err
	}
	if p.req.MaxTokens == 0 {
		return errors.New("max_tokens: required")
	}
	return nil
}

// decodeAnthropic maps a Messages request onto the call model (the token
// counting route's too, where max_tokens is optional).
func decodeAnthropic(body []byte, p *chatParams) error {
	// The messages' slice is sized once (decodeOpenAI).
	in := antRequest{Messages: make([]antMessage, 0, p.items.messages)}
	if err := unmarshal(body, &in); err != nil {
		return err
	}
	// The fields first, as decodeOpenAI.
	if err := checkFields(body, anthropicShape); err != nil {
		return err
	}
	if in.Model == "" {
		return errors.New("model: required")
	}
	if len(in.Messages) == 0 {
		return errors.New("messages: at least one message is required")
	}
	if err := outputBound("max_tokens", in.MaxTokens); err != nil {
		return err
	}
	req := &p.req
	req.Model = in.Model
	if in.MaxTokens != nil {
		req.MaxTokens = *in.MaxTokens
	}
	req.Messages = make([]runtime.Message, 0, len(in.Messages)+1)
	if sys := nullIsEmpty(in.System); sys != nil {
		m, err := systemMessage(sys)
		if err != nil {
			return fmt.Errorf("system: %w", err)
		}
		req.Messages = append(req.Messages, m)
	}
	var err error
	if req.CacheControl, err = cacheControl(in.CacheControl); err != nil {
		return fmt.Errorf("cache_control: %w", err)
	}
	for i := range in.Messages {
		m, err := anthropicMessage(&in.Messages[i])
		if err != nil {
			return fmt.Errorf("messages[%d]: %w", i, err)
		}
		req.Messages = append(req.Messages, m)
		p.noteDocuments(&m, fmt.Sprintf("messages[%d]", i))
	}
	req.Tools = make([]runtime.ToolDef, 0, len(in.Tools))
	for i, t := range in.Tools {
		if t.Type != "" && t.Type != "custom" {
			// A server tool (web_search, web_fetch, code_execution) runs
			// at the provider, outside the policy's tool chain; an
			// Anthropic-defined client tool (bash, text_editor) has no
			// schema the call model could carry to another provider.
			return fmt.Errorf(`tools[%d].type: only custom tools (a name and an input_schema, type "custom" or none) are served, got %q: a server tool would run at the provider, out of the policy's reach`, i, t.Type)
		}
		if t.Name == "" {
			return fmt.Errorf("tools[%d].name: required", i)
		}
		cc, err := cacheControl(t.CacheControl)
		if err != nil {
			return fmt.Errorf("tools[%d].cache_control: %w", i, err)
		}
		req.Tools = append(req.Tools, runtime.ToolDef{Name: t.Name, Description: t.Description, Parameters: nullIsEmpty(t.InputSchema),
			Strict: t.Strict, CacheControl: cc})
	}
	if tc := in.ToolChoice; tc != nil {
		if tc.DisableParallelToolUse {
			no := false
			req.ParallelToolCalls = &no
		}
		switch tc.Type {
		case "auto", "none":
			req.ToolChoice = tc.Type
		case "any":
			req.ToolChoice = "required"
		case "tool":
			if tc.Name == "" {
				return errors.New("tool_choice.name: required for type tool")
			}
			if err := forcedTool("tool_choice.name", tc.Name); err != nil {
				return err
			}
			if err := forcedOffered("tool_choice.name", tc.Name, req.Tools); err != nil {
				return err
			}
			req.ToolChoice = tc.Name
		default:
			return fmt.Errorf(`tool_choice.type: want "auto", "any", "tool" or "none", got %q`, tc.Type)
		}
	}
	req.Temperature, req.TopP, req.Stop = in.Temperature, in.TopP, in.StopSequences
	if in.TopK != nil && *in.TopK < 0 {
		return fmt.Errorf("top_k: must be at least 0, got %d", *in.TopK)
	}
	// A sampling parameter: for an OpenAI model, whose API has none, the
	// call fails (runtime.ChatRequest.TopK).
	req.TopK = in.TopK
	if in.Metadata != nil && in.Metadata.UserID != "" {
		req.Metadata = map[string]string{"user_id": in.Metadata.UserID}
	}
	if oc := in.OutputConfig; oc != nil {
		switch oc.Effort {
		case "", "low", "medium", "high", "xhigh", "max":
			req.Effort = oc.Effort
		default:
			return fmt.Errorf(`output_config.effort: want "low", "medium", "high", "xhigh" or "max", got %q`, oc.Effort)
		}
		if f := oc.Format; f != nil {
			if f.Type != runtime.FormatJSONSchema || nullIsEmpty(f.Schema) == nil {
				return errors.New(`output_config.format: want {"type": "json_schema", "schema": {...}}`)
			}
			req.ResponseFormat = &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Schema: f.Schema}
		}
	}
	if req.Thinking, err = thinking(in.Thinking); err != nil {
		return err
	}
	if cm := in.ContextManagement; cm != nil {
		if req.ContextEdits, err = contextEdits(cm.Edits, req.Thinking != nil, req.Tools); err != nil {
			return err
		}
	}
	p.stream = in.Stream
	p.includeUsage = true
	return nil
}

// thinking maps the thinking parameter: enabled (with budget_tokens),
// adaptive and between_tools are carried; disabled, the default, asks for
// nothing.
func thinking(t *antThinking) (*runtime.Thinking, error) {
	if t == nil || t.Type == "disabled" {
		if t != nil && (t.BudgetTokens != nil || t.Display != "") {
			return nil, errors.New("thinking: type disabled takes no budget_tokens or display")
		}
		return nil, nil
	}
	out := &runtime.Thinking{Type: t.Type, Display: t.Display}
	switch t.Type {
	case "enabled":
		if t.BudgetTokens == nil || *t.BudgetTokens <= 0 {
			return nil, errors.New("thinking.budget_tokens: required for type enabled, and positive")
		}
		if err := outputBound("thinking.budget_tokens", t.BudgetTokens); err != nil {
			return nil, err
		}
		out.BudgetTokens = *t.BudgetTokens
	case "adaptive", "between_tools":
		if t.BudgetTokens != nil {
			return nil, fmt.Errorf("thinking.budget_tokens: only type enabled takes a budget, got type %s", t.Type)
		}
		if t.Type == "between_tools" && t.Display != "" {
			return nil, errors.New("thinking.display: type between_tools takes none")
		}
	default:
		return nil, fmt.Errorf(`thinking.type: want "enabled", "adaptive", "between_tools" or "disabled", got %q`, t.Type)
	}
	switch t.Display {
	case "", "summarized", "omitted":
	default:
		return nil, fmt.Errorf(`thinking.display: want "summarized" or "omitted", got %q`, t.Display)
	}
	return out, nil
}

// contextEdits maps context_management.edits: clearing earlier thinking
// blocks (with thinking on, as the API requires) and clearing old tool
// results, each relayed as sent. Compaction, which has the API rewrite
// the transcript into a summary the policy's layers never read and answer
// with a block the gateway does not decode, is refused.
func contextEdits(raw []json.RawMessage, thinking bool, tools []runtime.ToolDef) ([]runtime.ContextEdit, error) {
	edits := make([]runtime.ContextEdit, 0, len(raw))
	for i, r := range raw {
		var e runtime.ContextEdit
		if r = nullIsEmpty(r); r == nil || !bytes.HasPrefix(bytes.TrimSpace(r), []byte("{")) || e.UnmarshalJSON(r) != nil {
			return nil, fmt.Errorf(`context_management.edits[%d]: want an object {"type": ...}`, i)
		}
		switch e.Type {
		case runtime.ClearThinking:
			if !thinking {
				return nil, fmt.Errorf("context_management.edits[%d]: %s needs thinking on (enabled or adaptive), as the API requires", i, e.Type)
			}
			if err := editParams(e.Params, tools); err != nil {
				return nil, fmt.Errorf("context_management.edits[%d].%w", i, err)
			}
		case runtime.ClearToolUses:
			if err := editParams(e.Params, tools); err != nil {
				return nil, fmt.Errorf("context_management.edits[%d].%w", i, err)
			}
		case "compact_20260112":
			return nil, fmt.Errorf("context_management.edits[%d].type: %s is not served: the API would replace the transcript with a summary of its own, which the policy's layers never read, and answer with a compaction block the gateway does not carry", i, e.Type)
		default:
			return nil, fmt.Errorf("context_management.edits[%d].type: want %q or %q, got %q", i, runtime.ClearThinking, runtime.ClearToolUses, e.Type)
		}
		edits = append(edits, e)
	}
	return edits, nil
}

// maxEditCount bounds the counts of an edit's parameters (tokens, tool
// uses, turns): above any context window, and too short for a card or an
// account number to ride in one.
const maxEditCount = 10_000_000

// editParams checks the parameters of a context management edit, which
// reach the provider and no layer reads, against their documented shapes:
// counts {"type": T, "value": N} (trigger, keep, clear_at_least; keep of
// clear_thinking also "all"), N an integer from 0 to maxEditCount, and
// exclude_tools and clear_tool_inputs (or true or false) naming tools the
// request offers, exactly (a name offered in another case is named in the
// error). Any other value is refused, rather than relayed as text
// no detector read. The error begins with the parameter's path.
func editParams(params json.RawMessage, tools []runtime.ToolDef) error {
	var p struct {
		Type            string
		Trigger, Keep   json.RawMessage
		ClearAtLeast    json.RawMessage `json:"clear_at_least"`
		ExcludeTools    json.RawMessage `json:"exclude_tools"`
		ClearToolInputs json.RawMessage `json:"clear_tool_inputs"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return fmt.Errorf("type: %v", err)
	}
	count := func(at string, raw json.RawMessage, types ...string) error {
		if nullIsEmpty(raw) == nil {
			return nil
		}
		var c struct {
			Type  string
			Value json.RawMessage
		}
		if json.Unmarshal(raw, &c) != nil {
			return fmt.Errorf(`%s: want {"type": %q, "value": N}`, at, types[0])
		}
		if !slices.Contains(types, c.Type) {
			return fmt.Errorf("%s.type: want %s, got %q", at, quotedOr(types), c.Type)
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(c.Value)), 10, 64)
		if err != nil || n < 0 || n > maxEditCount {
			return fmt.Errorf("%s.value: want an integer from 0 to %d", at, maxEditCount)
		}
		return nil
	}
	names := func(at string, raw json.RawMessage, orBool bool) error {
		raw = nullIsEmpty(raw)
		if raw == nil || orBool && (string(raw) == "true" || string(raw) == "false") {
			return nil
		}
		// A null element would read as "": it is no name.
		var list []*string
		if json.Unmarshal(raw, &list) != nil || slices.Contains(list, nil) {
			return fmt.Errorf("%s: want a list of tool names", at)
		}
		for k, name := range list {
			if slices.ContainsFunc(tools, func(t runtime.ToolDef) bool { return t.Name == *name }) {
				continue
			}
			// The API matches names exactly: one offered in another
			// case excludes nothing.
			if i := slices.IndexFunc(tools, func(t runtime.ToolDef) bool { return strings.EqualFold(t.Name, *name) }); i >= 0 {
				return fmt.Errorf("%s[%d]: %q is not a tool the request offers: tool names are read exactly, and the request offers %q", at, k, *name, tools[i].Name)
			}
			return fmt.Errorf("%s[%d]: %q is not a tool the request offers; name tools from tools", at, k, *name)
		}
		return nil
	}
	if p.Type == runtime.ClearThinking {
		if k := bytes.TrimSpace(p.Keep); string(k) == `"all"` {
			return nil
		}
		if err := count("keep", p.Keep, "thinking_turns"); err != nil {
			return fmt.Errorf(`keep: want "all" or {"type": "thinking_turns", "value": N}: %w`, err)
		}
		return nil
	}
	for _, err := range []error{
		count("trigger", p.Trigger, "input_tokens", "tool_uses"),
		count("keep", p.Keep, "tool_uses"),
		count("clear_at_least", p.ClearAtLeast, "input_tokens"),
		names("exclude_tools", p.ExcludeTools, false),
		names("clear_tool_inputs", p.ClearToolInputs, true),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// quotedOr lists values quoted, joined by "or".
func quotedOr(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, " or ")
}

// cacheControl decodes a prompt-cache breakpoint (nil for none).
func cacheControl(raw json.RawMessage) (*runtime.CacheControl, error) {
	if nullIsEmpty(raw) == nil {
		return nil, nil
	}
	var cc runtime.CacheControl
	if err := json.Unmarshal(raw, &cc); err != nil {
		return nil, errors.New(`want {"type": "ephemeral", "ttl": "5m" or "1h"}`)
	}
	if cc.Type != "ephemeral" {
		return nil, fmt.Errorf(`type: want "ephemeral", got %q`, cc.Type)
	}
	if cc.TTL != "" && cc.TTL != "5m" && cc.TTL != "1h" {
		return nil, fmt.Errorf(`ttl: want "5m" or "1h", got %q`, cc.TTL)
	}
	return &cc, nil
}

// textBlocks decodes a string or an array of text blocks.
func textBlocks(raw json.RawMessage) (string, []antBlock, error) {
	if raw[0] == '"' {
		s, err := jsonString(raw)
		return s, nil, err
	}
	var blocks []antBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", nil, errors.New("want a string or an array of text blocks")
	}
	for i, bl := range blocks {
		if bl.Type != "text" {
			return "", nil, fmt.Errorf(`[%d].type: want "text", got %q`, i, bl.Type)
		}
	}
	return "", blocks, nil
}

// systemMessage maps the system prompt: its text, or its blocks as text
// parts, each with its prompt-cache breakpoint, as they reach a Claude
// model (which reads them run together, as a guard does); one block
// without a breakpoint is the text alone.
func systemMessage(raw json.RawMessage) (runtime.Message, error) {
	m := runtime.Message{Role: "system"}
	s, blocks, err := textBlocks(raw)
	if err != nil || blocks == nil {
		m.Content = s
		return m, err
	}
	m.Parts = make([]runtime.ContentPart, len(blocks))
	for i, bl := range blocks {
		cc, err := cacheControl(bl.CacheControl)
		if err != nil {
			return m, fmt.Errorf("[%d].cache_control: %w", i, err)
		}
		m.Parts[i] = runtime.ContentPart{Type: runtime.PartText, Text: bl.Text, CacheControl: cc}
	}
	switch {
	case len(blocks) == 0:
		m.Parts = nil
	case len(blocks) == 1 && m.Parts[0].CacheControl == nil:
		m.Content, m.Parts = blocks[0].Text, nil
	}
	return m, nil
}

// imagePart maps an image block's source: base64 data (as a data: URL)
// or a URL. The error names the field from source on.
func imagePart(bl *antBlock) (runtime.ContentPart, error) {
	src := bl.Source
	switch {
	case src != nil && src.Type == "base64" && src.Data != "":
		return runtime.ContentPart{Type: runtime.PartImage, MediaType: src.MediaType,
			ImageURL: "data:" + src.MediaType + ";base64," + src.Data}, nil
	case src != nil && src.Type == "url" && src.URL != "":
		return runtime.ContentPart{Type: runtime.PartImage, ImageURL: src.URL}, nil
	}
	return runtime.ContentPart{}, errors.New("source: want {type: base64, media_type, data} or {type: url, url}")
}

// documentPart maps a document block's source: plain text, read by every
// layer as the message's text, or a PDF (base64 data, as a data: URL, or
// a URL), which no layer reads (runtime.PartDocument). The error names the
// field from source on.
func documentPart(bl *antBlock) (runtime.ContentPart, error) {
	src := bl.Source
	switch {
	case src == nil:
	case src.Type == "text" && (src.MediaType == "" || src.MediaType == "text/plain"):
		return runtime.ContentPart{Type: runtime.PartText, Text: src.Data, Document: true}, nil
	case src.Type == "base64" && src.MediaType == "application/pdf" && src.Data != "":
		return runtime.ContentPart{Type: runtime.PartDocument, MediaType: src.MediaType,
			ImageURL: "data:application/pdf;base64," + src.Data}, nil
	case src.Type == "url" && src.URL != "":
		return runtime.ContentPart{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: src.URL}, nil
	}
	return runtime.ContentPart{}, errors.New(`source: want {type: text, media_type: text/plain, data}, {type: base64, media_type: application/pdf, data} or {type: url, url}`)
}

// hasDocument reports whether parts hold a document: a text one stays a
// part, to reach a Claude model as a document again.
func hasDocument(parts []runtime.ContentPart) bool {
	for i := range parts {
		if parts[i].Document || parts[i].Type == runtime.PartDocument {
			return true
		}
	}
	return false
}

// resultContent decodes a tool result's content: a string, or an array of
// text and image blocks (a tool that returns a screenshot). It returns the
// text, joined by line breaks, the images, each an image part of the
// result (ToolCallID id), and the last prompt-cache breakpoint among the
// blocks (an image's breakpoint is the result's, as a text block's is).
// The error names the field after "content".
func resultContent(raw json.RawMessage, id string) (string, []runtime.ContentPart, *runtime.CacheControl, error) {
	if raw[0] == '"' {
		s, err := jsonString(raw)
		if err != nil {
			err = fmt.Errorf(": %w", err)
		}
		return s, nil, nil, err
	}
	var blocks []antBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", nil, nil, errors.New(": want a string or an array of text and image blocks")
	}
	var images []runtime.ContentPart
	var text strings.Builder
	var last *runtime.CacheControl
	for i := range blocks {
		bl := &blocks[i]
		cc, err := cacheControl(bl.CacheControl)
		if err != nil {
			return "", nil, nil, fmt.Errorf("[%d].cache_control: %w", i, err)
		}
		if cc != nil {
			last = cc
		}
		switch bl.Type {
		case "text":
			if text.Len() > 0 {
				text.WriteByte('\n')
			}
			text.WriteString(bl.Text)
		case "image":
			p, err := imagePart(bl)
			if err != nil {
				return "", nil, nil, fmt.Errorf("[%d].%w", i, err)
			}
			p.ToolCallID = id
			images = append(images, p)
		default:
			return "", nil, nil, fmt.Errorf(`[%d].type: want "text" or "image", got %q`, i, bl.Type)
		}
	}
	return text.String(), images, last, nil
}

// anthropicMessage maps one message: a string, or blocks of text, image,
// tool_use (assistant, each in its place among the other blocks) and
// tool_result (user).
func anthropicMessage(in *antMessage) (runtime.Message, error) {
	m := runtime.Message{Role: in.Role}
	switch in.Role {
	case "user", "assistant":
	case "system", "developer":
		// The Messages API refuses them too: the system prompt has one
		// place, and an instruction moved there from mid-conversation
		// would be read as given before the turns it followed.
		return m, fmt.Errorf(`role: want "user" or "assistant", got %q: the Messages API's system prompt is the request's system field, not a message`, in.Role)
	default:
		return m, fmt.Errorf(`role: want "user" or "assistant", got %q`, in.Role)
	}
	c := bytes.TrimSpace(in.Content)
	if len(c) == 0 || string(c) == "null" {
		return m, errors.New("content: required")
	}
	if c[0] == '"' {
		var err error
		m.Content, err = jsonString(c)
		return m, err
	}
	// Sized once, as decodeOpenAI sizes the messages.
	blocks := make([]antBlock, 0, arrayLen(c))
	if err := json.Unmarshal(c, &blocks); err != nil {
		return m, errors.New("content: want a string or an array of content blocks")
	}
	var text []string
	cached := false
	for j := range blocks {
		bl := &blocks[j]
		cc, err := cacheControl(bl.CacheControl)
		if err != nil {
			return m, fmt.Errorf("content[%d].cache_control: %w", j, err)
		}
		cached = cached || cc != nil
		switch bl.Type {
		case "text":
			text = append(text, bl.Text)
			m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartText, Text: bl.Text, CacheControl: cc})
		case "image", "document":
			if in.Role != "user" {
				return m, fmt.Errorf("content[%d]: a block of type %s belongs in a user message", j, bl.Type)
			}
			part := imagePart
			if bl.Type == "document" {
				part = documentPart
			}
			p, err := part(bl)
			if err != nil {
				return m, fmt.Errorf("content[%d].%w", j, err)
			}
			p.CacheControl = cc
			if p.Type == runtime.PartText {
				text = append(text, p.Text)
			}
			m.Parts = append(m.Parts, p)
		case "tool_use":
			if in.Role != "assistant" {
				return m, fmt.Errorf("content[%d]: a tool_use block belongs in an assistant message", j)
			}
			if bl.ID == "" || bl.Name == "" {
				return m, fmt.Errorf("content[%d]: a tool_use block needs an id and a name", j)
			}
			args := nullIsEmpty(bl.Input)
			if args == nil {
				args = json.RawMessage("{}")
			}
			// PartsAfter holds the parts before it until the parts are
			// all known (below).
			m.ToolCalls = append(m.ToolCalls, runtime.ToolUse{ID: bl.ID, Name: bl.Name, Arguments: args, CacheControl: cc, PartsAfter: len(m.Parts)})
		case "tool_result":
			if in.Role != "user" {
				return m, fmt.Errorf("content[%d]: a tool_result block belongs in a user message", j)
			}
			if bl.ToolUseID == "" {
				return m, fmt.Errorf("content[%d].tool_use_id: required", j)
			}
			var result string
			var images []runtime.ContentPart
			if r := nullIsEmpty(bl.Content); r != nil {
				var inner *runtime.CacheControl
				if result, images, inner, err = resultContent(r, bl.ToolUseID); err != nil {
					return m, fmt.Errorf("content[%d].content%w", j, err)
				}
				// A breakpoint inside the result caches at its end: the
				// result is one block upstream.
				if cc == nil {
					cc = inner
				}
			}
			m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartToolResult, Text: result, ToolCallID: bl.ToolUseID, IsError: bl.IsError, CacheControl: cc})
			m.Parts = append(m.Parts, images...)
		case "thinking", "redacted_thinking":
			// Sent back upstream as the model returned it, in its
			// place, between tool_use blocks when it came so
			// (interleaved thinking).
			switch {
			case in.Role != "assistant":
				return m, fmt.Errorf("content[%d]: a %s block belongs in an assistant message", j, bl.Type)
			case cc != nil:
				return m, fmt.Errorf("content[%d].cache_control: a %s block takes no prompt-cache breakpoint", j, bl.Type)
			}
			if bl.Type == "thinking" {
				if bl.Signature == "" {
					return m, fmt.Errorf("content[%d].signature: required (the signature the model returned with the block)", j)
				}
				m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartThinking, Text: bl.Thinking, Signature: bl.Signature})
			} else {
				if bl.Data == "" {
					return m, fmt.Errorf("content[%d].data: required (the data the model returned with the block)", j)
				}
				m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartRedactedThinking, Signature: bl.Data})
			}
		default:
			return m, fmt.Errorf(`content[%d].type: want "text", "image", "document", "tool_use", "tool_result", "thinking" or "redacted_thinking", got %q`, j, bl.Type)
		}
	}
	// Each tool call's place: the number of parts after it.
	for k := range m.ToolCalls {
		m.ToolCalls[k].PartsAfter = len(m.Parts) - m.ToolCalls[k].PartsAfter
	}
	// One text alone rides in Content; several texts stay parts (the
	// guards read them run together, as the model does, the detectors
	// so and joined by line breaks), and so does a text beside other parts, a
	// prompt-cache breakpoint or a tool call, in its place.
	if len(text) == 1 && len(m.Parts) == 1 && !cached && !m.Interleaved() && !hasDocument(m.Parts) {
		m.Content, m.Parts = strings.Join(text, "\n"), nil
	}
	return m, nil
}

// stopReason maps a finish reason onto Anthropic's vocabulary.
func stopReason(finish, stopSeq string, calls bool) string {
	switch finish {
	case runtime.FinishStop:
		if stopSeq != "" {
			return "stop_sequence"
		}
	case runtime.FinishLength:
		return "max_tokens"
	case runtime.FinishToolCalls:
		return "tool_use"
	case runtime.FinishContentFilter:
		return "refusal"
	case runtime.FinishPauseTurn:
		return "pause_turn"
	case "":
		if calls {
			return "tool_use"
		}
	}
	return "end_turn"
}

// appendStopSequence appends the stop_sequence field: the sequence the
// model stopped at, else null. One of asked, the request's stop_sequences,
// is relayed unchanged, as a client compares it with its list; another the
// upstream wrote is bounded as its error fields are.
func appendStopSequence(b []byte, finish, stopSeq string, asked []string) []byte {
	b = append(b, `,"stop_sequence":`...)
	if finish != runtime.FinishStop || stopSeq == "" {
		return append(b, "null"...)
	}
	if slices.Contains(asked, stopSeq) {
		return wire.AppendString(b, stopSeq)
	}
	return wire.AppendString(b, relayed(stopSeq, maxRelayedField))
}

// appendAnthropicUsage appends a usage object; Anthropic's input_tokens
// excludes the tokens read from the prompt cache and those written to it,
// and cache_creation splits the writes by the entries' time to live.
func appendAnthropicUsage(b []byte, u runtime.Usage) []byte {
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, max(u.InputTokens-u.CachedInputTokens-u.CacheWriteInputTokens, 0))
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = appendInt(b, u.CacheWriteInputTokens)
	hour := min(max(u.CacheWrite1hInputTokens, 0), u.CacheWriteInputTokens)
	b = append(b, `,"cache_creation":{"ephemeral_5m_input_tokens":`...)
	b = appendInt(b, max(u.CacheWriteInputTokens-hour, 0))
	b = append(b, `,"ephemeral_1h_input_tokens":`...)
	b = appendInt(b, hour)
	b = append(b, '}')
	b = append(b, `,"cache_read_input_tokens":`...)
	b = appendInt(b, u.CachedInputTokens)
	b = append(b, `,"output_tokens":`...)
	b = appendInt(b, u.OutputTokens)
	return append(b, '}')
}

// completeOrdered runs req as Pipeline.Complete does, recording the order
// of its blocks in o.
func completeOrdered(ctx context.Context, o *runtime.BlockOrder, pl *runtime.Pipeline, req runtime.ChatRequest) (runtime.ChatResponse, error) {
	st := pl.Chat(ctx, req)
	for d, err := range st.All() {
		if err == nil {
			o.Add(&d)
		}
	}
	return st.Response(), st.Err()
}

// blocksOf returns the blocks of resp in the order recorded, a tool call's
// index turned into its place among resp.ToolCalls (the k-th smallest
// index is the k-th call), a thinking block's into its place among
// resp.Thinking. What was not recorded (a response made without the
// order) follows in the usual order: thinking, text, tool calls. A
// response of neither text nor tool calls has an empty text block.
func blocksOf(o *runtime.BlockOrder, resp *runtime.ChatResponse) []runtime.OrderedBlock {
	var out []runtime.OrderedBlock
	var indexes []int
	for _, b := range o.Blocks {
		if b.Kind == runtime.BlockToolCall {
			indexes = append(indexes, b.Index)
		}
	}
	slices.Sort(indexes)
	thinking := make([]bool, len(resp.Thinking))
	calls := make([]bool, len(resp.ToolCalls))
	text := 0
	for _, b := range o.Blocks {
		switch b.Kind {
		case runtime.BlockThinking:
			if b.Index < 0 || b.Index >= len(thinking) || thinking[b.Index] {
				continue
			}
			thinking[b.Index] = true
		case runtime.BlockText:
			if b.To > len(resp.Text) {
				continue
			}
			text = b.To
		case runtime.BlockToolCall:
			k, _ := slices.BinarySearch(indexes, b.Index)
			if k >= len(calls) || calls[k] {
				continue
			}
			calls[k] = true
			b.Index = k
		}
		out = append(out, b)
	}
	var head []runtime.OrderedBlock
	for i, done := range thinking {
		if !done {
			head = append(head, runtime.OrderedBlock{Kind: runtime.BlockThinking, Index: i})
		}
	}
	out = append(head, out...)
	if text < len(resp.Text) || resp.Text == "" && len(resp.ToolCalls) == 0 {
		out = append(out, runtime.OrderedBlock{Kind: runtime.BlockText, From: text, To: len(resp.Text)})
	}
	for k, done := range calls {
		if !done {
			out = append(out, runtime.OrderedBlock{Kind: runtime.BlockToolCall, Index: k})
		}
	}
	return out
}

// completeAnthropic answers a message object, its blocks in the order the
// model sent them.
func completeAnthropic(x *exchange, p *chatParams, resp *runtime.ChatResponse) {
	b := make([]byte, 0, 256+len(resp.Text))
	b = append(b, `{"id":`...)
	b = wire.AppendString(b, responseID("msg_"))
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = wire.AppendString(b, servedName(resp, p))
	b = append(b, `,"content":[`...)
	for n, bl := range blocksOf(&p.blocks, resp) {
		if n > 0 {
			b = append(b, ',')
		}
		switch bl.Kind {
		case runtime.BlockThinking:
			b = appendThinkingBlock(b, &resp.Thinking[bl.Index])
		case runtime.BlockText:
			b = append(b, `{"type":"text","text":`...)
			b = wire.AppendString(b, resp.Text[bl.From:bl.To])
			b = append(b, '}')
		case runtime.BlockToolCall:
			tc := &resp.ToolCalls[bl.Index]
			b = append(b, `{"type":"tool_use","id":`...)
			b = wire.AppendString(b, tc.ID)
			b = append(b, `,"name":`...)
			b = wire.AppendString(b, tc.Name)
			b = append(b, `,"input":`...)
			b = appendToolInput(b, tc.Arguments)
			b = append(b, '}')
		}
	}
	b = append(b, `],"stop_reason":`...)
	b = wire.AppendString(b, stopReason(resp.FinishReason, resp.StopSequence, len(resp.ToolCalls) > 0))
	b = appendStopSequence(b, resp.FinishReason, resp.StopSequence, p.req.Stop)
	b = append(b, `,"usage":`...)
	b = appendAnthropicUsage(b, resp.Usage)
	b = append(b, "}\n"...)
	writeRaw(x, http.StatusOK, b)
}

// appendThinkingBlock appends a thinking or redacted_thinking block, its
// signature or data as the model returned it.
func appendThinkingBlock(b []byte, p *runtime.ContentPart) []byte {
	if p.Type == runtime.PartRedactedThinking {
		b = append(b, `{"type":"redacted_thinking","data":`...)
		b = wire.AppendString(b, p.Signature)
		return append(b, '}')
	}
	b = append(b, `{"type":"thinking","thinking":`...)
	b = wire.AppendString(b, p.Text)
	b = append(b, `,"signature":`...)
	b = wire.AppendString(b, p.Signature)
	return append(b, '}')
}

// appendToolInput appends a tool call's arguments as the input object;
// arguments that are not a JSON object (a model's broken output) become
// an empty one.
func appendToolInput(b []byte, args json.RawMessage) []byte {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return append(b, "{}"...)
	}
	var c bytes.Buffer
	if json.Compact(&c, t) != nil {
		return append(b, "{}"...)
	}
	return append(b, c.Bytes()...)
}

// anthropicStream writes the Messages stream: message_start, one
// content_block_start/delta/stop sequence per thinking, redacted_thinking,
// text or tool_use block,
// message_delta (stop reason and usage) and message_stop.
type anthropicStream struct {
	sse
	p      *chatParams
	served *servedSlot
	id     string
	msg    bool // message_start sent
	open   int  // the open block's index, -1 for none
	text   bool // the open block is a text block
	// refusal: the open text block holds a refusal's text.
	refusal bool
	blocks  int // blocks begun
	tools   blocks
	// thinks maps a thinking block's index (runtime.ThinkingDelta.Index)
	// to its block's index.
	thinks  blocks
	inputIn runtime.Usage // the input usage sent in message_start
}

func newAnthropicStream(x *exchange, p *chatParams, served *servedSlot) chatStream {
	return &anthropicStream{sse: newSSE(x, served), p: p, served: served, id: responseID("msg_"), open: -1}
}

func (s *anthropicStream) event(name string) {
	s.buf = append(s.buf, "event: "...)
	s.buf = append(s.buf, name...)
	s.buf = append(s.buf, "\ndata: "...)
}

func (s *anthropicStream) start(model string, u runtime.Usage) {
	s.msg = true
	s.inputIn = runtime.Usage{InputTokens: u.InputTokens, CachedInputTokens: u.CachedInputTokens,
		CacheWriteInputTokens: u.CacheWriteInputTokens, CacheWrite1hInputTokens: u.CacheWrite1hInputTokens}
	s.event("message_start")
	b := append(s.buf, `{"type":"message_start","message":{"id":`...)
	b = wire.AppendString(b, s.id)
	b = append(b, `,"type":"message","role":"assistant","content":[],"model":`...)
	b = wire.AppendString(b, model)
	b = append(b, `,"stop_reason":null,"stop_sequence":null,"usage":`...)
	b = appendAnthropicUsage(b, s.inputIn)
	s.buf = append(b, "}}\n\n"...)
}

func (s *anthropicStream) stopBlock() {
	if s.open < 0 {
		return
	}
	s.event("content_block_stop")
	b := append(s.buf, `{"type":"content_block_stop","index":`...)
	b = appendInt(b, int64(s.open))
	s.buf = append(b, "}\n\n"...)
	s.open = -1
}

func (s *anthropicStream) delta(d runtime.Delta) bool {
	if d.Text == "" && len(d.ToolCalls) == 0 && d.Thinking == nil {
		return !s.gone // a finish reason or usage alone: sent at the end
	}
	if !s.msg {
		s.start(s.served.get(s.p.req.Model), d.Usage)
	}
	if d.Thinking != nil {
		s.thinking(d.Thinking)
	}
	if d.Text != "" {
		// A refusal's text (Anthropic's explanation, after the answer it
		// cut) is a text block of its own, not the answer's continuation.
		if s.open < 0 || !s.text || s.refusal != d.Refusal {
			s.stopBlock()
			s.open, s.text, s.refusal = s.blocks, true, d.Refusal
			s.blocks++
			s.event("content_block_start")
			b := append(s.buf, `{"type":"content_block_start","index":`...)
			b = appendInt(b, int64(s.open))
			s.buf = append(b, `,"content_block":{"type":"text","text":""}}`+"\n\n"...)
		}
		s.blockDelta(s.open, "text_delta", "text", d.Text)
	}
	for _, tc := range d.ToolCalls {
		block, begun := s.begin(&s.tools, tc.Index)
		if begun {
			b := append(s.buf, `,"content_block":{"type":"tool_use","id":`...)
			b = wire.AppendString(b, tc.ID)
			b = append(b, `,"name":`...)
			b = wire.AppendString(b, tc.Name)
			s.buf = append(b, `,"input":{}}}`+"\n\n"...)
		}
		// A fragment of a call whose block was closed (calls streamed
		// interleaved) still goes to that block, by its index.
		if tc.Arguments != "" {
			s.blockDelta(block, "input_json_delta", "partial_json", tc.Arguments)
		}
	}
	return s.send(d.More)
}

// thinking writes a thinking fragment: the start of its block, when it is
// the first, then its text and its signature, each a delta of their own
// (a redacted_thinking block comes whole in its start).
func (s *anthropicStream) thinking(t *runtime.ThinkingDelta) {
	block, begun := s.begin(&s.thinks, t.Index)
	switch {
	case begun && t.Redacted:
		b := append(s.buf, `,"content_block":{"type":"redacted_thinking","data":`...)
		b = wire.AppendString(b, t.Signature)
		s.buf = append(b, "}}\n\n"...)
		return
	case begun:
		s.buf = append(s.buf, `,"content_block":{"type":"thinking","thinking":"","signature":""}}`+"\n\n"...)
	case t.Redacted:
		return
	}
	if t.Text != "" {
		s.blockDelta(block, "thinking_delta", "thinking", t.Text)
	}
	if t.Signature != "" {
		s.blockDelta(block, "signature_delta", "signature", t.Signature)
	}
}

// begin returns the block of the index-th entry of m (a tool call, a
// thinking block), and whether it begins now: it then closes the open
// block, becomes the open one, and its content_block_start event is
// written up to its index (the caller appends the content block).
func (s *anthropicStream) begin(m *blocks, index int) (int, bool) {
	if block, ok := m.find(index); ok {
		return block, false
	}
	s.stopBlock()
	block := s.blocks
	s.open, s.text = block, false
	s.blocks++
	m.add(index, block)
	s.event("content_block_start")
	b := append(s.buf, `{"type":"content_block_start","index":`...)
	s.buf = appendInt(b, int64(block))
	return block, true
}

// blockDelta writes a content_block_delta event to block: a delta of type
// kind whose field holds value.
func (s *anthropicStream) blockDelta(block int, kind, field, value string) {
	s.event("content_block_delta")
	b := append(s.buf, `{"type":"content_block_delta","index":`...)
	b = appendInt(b, int64(block))
	b = append(b, `,"delta":{"type":"`...)
	b = append(b, kind...)
	b = append(b, `","`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = wire.AppendString(b, value)
	s.buf = append(b, "}}\n\n"...)
}

func (s *anthropicStream) end(resp *runtime.ChatResponse) {
	if !s.msg {
		s.start(servedName(resp, s.p), resp.Usage)
	}
	s.stopBlock()
	s.event("message_delta")
	b := append(s.buf, `{"type":"message_delta","delta":{"stop_reason":`...)
	b = wire.AppendString(b, stopReason(resp.FinishReason, resp.StopSequence, s.tools.any()))
	b = appendStopSequence(b, resp.FinishReason, resp.StopSequence, s.p.req.Stop)
	b = append(b, `},"usage":`...)
	b = appendAnthropicUsage(b, resp.Usage)
	b = append(b, "}\n\n"...)
	s.buf = b
	s.event("message_stop")
	s.buf = append(s.buf, `{"type":"message_stop"}`+"\n\n"...)
	s.flush()
}

// fail sends an error event, as the API does when a stream fails.
func (s *anthropicStream) fail(err error) {
	status, _ := StatusOf(err)
	body, _ := json.Marshal(callError(apiAnthropic, status, err).body(apiAnthropic))
	s.event("error")
	s.buf = append(s.buf, body...)
	s.buf = append(s.buf, "\n\n"...)
	s.flush()
}
