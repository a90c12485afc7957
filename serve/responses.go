package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
)

// responsesChat is POST /v1/responses: OpenAI's Responses wire format,
// stateless. The gateway keeps no responses: a request carries its whole
// conversation in input (previous_response_id, conversation and
// item_reference are refused), and a response says store false.
var responsesChat = chatAPI{decode: decodeResponses, complete: completeResponses, stream: newResponsesStream,
	requestIDHeader: "X-Request-Id", ordered: true, wire: "openai", param: rsParam}

// storedResponseRoutes are the Responses API's routes of a stored
// response, which the gateway, keeping none, answers with a 404 saying so.
var storedResponseRoutes = []string{"GET /v1/responses/{id}", "DELETE /v1/responses/{id}",
	"GET /v1/responses/{id}/input_items", "POST /v1/responses/{id}/cancel"}

func storedResponse(x *exchange) {
	x.fail(http.StatusNotFound, errNotFound, fmt.Sprintf("response %q: the gateway keeps no responses (each is answered with store false and forgotten), so none can be retrieved, listed, deleted or cancelled", x.r.PathValue("id")))
}

// rsParams is what a Responses request holds beyond the call model: the
// fields its response object repeats.
type rsParams struct {
	instructions *string
	metadata     map[string]string
	user         string
	// from holds, for each message of the request, what of the client's
	// request it was made of (rsParam maps an upstream's param with it).
	from []rsOrigin
	// kept are the user's messages of a compaction's input, which its
	// answer repeats (decodeCompact).
	kept []json.RawMessage
}

// rsOrigin is what a message of a Responses request was made of: the
// instructions, the input string, one input item (item, output when a
// function or custom tool call's output), or several items (merged).
type rsOrigin struct {
	item                       int
	instructions, text, merged bool
	output                     bool
}

// The request body of the Responses API: the fields the gateway maps.
// Any other field, at any depth, is refused by checkFields unless it is at
// its default.
type rsRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              []rsTool          `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Stream             bool              `json:"stream"`
	StreamOptions      json.RawMessage   `json:"stream_options"`
	Metadata           map[string]string `json:"metadata"`
	User               string            `json:"user"`
	SafetyIdentifier   string            `json:"safety_identifier"`
	PromptCacheKey     string            `json:"prompt_cache_key"`
	Store              *bool             `json:"store"`
	PreviousResponseID string            `json:"previous_response_id"`
	Include            []string          `json:"include"`
	Truncation         string            `json:"truncation"`
	// ClientMetadata is the client's own description of itself (Codex
	// sends its installation's id): it stays at the gateway.
	ClientMetadata map[string]string `json:"client_metadata"`
	Text           *struct {
		Verbosity string `json:"verbosity"`
		Format    *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"format"`
	} `json:"text"`
	Reasoning *struct {
		Effort          string `json:"effort"`
		Summary         string `json:"summary"`
		GenerateSummary string `json:"generate_summary"`
	} `json:"reasoning"`
}

// rsItem is an item of input: a message (type "message" or none), a
// function_call, a function_call_output or a reasoning item.
type rsItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	// Input is a custom_tool_call's text.
	Input string `json:"input"`
	// EncryptedContent is a reasoning item's: the signature of the
	// thinking block it holds (rsRedacted marks a redacted one's data).
	EncryptedContent string `json:"encrypted_content"`
}

// rsPart is a content part of a message, of a function_call_output's
// output, or of a reasoning item's content.
type rsPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	Detail   string `json:"detail"`
}

type rsTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	// Format is a custom tool's input format.
	Format *struct {
		Type       string `json:"type"`
		Syntax     string `json:"syntax"`
		Definition string `json:"definition"`
	} `json:"format"`
}

// rsRedacted opens the encrypted_content of a reasoning item that holds a
// redacted thinking block (its data follows); any other encrypted_content
// is a thinking block's signature.
const rsRedacted = "redacted_thinking:"

// The Responses request.
var responsesShape = func() *shape {
	part := &shape{fields: fields("type"), by: "type", variants: []variant{
		{"input_text", fields("text")},
		// An earlier answer's annotations and logprobs describe it; the
		// model reads its text alone.
		{"output_text", fields("text", "annotations", "logprobs")},
		{"refusal", fields("refusal")},
		{"input_image", fields("image_url", "detail")},
	}}
	// An item's id and status describe it as the API returned it.
	common := []field{{"type", nil}, {"id", nil}, {"status", nil}}
	// A message's phase (commentary, final_answer) describes an earlier
	// answer, as its id and status do.
	message := append(fields("role", "phase"), field{"content", part})
	item := &shape{fields: common, by: "type", variants: []variant{
		{"", message}, {"message", message},
		{"function_call", fields("call_id", "name", "arguments")},
		{"function_call_output", []field{{"call_id", nil}, {"output", part}}},
		{"custom_tool_call", fields("call_id", "name", "input")},
		{"custom_tool_call_output", []field{{"call_id", nil}, {"output", part}}},
		{"reasoning", []field{{"summary", obj("type", "text")}, {"content", obj("type", "text")}, {"encrypted_content", nil}}},
	}}
	tool := &shape{fields: fields("type"), by: "type", variants: []variant{
		{"function", fields("name", "description", "parameters", "strict")},
		{"custom", []field{{"name", nil}, {"description", nil}, {"format", obj("type", "syntax", "definition")}}},
	}}
	return &shape{fields: []field{{"model", nil}, {"input", item}, {"instructions", nil}, {"tools", tool},
		{"tool_choice", obj("type", "name")}, {"max_output_tokens", nil}, {"temperature", nil}, {"top_p", nil},
		{"parallel_tool_calls", nil}, {"stream", nil},
		// include_obfuscation pads the events against a side channel; the
		// gateway sends none, which either value allows.
		{"stream_options", obj("include_obfuscation")},
		{"metadata", nil}, {"user", nil}, {"safety_identifier", nil}, {"prompt_cache_key", nil},
		{"store", nil}, {"previous_response_id", nil}, {"include", nil}, {"truncation", nil}, {"client_metadata", nil},
		{"text", &shape{fields: []field{{"verbosity", nil}, {"format", obj("type", "name", "schema", "strict")}}}},
		{"reasoning", obj("effort", "summary", "generate_summary")}}}
}()

// builtinTools are the Responses API's tools that run at the provider (or
// at the client, for computer use, on the provider's actions), outside the
// policy's tool chain.
var builtinTools = []string{"web_search", "web_search_preview", "file_search", "computer", "computer_use_preview",
	"code_interpreter", "image_generation", "mcp", "shell", "apply_patch", "tool_search"}

// decodeResponses maps a Responses request onto the call model.
func decodeResponses(body []byte, p *chatParams) error {
	var in rsRequest
	if err := unmarshal(body, &in); err != nil {
		return err
	}
	// The fields first, as decodeOpenAI.
	if err := checkFields(body, responsesShape); err != nil {
		return err
	}
	if in.Model == "" {
		return errors.New("model: required")
	}
	if in.PreviousResponseID != "" {
		return errors.New("previous_response_id: the gateway keeps no responses; send the whole conversation in input (the earlier input items, then the output items of each response)")
	}
	if in.Store != nil && *in.Store {
		return errors.New("store: true is not served: the gateway keeps no responses; send store false, or leave it out (a response says store false)")
	}
	req := &p.req
	req.Model = in.Model
	rs := &rsParams{instructions: in.Instructions, metadata: in.Metadata, user: in.User}
	p.rs = rs
	req.Messages = make([]runtime.Message, 0, p.items.messages+1)
	if in.Instructions != nil && *in.Instructions != "" {
		req.Messages = append(req.Messages, runtime.Message{Role: "system", Content: *in.Instructions})
		rs.from = append(rs.from, rsOrigin{instructions: true})
	}
	var err error
	if req.Messages, rs.from, err = responsesInput(in.Input, req.Messages, rs.from); err != nil {
		return err
	}
	if err := outputBound("max_output_tokens", in.MaxOutputTokens); err != nil {
		return err
	}
	if in.MaxOutputTokens != nil {
		req.MaxTokens = *in.MaxOutputTokens
	}
	// The client offers the tools: none offered is none, not the policy's.
	req.Tools = make([]runtime.ToolDef, 0, len(in.Tools))
	for i, t := range in.Tools {
		if t.Type != "function" && t.Type != "custom" {
			return fmt.Errorf("tools[%d].type: %w", i, toolRefused(t.Type))
		}
		if t.Name == "" {
			return fmt.Errorf("tools[%d].name: required", i)
		}
		if t.Type == "custom" {
			var f struct{ typ, syntax, definition string }
			if t.Format != nil {
				f.typ, f.syntax, f.definition = t.Format.Type, t.Format.Syntax, t.Format.Definition
			}
			at := fmt.Sprintf("tools[%d].format", i)
			c, err := customFormat(at, at, f.typ, f.syntax, f.definition)
			if err != nil {
				return err
			}
			req.Tools = append(req.Tools, runtime.ToolDef{Name: t.Name, Description: t.Description, Custom: c})
			continue
		}
		// The API's default is strict.
		strict := t.Strict == nil || *t.Strict
		req.Tools = append(req.Tools, runtime.ToolDef{Name: t.Name, Description: t.Description, Parameters: nullIsEmpty(t.Parameters), Strict: strict})
	}
	if req.ToolChoice, err = responsesToolChoice(in.ToolChoice, req.Tools); err != nil {
		return err
	}
	req.ParallelToolCalls, req.Temperature, req.TopP = in.ParallelToolCalls, in.Temperature, in.TopP
	req.SafetyIdentifier, req.PromptCacheKey = in.SafetyIdentifier, in.PromptCacheKey
	if r := in.Reasoning; r != nil {
		switch r.Effort {
		case "", "none", "minimal", "low", "medium", "high", "xhigh":
			req.ReasoningEffort = r.Effort
		default:
			return fmt.Errorf(`reasoning.effort: want "none", "minimal", "low", "medium", "high" or "xhigh", got %q`, r.Effort)
		}
		for _, s := range [...]struct{ field, v string }{{"reasoning.summary", r.Summary}, {"reasoning.generate_summary", r.GenerateSummary}} {
			switch s.v {
			case "", "auto", "concise", "detailed":
				// A summary of the model's reasoning, beside the answer,
				// which it leaves as it is: the gateway returns none (the
				// Chat Completions API has none to return).
			default:
				return fmt.Errorf(`%s: want "auto", "concise" or "detailed", got %q`, s.field, s.v)
			}
		}
	}
	if t := in.Text; t != nil {
		switch t.Verbosity {
		case "", "low", "medium", "high":
			// To an OpenAI model as its verbosity; a Claude model fails
			// the call, as the answer's length is the client's to set.
			req.Verbosity = t.Verbosity
		default:
			return fmt.Errorf(`text.verbosity: want "low", "medium" or "high", got %q`, t.Verbosity)
		}
	}
	if t := in.Text; t != nil && t.Format != nil {
		f := t.Format
		switch f.Type {
		case runtime.FormatText, runtime.FormatJSONObject:
			req.ResponseFormat = &runtime.ResponseFormat{Type: f.Type}
		case runtime.FormatJSONSchema:
			if f.Name == "" || nullIsEmpty(f.Schema) == nil {
				return errors.New("text.format: type json_schema needs a name and a schema")
			}
			req.ResponseFormat = &runtime.ResponseFormat{Type: f.Type, Name: f.Name, Schema: f.Schema, Strict: f.Strict}
		default:
			return fmt.Errorf(`text.format.type: want "text", "json_object" or "json_schema", got %q`, f.Type)
		}
	}
	for i, inc := range in.Include {
		if inc != "reasoning.encrypted_content" {
			// The others ask for logprobs, or for what built-in tools
			// return, which the gateway does not serve.
			return fmt.Errorf(`include[%d]: %q is not served; the gateway serves "reasoning.encrypted_content" alone (and returns it whether asked or not)`, i, inc)
		}
	}
	switch in.Truncation {
	case "", "disabled":
	case "auto":
		return errors.New(`truncation: "auto" is not served: the gateway does not drop input items to fit the model's context; send "disabled", or leave it out`)
	default:
		return fmt.Errorf(`truncation: want "auto" or "disabled", got %q`, in.Truncation)
	}
	if err := endUser(req, in.Metadata, in.User); err != nil {
		return err
	}
	if len(nullIsEmpty(in.StreamOptions)) > 0 && !in.Stream {
		return errors.New("stream_options: only allowed when stream is true")
	}
	p.stream = in.Stream
	return nil
}

// endUser sets req's metadata, and the end user's id as its user_id: the
// Anthropic client forwards it as metadata.user_id, the OpenAI client as
// user. A user_id of the client's own metadata, which stays at the
// gateway, would reach the provider as the end user's id: it is refused.
func endUser(req *runtime.ChatRequest, metadata map[string]string, user string) error {
	if id, ok := metadata["user_id"]; ok && id != user {
		return errors.New("metadata.user_id: the gateway would send it to the model's provider as the end user's id, and metadata stays at the gateway; send the end user's id as user, or name the key otherwise")
	}
	req.Metadata = metadata
	if user != "" {
		req.Metadata = maps.Clone(req.Metadata)
		if req.Metadata == nil {
			req.Metadata = map[string]string{}
		}
		req.Metadata["user_id"] = user
	}
	return nil
}

// toolRefused is the error of a tool (or tool choice) of type typ that is
// not a function.
func toolRefused(typ string) error {
	switch typ {
	case "local_shell":
		// A tool the client runs, but one of the provider's making: its
		// calls are local_shell_call items with the provider's own action
		// schema, which no function the client declared describes.
		return errors.New(`"local_shell" is not served: its calls are the provider's local_shell_call items, not function calls the policy's tool chain checks; offer the shell as a function tool (Codex does for its current models)`)
	}
	for _, b := range builtinTools {
		if typ == b {
			return fmt.Errorf("%q is a built-in tool, which runs outside the policy's tool chain: only function and custom tools are served", typ)
		}
	}
	return fmt.Errorf("only function and custom tools are served, got %q", typ)
}

// responsesToolChoice maps tool_choice: a mode, or a function to call.
func responsesToolChoice(raw json.RawMessage, tools []runtime.ToolDef) (string, error) {
	if nullIsEmpty(raw) == nil {
		return "", nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch mode {
		case "auto", "none", "required":
			return mode, nil
		}
		return "", fmt.Errorf(`tool_choice: want "auto", "none", "required" or {"type": "function", "name": ...}, got %q`, mode)
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", errors.New(`tool_choice: want "auto", "none", "required" or {"type": "function", "name": ...}`)
	}
	if named.Type != "function" && named.Type != "custom" {
		return "", fmt.Errorf("tool_choice.type: %w", toolRefused(named.Type))
	}
	if named.Name == "" {
		return "", fmt.Errorf("tool_choice.name: required for type %s", named.Type)
	}
	if err := forcedTool("tool_choice.name", named.Name); err != nil {
		return "", err
	}
	if err := forcedOffered("tool_choice.name", named.Name, tools); err != nil {
		return "", err
	}
	if err := choiceKind("tool_choice.type", named.Type, tools, named.Name); err != nil {
		return "", err
	}
	return named.Name, nil
}

// responsesInput appends the messages of input (a string, the user's
// message, or a list of items) to msgs. The items of one assistant turn
// (its reasoning, its messages, its function calls, in their order) are
// one assistant message. It appends to from what each message was made
// of.
func responsesInput(raw json.RawMessage, msgs []runtime.Message, from []rsOrigin) ([]runtime.Message, []rsOrigin, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, errors.New("input: required (a string, or a list of items)")
	}
	if raw[0] == '"' {
		s, err := jsonString(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("input: %v", err)
		}
		return append(msgs, runtime.Message{Role: "user", Content: s}), append(from, rsOrigin{text: true}), nil
	}
	items := make([]rsItem, 0, arrayLen(raw))
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, nil, errors.New("input: want a string or a list of items")
	}
	if len(items) == 0 {
		return nil, nil, errors.New("input: an empty list; want at least one item")
	}
	// turn is the index of the assistant message the items of the current
	// assistant turn go into; -1 when none is open.
	turn, at := -1, 0
	assistant := func() *runtime.Message {
		if turn < 0 {
			msgs = append(msgs, runtime.Message{Role: "assistant"})
			from = append(from, rsOrigin{item: at})
			turn = len(msgs) - 1
		} else {
			from[turn].merged = true
		}
		return &msgs[turn]
	}
	for i := range items {
		it := &items[i]
		at = i
		var err error
		switch typ := it.Type; {
		case typ == "message" || typ == "" && it.Role != "":
			if it.Role == "assistant" {
				err = rsContent(assistant(), it.Content)
				break
			}
			turn = -1
			var m runtime.Message
			switch it.Role {
			case "system", "developer":
				m.Role = "system"
			case "user":
				m.Role = "user"
			default:
				return nil, nil, fmt.Errorf(`input[%d].role: want "user", "assistant", "system" or "developer", got %q`, i, it.Role)
			}
			if err = rsContent(&m, it.Content); err == nil {
				msgs = append(msgs, m)
				from = append(from, rsOrigin{item: i})
			}
		case typ == "function_call":
			err = rsCall(assistant(), it)
		case typ == "custom_tool_call":
			var call runtime.ToolUse
			if call, err = customCall(it.CallID, it.Name, it.Input); err == nil {
				call.PartsAfter = len(assistant().Parts)
				msgs[turn].ToolCalls = append(msgs[turn].ToolCalls, call)
			}
		case typ == "function_call_output" || typ == "custom_tool_call_output":
			turn = -1
			var m runtime.Message
			m, err = rsCallOutput(it)
			msgs = append(msgs, m)
			from = append(from, rsOrigin{item: i, output: true})
		case typ == "reasoning":
			err = rsReasoning(assistant(), it)
		case typ == "item_reference":
			return nil, nil, fmt.Errorf("input[%d]: an item_reference is not served: the gateway keeps no items; send the item itself", i)
		case typ == "":
			return nil, nil, fmt.Errorf("input[%d]: want a message (with a role) or an item with a type", i)
		default:
			return nil, nil, fmt.Errorf(`input[%d].type: want "message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output" or "reasoning", got %q (the items of built-in tools are not served: those tools run outside the policy)`, i, typ)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("input[%d]%w", i, err)
		}
	}
	for k := range msgs {
		m := &msgs[k]
		// Each tool call's place: the number of parts after it.
		for c := range m.ToolCalls {
			m.ToolCalls[c].PartsAfter = len(m.Parts) - m.ToolCalls[c].PartsAfter
		}
		if len(m.Parts) == 1 && m.Parts[0].Type == runtime.PartText && len(m.ToolCalls) == 0 {
			m.Content, m.Parts = m.Parts[0].Text, nil
		}
	}
	return msgs, from, nil
}

// rsFields maps the fields of a Chat Completions request the gateway sends
// an OpenAI model to those of the Responses request they came from, for
// the fields that map one to one (rsParam).
var rsFields = map[string]string{
	"max_completion_tokens": "max_output_tokens", "max_tokens": "max_output_tokens",
	"temperature": "temperature", "top_p": "top_p", "tool_choice": "tool_choice",
	"parallel_tool_calls": "parallel_tool_calls", "user": "user", "safety_identifier": "safety_identifier",
	"prompt_cache_key": "prompt_cache_key", "reasoning_effort": "reasoning.effort", "verbosity": "text.verbosity",
}

// rsParamPath matches the paths of rsParam: a message's (messages[i]...)
// and a tool's (tools[i] and its function's name, description,
// parameters and strict).
var rsParamPath = regexp.MustCompile(`^(messages|tools)\[(\d+)\](?:\.function\.(name|description|parameters|strict)$)?(.*)$`)

// rsParam returns the field of the Responses request p that an OpenAI
// model's param names in the Chat Completions request the gateway sent:
// a field the two share or rename (rsFields), a tool's, a message's made
// of one input item (input[i], input[i].content of a message, input[i].output
// of a call's output) or of the instructions; else "", a null param: a
// message made of several items (an assistant turn and its calls), a
// field of the other API alone (stream_options, response_format), a
// message beyond the client's, any message when the chat chain may have
// changed them (sent false).
func rsParam(p *chatParams, sent bool, param string) string {
	if f, ok := rsFields[param]; ok {
		return f
	}
	if param == "messages" && sent {
		return "input"
	}
	m := rsParamPath.FindStringSubmatch(param)
	if m == nil || p.rs == nil {
		return ""
	}
	i, err := strconv.Atoi(m[2])
	if err != nil {
		return ""
	}
	if m[1] == "tools" {
		switch {
		case i >= len(p.req.Tools) || p.req.Tools[i].Custom != nil:
			return ""
		case m[3] != "":
			return fmt.Sprintf("tools[%d].%s", i, m[3])
		case m[4] == "":
			return fmt.Sprintf("tools[%d]", i)
		}
		return ""
	}
	if i >= len(p.rs.from) || !sent {
		return ""
	}
	o, rest := p.rs.from[i], m[4]
	switch {
	case o.merged:
		return ""
	case o.instructions:
		return "instructions"
	case o.text:
		return "input"
	case rest == "":
		return fmt.Sprintf("input[%d]", o.item)
	case strings.HasPrefix(rest, ".content") && o.output:
		return fmt.Sprintf("input[%d].output", o.item)
	case strings.HasPrefix(rest, ".content"):
		return fmt.Sprintf("input[%d].content", o.item)
	case rest == ".role" && !o.output:
		return fmt.Sprintf("input[%d].role", o.item)
	}
	return fmt.Sprintf("input[%d]", o.item)
}

// rsContent appends a message's content (a string, or a list of parts,
// each text part a part of its own) to m's parts. The errors
// begin with the field's path (".content...").
func rsContent(m *runtime.Message, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return errors.New(".content: required")
	}
	if raw[0] == '"' {
		s, err := jsonString(raw)
		if err != nil {
			return fmt.Errorf(".content: %v", err)
		}
		m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartText, Text: s})
		return nil
	}
	parts := make([]rsPart, 0, arrayLen(raw))
	if err := json.Unmarshal(raw, &parts); err != nil {
		return errors.New(".content: want a string or a list of content parts")
	}
	if len(parts) == 0 {
		return errors.New(".content: an empty list; want a string or at least one content part")
	}
	// Adjacent text parts stay parts, as on the Chat Completions route.
	text := func(t string) { m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartText, Text: t}) }
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text":
			text(p.Text)
		case "refusal":
			if m.Role != "assistant" {
				return fmt.Errorf(".content[%d]: a refusal part belongs in an assistant message, not a %s message", j, m.Role)
			}
			text(p.Refusal)
		case "input_image":
			if m.Role != "user" {
				return fmt.Errorf(".content[%d]: an input_image part belongs in a user message, not a %s message", j, m.Role)
			}
			if p.FileID != "" || p.ImageURL == "" {
				return fmt.Errorf(".content[%d].image_url: required (a URL or a data URL; the gateway keeps no files, so file_id is not served)", j)
			}
			switch p.Detail {
			case "", "auto", "low", "high":
			default:
				return fmt.Errorf(`.content[%d].detail: want "auto", "low" or "high", got %q`, j, p.Detail)
			}
			m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartImage, ImageURL: p.ImageURL, Detail: p.Detail})
		default:
			return fmt.Errorf(`.content[%d].type: want "input_text", "output_text", "refusal" or "input_image", got %q`, j, p.Type)
		}
	}
	return nil
}

// rsCall appends a function_call item to the assistant message m.
func rsCall(m *runtime.Message, it *rsItem) error {
	if it.CallID == "" {
		return errors.New(".call_id: required")
	}
	if it.Name == "" {
		return errors.New(".name: required")
	}
	args := json.RawMessage(it.Arguments)
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	} else if !json.Valid(args) {
		return errors.New(".arguments: not valid JSON")
	}
	// PartsAfter holds the parts before the call until responsesInput
	// turns it into those after.
	m.ToolCalls = append(m.ToolCalls, runtime.ToolUse{ID: it.CallID, Name: it.Name, Arguments: args, PartsAfter: len(m.Parts)})
	return nil
}

// rsCallOutput maps a function_call_output item: its output is a string,
// or a list of input_text parts.
func rsCallOutput(it *rsItem) (runtime.Message, error) {
	m := runtime.Message{Role: "tool", ToolCallID: it.CallID}
	if it.CallID == "" {
		return m, errors.New(".call_id: required")
	}
	out := bytes.TrimSpace(it.Output)
	if len(out) == 0 || string(out) == "null" {
		return m, errors.New(".output: required")
	}
	if out[0] == '"' {
		var err error
		if m.Content, err = jsonString(out); err != nil {
			return m, fmt.Errorf(".output: %v", err)
		}
		return m, nil
	}
	var parts []rsPart
	if err := json.Unmarshal(out, &parts); err != nil {
		return m, errors.New(".output: want a string or a list of input_text parts")
	}
	var run textRun
	for j, p := range parts {
		if p.Type != "input_text" {
			// The call models a tool's result as text.
			return m, fmt.Errorf(`.output[%d].type: want "input_text", got %q: a function's output is carried as text`, j, p.Type)
		}
		run.add(p.Text)
	}
	if ps := run.flush(nil); len(ps) > 0 {
		m.Content = ps[0].Text
	}
	return m, nil
}

// rsReasoning appends a reasoning item, as the gateway returned it (a
// thinking block of a Claude model: its text in content, its signature
// in encrypted_content), to the assistant message m.
func rsReasoning(m *runtime.Message, it *rsItem) error {
	if it.EncryptedContent == "" {
		return errors.New(".encrypted_content: required: the gateway keeps no reasoning, and reads back a reasoning item it returned by its encrypted_content")
	}
	if data, ok := strings.CutPrefix(it.EncryptedContent, rsRedacted); ok {
		m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartRedactedThinking, Signature: data})
		return nil
	}
	var text textRun
	if c := nullIsEmpty(it.Content); c != nil {
		var parts []rsPart
		if err := json.Unmarshal(c, &parts); err != nil {
			return errors.New(".content: want a list of reasoning_text parts")
		}
		for j, p := range parts {
			if p.Type != "reasoning_text" {
				return fmt.Errorf(`.content[%d].type: want "reasoning_text", got %q`, j, p.Type)
			}
			text.add(p.Text)
		}
	}
	var t string
	if ps := text.flush(nil); len(ps) > 0 {
		t = ps[0].Text
	}
	m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartThinking, Text: t, Signature: it.EncryptedContent})
	return nil
}
