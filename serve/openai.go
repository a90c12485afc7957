package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// openAIChat is POST /v1/chat/completions: OpenAI's Chat Completions wire
// format.
var openAIChat = chatAPI{decode: decodeOpenAI, complete: completeOpenAI, stream: newOpenAIStream, requestIDHeader: "X-Request-Id", ordered: true, wire: "openai", param: oaParam}

// oaParam maps an upstream's param to the client's field: the client's
// messages go upstream at their own indexes, so a param is the client's
// as it is, unless it names the messages and the chat chain may have
// changed them (sent false), when it is "", a null param.
func oaParam(_ *chatParams, sent bool, param string) string {
	if !sent && (param == "messages" || strings.HasPrefix(param, "messages[") || strings.HasPrefix(param, "messages.")) {
		return ""
	}
	return param
}

// The request body of the Chat Completions API: the fields the gateway
// maps. Any other field, at any depth, is refused by checkFields unless it
// is at its default.
type oaRequest struct {
	Model               string            `json:"model"`
	Messages            []oaMessage       `json:"messages"`
	MaxTokens           *int              `json:"max_tokens"`
	MaxCompletionTokens *int              `json:"max_completion_tokens"`
	Tools               []oaTool          `json:"tools"`
	ToolChoice          json.RawMessage   `json:"tool_choice"`
	Temperature         *float64          `json:"temperature"`
	TopP                *float64          `json:"top_p"`
	Stop                json.RawMessage   `json:"stop"`
	Seed                *int64            `json:"seed"`
	ResponseFormat      *oaResponseFormat `json:"response_format"`
	Stream              bool              `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Metadata          map[string]string `json:"metadata"`
	N                 *int              `json:"n"`
	User              string            `json:"user"`
	SafetyIdentifier  string            `json:"safety_identifier"`
	PromptCacheKey    string            `json:"prompt_cache_key"`
	FrequencyPenalty  *float64          `json:"frequency_penalty"`
	PresencePenalty   *float64          `json:"presence_penalty"`
	LogitBias         map[string]int    `json:"logit_bias"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls"`
	ReasoningEffort   string            `json:"reasoning_effort"`
	Verbosity         string            `json:"verbosity"`
}

type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []oaToolCall    `json:"tool_calls"`
	// Refusal is an assistant message's refusal (the model's, sent back).
	Refusal string `json:"refusal"`
}

type oaPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	File *struct {
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
		Filename string `json:"filename"`
	} `json:"file"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
	// Custom is a custom tool's call (type custom).
	Custom struct {
		Name  string `json:"name"`
		Input string `json:"input"`
	} `json:"custom"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      bool            `json:"strict"`
	} `json:"function"`
	// Custom is a custom tool (type custom).
	Custom struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Format      *struct {
			Type    string `json:"type"`
			Grammar struct {
				Definition string `json:"definition"`
				Syntax     string `json:"syntax"`
			} `json:"grammar"`
		} `json:"format"`
	} `json:"custom"`
}

type oaResponseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict bool            `json:"strict"`
	} `json:"json_schema"`
}

// maxStop is the most stop sequences the Chat Completions API takes.
const maxStop = 4

// decodeOpenAI maps a Chat Completions request onto the call model.
func decodeOpenAI(body []byte, p *chatParams) error {
	// The messages' slice is sized once rather than grown by the decoding
	// (which copies it at each growth).
	in := oaRequest{Messages: make([]oaMessage, 0, p.items.messages)}
	if err := unmarshal(body, &in); err != nil {
		return err
	}
	// The fields first: a misspelt required field (mesages) is named,
	// rather than reported missing.
	if err := checkFields(body, openAIShape); err != nil {
		return err
	}
	if in.Model == "" {
		return errors.New("model: required")
	}
	if len(in.Messages) == 0 {
		return errors.New("messages: at least one message is required")
	}
	if in.N != nil && *in.N != 1 {
		return fmt.Errorf("n: only 1 choice is served, got %d", *in.N)
	}
	req := &p.req
	req.Model = in.Model
	req.Messages = make([]runtime.Message, 0, len(in.Messages))
	for i := range in.Messages {
		m, err := openAIMessage(&in.Messages[i])
		if err != nil {
			return fmt.Errorf("messages[%d]: %w", i, err)
		}
		req.Messages = append(req.Messages, m)
		p.noteDocuments(&m, fmt.Sprintf("messages[%d]", i))
	}
	if err := outputBound("max_tokens", in.MaxTokens); err != nil {
		return err
	}
	if err := outputBound("max_completion_tokens", in.MaxCompletionTokens); err != nil {
		return err
	}
	if a, b := in.MaxTokens, in.MaxCompletionTokens; a != nil && b != nil && *a != *b {
		// One would be served, the other dropped: the client may have
		// meant either.
		return fmt.Errorf("max_tokens (%d) and max_completion_tokens (%d): two different output bounds; send one (max_tokens is the older name of max_completion_tokens)", *a, *b)
	}
	switch {
	case in.MaxCompletionTokens != nil:
		req.MaxTokens = *in.MaxCompletionTokens
	case in.MaxTokens != nil:
		req.MaxTokens = *in.MaxTokens
	}
	// The client offers the tools: none offered is none, not the policy's.
	req.Tools = make([]runtime.ToolDef, 0, len(in.Tools))
	for i, t := range in.Tools {
		if t.Type == "custom" {
			c, err := oaCustomTool(i, &t)
			if err != nil {
				return err
			}
			req.Tools = append(req.Tools, *c)
			continue
		}
		if t.Type != "" && t.Type != "function" {
			return fmt.Errorf(`tools[%d].type: only function and custom tools are served, got %q`, i, t.Type)
		}
		if t.Custom.Name != "" || t.Custom.Format != nil {
			return fmt.Errorf("tools[%d].custom: belongs to a tool of type custom, not function", i)
		}
		if t.Function.Name == "" {
			return fmt.Errorf("tools[%d].function.name: required", i)
		}
		req.Tools = append(req.Tools, runtime.ToolDef{Name: t.Function.Name, Description: t.Function.Description,
			Parameters: nullIsEmpty(t.Function.Parameters), Strict: t.Function.Strict})
	}
	req.ParallelToolCalls = in.ParallelToolCalls
	if len(in.ToolChoice) > 0 && string(in.ToolChoice) != "null" {
		var s string
		if json.Unmarshal(in.ToolChoice, &s) == nil {
			switch s {
			case "auto", "none", "required":
				req.ToolChoice = s
			default:
				return fmt.Errorf(`tool_choice: want "auto", "none", "required" or {"type":"function","function":{"name":...}}, got %q`, s)
			}
		} else {
			var named struct {
				Type             string `json:"type"`
				Function, Custom struct {
					Name string `json:"name"`
				}
			}
			if err := json.Unmarshal(in.ToolChoice, &named); err != nil {
				return errors.New(`tool_choice: want "auto", "none", "required" or {"type":"function","function":{"name":...}}`)
			}
			name, other, otherName := named.Function.Name, "custom", named.Custom.Name
			switch named.Type {
			case "function":
			case "custom":
				name, other, otherName = named.Custom.Name, "function", named.Function.Name
			default:
				return fmt.Errorf(`tool_choice.type: want "function" or "custom", got %q`, named.Type)
			}
			if name == "" {
				return fmt.Errorf(`tool_choice.%s.name: required`, named.Type)
			}
			if otherName != "" {
				// Read as the type says, the other tool would go unforced.
				return fmt.Errorf(`tool_choice.%s: belongs to a tool choice of type %s, not %s`, other, other, named.Type)
			}
			if err := forcedTool(fmt.Sprintf("tool_choice.%s.name", named.Type), name); err != nil {
				return err
			}
			if err := forcedOffered(fmt.Sprintf("tool_choice.%s.name", named.Type), name, req.Tools); err != nil {
				return err
			}
			if err := choiceKind("tool_choice.type", named.Type, req.Tools, name); err != nil {
				return err
			}
			req.ToolChoice = name
		}
	}
	req.Temperature, req.TopP, req.Seed = in.Temperature, in.TopP, in.Seed
	if err := penalties(&in, req); err != nil {
		return err
	}
	// The end user's id for abuse monitoring, as user is, and a prompt
	// cache hint: to an OpenAI model as sent; for a Claude model, the
	// first as its metadata.user_id, the second left out.
	req.SafetyIdentifier, req.PromptCacheKey = in.SafetyIdentifier, in.PromptCacheKey
	switch in.Verbosity {
	case "", "low", "medium", "high":
		// To an OpenAI model as sent; a Claude model fails the call, as
		// the answer's length is the client's to set.
		req.Verbosity = in.Verbosity
	default:
		return fmt.Errorf(`verbosity: want "low", "medium" or "high", got %q`, in.Verbosity)
	}
	switch in.ReasoningEffort {
	case "", "none", "minimal", "low", "medium", "high", "xhigh", "max":
		req.ReasoningEffort = in.ReasoningEffort
	default:
		return fmt.Errorf(`reasoning_effort: want "none", "minimal", "low", "medium", "high", "xhigh" or "max", got %q`, in.ReasoningEffort)
	}
	if len(in.Stop) > 0 && string(in.Stop) != "null" {
		var one string
		if json.Unmarshal(in.Stop, &one) == nil {
			req.Stop = []string{one}
		} else if err := json.Unmarshal(in.Stop, &req.Stop); err != nil {
			return errors.New("stop: want a string or an array of strings")
		}
		if len(req.Stop) > maxStop {
			// The API's bound: its 400, whichever model serves the call.
			return fmt.Errorf("stop: at most %d sequences, got %d", maxStop, len(req.Stop))
		}
	}
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case runtime.FormatText, runtime.FormatJSONObject:
			req.ResponseFormat = &runtime.ResponseFormat{Type: rf.Type}
		case runtime.FormatJSONSchema:
			if rf.JSONSchema == nil {
				return errors.New("response_format.json_schema: required for type json_schema")
			}
			req.ResponseFormat = &runtime.ResponseFormat{Type: rf.Type, Name: rf.JSONSchema.Name, Schema: nullIsEmpty(rf.JSONSchema.Schema), Strict: rf.JSONSchema.Strict}
		default:
			return fmt.Errorf(`response_format.type: want "text", "json_object" or "json_schema", got %q`, rf.Type)
		}
	}
	if err := endUser(req, in.Metadata, in.User); err != nil {
		return err
	}
	if in.StreamOptions != nil && !in.Stream {
		// The API refuses it rather than ignore it (its 400).
		return errors.New("stream_options: only allowed when stream is true")
	}
	p.stream = in.Stream
	p.includeUsage = in.StreamOptions != nil && in.StreamOptions.IncludeUsage
	return nil
}

// penalties checks and maps the frequency and presence penalties (-2 to 2)
// and the logit bias (token ids in digits, biases from -100 to 100), as
// the API bounds them, so that a model of either provider gets the same
// 400. At their neutral values (0, no bias) they ask for nothing.
func penalties(in *oaRequest, req *runtime.ChatRequest) error {
	for _, p := range [...]struct {
		name string
		v    *float64
	}{{"frequency_penalty", in.FrequencyPenalty}, {"presence_penalty", in.PresencePenalty}} {
		if p.v != nil && !(*p.v >= -2 && *p.v <= 2) {
			return fmt.Errorf("%s: from -2 to 2, got %g", p.name, *p.v)
		}
	}
	for token, bias := range in.LogitBias {
		if token == "" || strings.Trim(token, "0123456789") != "" {
			return fmt.Errorf("logit_bias: a key is a token id, in digits, got %q", token)
		}
		if bias < -100 || bias > 100 {
			return fmt.Errorf("logit_bias[%q]: from -100 to 100, got %d", token, bias)
		}
	}
	req.FrequencyPenalty, req.PresencePenalty, req.LogitBias = in.FrequencyPenalty, in.PresencePenalty, in.LogitBias
	return nil
}

// openAIMessage maps one message: its content is a string or an array of
// parts (text, image_url in a user message, refusal), adjacent text parts
// joined by line breaks; its name (the author) is kept, except on a tool
// message, which has none in the API; an assistant message's refusal is its
// text.
func openAIMessage(in *oaMessage) (runtime.Message, error) {
	var m runtime.Message
	switch in.Role {
	case "system", "developer":
		m.Role, m.Name = "system", in.Name
	case "user", "assistant":
		m.Role, m.Name = in.Role, in.Name
	case "tool":
		m.Role = in.Role
	case "":
		return m, errors.New("role: required")
	default:
		return m, fmt.Errorf(`role: want "system", "developer", "user", "assistant" or "tool", got %q`, in.Role)
	}
	if c := bytes.TrimSpace(in.Content); len(c) > 0 && string(c) != "null" {
		if c[0] == '"' {
			s, err := jsonString(c)
			if err != nil {
				return m, fmt.Errorf("content: %v", err)
			}
			m.Content = s
		} else {
			// Sized once, as decodeOpenAI sizes the messages.
			parts := make([]oaPart, 0, arrayLen(c))
			if err := json.Unmarshal(c, &parts); err != nil {
				return m, errors.New("content: want a string or an array of content parts")
			}
			if len(parts) == 0 {
				// The API's schema wants at least one part.
				return m, errors.New("content: an empty array; want a string or at least one content part")
			}
			m.Parts = make([]runtime.ContentPart, 0, len(parts))
			for j, p := range parts {
				switch p.Type {
				case "text", "refusal":
					text := p.Text
					if p.Type == "refusal" {
						if in.Role != "assistant" {
							// The model's refusal, sent back: the API
							// refuses one elsewhere, and it would reach
							// the model as the user's (or a tool's) text.
							return m, fmt.Errorf("content[%d]: a refusal part belongs in an assistant message, not a %s message", j, in.Role)
						}
						text = p.Refusal
					}
					// Adjacent text parts stay parts: the guards read
					// them run together, as a model reads separate
					// blocks (runtime.Message.RunsOn), the detectors so
					// and joined by line breaks (an item cut across two
					// of them is found).
					m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartText, Text: text})
				case "image_url":
					if m.Role != "user" {
						// The API takes images from the user alone; the
						// providers would drop one elsewhere.
						return m, fmt.Errorf("content[%d]: an image_url part belongs in a user message, not a %s message", j, in.Role)
					}
					if p.ImageURL == nil || p.ImageURL.URL == "" {
						return m, fmt.Errorf("content[%d].image_url.url: required", j)
					}
					switch p.ImageURL.Detail {
					case "", "auto", "low", "high":
						// A resolution hint: to an OpenAI model as sent, left
						// out for a Claude model, whose API has none.
					case "original":
						// Read at full size, beyond the resize the gateway's
						// estimate of the image's tokens (a meter's
						// reservation) counts on.
						return m, fmt.Errorf(`content[%d].image_url.detail: "original" is not served (the gateway's estimate of an image's tokens assumes the model's resize); send "auto", "low" or "high"`, j)
					default:
						return m, fmt.Errorf(`content[%d].image_url.detail: want "auto", "low" or "high", got %q`, j, p.ImageURL.Detail)
					}
					m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartImage, ImageURL: p.ImageURL.URL, Detail: p.ImageURL.Detail})
				case "file":
					if m.Role != "user" {
						return m, fmt.Errorf("content[%d]: a file part belongs in a user message, not a %s message", j, in.Role)
					}
					// A file uploaded to OpenAI (file_id) is read where
					// the gateway cannot; the data of a PDF is carried.
					f := p.File
					if f == nil || f.FileData == "" {
						return m, fmt.Errorf("content[%d].file.file_data: required (a file_id names a file stored at OpenAI, which the gateway cannot read or send to another model)", j)
					}
					if !strings.HasPrefix(f.FileData, "data:application/pdf;base64,") {
						return m, fmt.Errorf("content[%d].file.file_data: want a PDF as a data: URL (data:application/pdf;base64,...)", j)
					}
					m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: f.FileData, Filename: f.Filename})
				default:
					return m, fmt.Errorf(`content[%d].type: want "text", "image_url", "file" or "refusal", got %q`, j, p.Type)
				}
			}
			if len(m.Parts) == 1 && m.Parts[0].Type == runtime.PartText {
				m.Content, m.Parts = m.Parts[0].Text, nil
			}
		}
	}
	switch m.Role {
	case "tool":
		if in.ToolCallID == "" {
			return m, errors.New("tool_call_id: required in a tool message")
		}
		m.ToolCallID = in.ToolCallID
	case "assistant":
		// A refusal the model made is what it said: its text.
		switch {
		case in.Refusal == "":
		case m.Content == "" && len(m.Parts) == 0:
			m.Content = in.Refusal
		default:
			m.Parts = append(m.Parts, runtime.ContentPart{Type: runtime.PartText, Text: in.Refusal})
		}
		for j, tc := range in.ToolCalls {
			if custom, function := tc.Custom.Name != "" || tc.Custom.Input != "", tc.Function.Name != "" || tc.Function.Arguments != ""; tc.Type == "custom" && function || tc.Type != "custom" && custom {
				return m, fmt.Errorf("tool_calls[%d]: a call holds the member of its type alone (function for type function, custom for type custom)", j)
			}
			if tc.Type == "custom" {
				call, err := customCall(tc.ID, tc.Custom.Name, tc.Custom.Input)
				if err != nil {
					return m, fmt.Errorf("tool_calls[%d]%w", j, err)
				}
				m.ToolCalls = append(m.ToolCalls, call)
				continue
			}
			if tc.Function.Name == "" {
				return m, fmt.Errorf("tool_calls[%d].function.name: required", j)
			}
			args := json.RawMessage(tc.Function.Arguments)
			if len(bytes.TrimSpace(args)) == 0 {
				args = json.RawMessage("{}")
			} else if !json.Valid(args) {
				return m, fmt.Errorf("tool_calls[%d].function.arguments: not valid JSON", j)
			}
			m.ToolCalls = append(m.ToolCalls, runtime.ToolUse{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
		}
	}
	return m, nil
}

// NoteSystemFingerprint implements runtime.SystemFingerprints: one of a
// provider's form (requestIDForm) is relayed to an OpenAI client.
func (s *servedSlot) NoteSystemFingerprint(fp string) {
	if requestIDForm(fp) {
		s.fingerprint.Store(&fp)
	}
}

// appendFingerprint appends the system_fingerprint member, when the model
// that served the request gave one.
func appendFingerprint(b []byte, s *servedSlot) []byte {
	if s == nil {
		return b
	}
	if fp := s.fingerprint.Load(); fp != nil {
		b = append(b, `,"system_fingerprint":`...)
		b = wire.AppendString(b, *fp)
	}
	return b
}

// completeOpenAI answers a chat.completion object.
func completeOpenAI(x *exchange, p *chatParams, resp *runtime.ChatResponse) {
	b := make([]byte, 0, 256+len(resp.Text))
	b = append(b, `{"id":`...)
	b = wire.AppendString(b, responseID("chatcmpl-"))
	b = append(b, `,"object":"chat.completion","created":`...)
	b = appendInt(b, unixNow())
	b = append(b, `,"model":`...)
	b = wire.AppendString(b, servedName(resp, p))
	b = appendFingerprint(b, p.served)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	content, refusal := refusalSplit(&p.blocks, resp)
	switch {
	case content == "" && (resp.Refusal || len(resp.ToolCalls) > 0):
		b = append(b, "null"...)
	default:
		b = wire.AppendString(b, content)
	}
	b = append(b, `,"refusal":`...)
	if resp.Refusal {
		b = wire.AppendString(b, refusal)
	} else {
		b = append(b, "null"...)
	}
	if len(resp.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i, tc := range resp.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = wire.AppendString(b, tc.ID)
			if tc.Custom {
				b = append(b, `,"type":"custom","custom":{"name":`...)
				b = wire.AppendString(b, tc.Name)
				b = append(b, `,"input":`...)
				b = wire.AppendString(b, customInput(&tc))
				b = append(b, `}}`...)
				continue
			}
			b = append(b, `,"type":"function","function":{"name":`...)
			b = wire.AppendString(b, tc.Name)
			b = append(b, `,"arguments":`...)
			b = wire.AppendString(b, string(tc.Arguments))
			b = append(b, `}}`...)
		}
		b = append(b, ']')
	}
	b = append(b, `},"logprobs":null,"finish_reason":`...)
	b = wire.AppendString(b, openAIFinish(resp.FinishReason, resp.Refusal, len(resp.ToolCalls) > 0))
	b = append(b, `}],"usage":`...)
	b = appendOpenAIUsage(b, resp.Usage)
	b = append(b, "}\n"...)
	writeRaw(x, http.StatusOK, b)
}

// refusalSplit returns the answer's text and its refusal's, as a stream
// sends them (content, then refusal deltas): the runs of text recorded as a
// refusal's are the refusal (an Anthropic model's stop_details explanation
// after the answer it cut), the others the content. A refusal whose order
// was not recorded is the text whole.
func refusalSplit(o *runtime.BlockOrder, resp *runtime.ChatResponse) (content, refusal string) {
	if !resp.Refusal {
		return resp.Text, ""
	}
	var c, r strings.Builder
	recorded := false
	for _, bl := range blocksOf(o, resp) {
		if bl.Kind != runtime.BlockText {
			continue
		}
		if bl.Refusal {
			recorded = true
			r.WriteString(resp.Text[bl.From:bl.To])
		} else {
			c.WriteString(resp.Text[bl.From:bl.To])
		}
	}
	if !recorded {
		return "", resp.Text
	}
	return c.String(), r.String()
}

// openAIFinish maps a finish reason onto the Chat Completions API's: a
// response without one ends as its tool calls or its text imply; a
// refusal (refused: its text went out as the refusal) ends with stop, as
// the API ends one, the refusal field saying what it is; a paused turn
// (runtime.FinishPauseTurn), which the API has no word for, ends with
// length: the answer is cut short, not whole.
func openAIFinish(r string, refused, calls bool) string {
	switch {
	case r == runtime.FinishContentFilter && refused:
		return runtime.FinishStop
	case r == runtime.FinishPauseTurn:
		return runtime.FinishLength
	case r != "":
		// One the gateway has no word for, as the upstream wrote it.
		return relayed(r, maxRelayedField)
	case calls:
		return runtime.FinishToolCalls
	}
	return runtime.FinishStop
}

// servedName is the model a response names: the one that served it, else
// the one requested.
func servedName(resp *runtime.ChatResponse, p *chatParams) string {
	if resp.Model != "" {
		return resp.Model
	}
	return p.req.Model
}

func appendOpenAIUsage(b []byte, u runtime.Usage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, u.InputTokens)
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, u.OutputTokens)
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, u.Total())
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = appendInt(b, u.CachedInputTokens)
	b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
	b = appendInt(b, u.ReasoningTokens)
	return append(b, "}}"...)
}

// openAIStream writes chat.completion.chunk events, then data: [DONE].
type openAIStream struct {
	sse
	p       *chatParams
	served  *servedSlot
	id      string
	created int64
	role    bool // the role has been sent
	refused bool // refusal text has been sent
	// calls records the tool-call indexes begun, to send the call's type
	// with its first fragment.
	calls blocks
}

func newOpenAIStream(x *exchange, p *chatParams, served *servedSlot) chatStream {
	return &openAIStream{sse: newSSE(x, served), p: p, served: served, id: responseID("chatcmpl-"), created: unixNow()}
}

// chunk opens one chunk event up to its delta object.
func (s *openAIStream) chunk(model string) {
	b := append(s.buf, `data: {"id":`...)
	b = wire.AppendString(b, s.id)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = appendInt(b, s.created)
	b = append(b, `,"model":`...)
	b = wire.AppendString(b, model)
	b = appendFingerprint(b, s.served)
	s.buf = append(b, `,"choices":[{"index":0,"delta":{`...)
}

// closeChunk ends the chunk opened by chunk.
func (s *openAIStream) closeChunk(finish string) {
	b := append(s.buf, `},"logprobs":null,"finish_reason":`...)
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = wire.AppendString(b, finish)
	}
	b = append(b, "}]"...)
	if s.p.includeUsage {
		b = append(b, `,"usage":null`...)
	}
	s.buf = append(b, "}\n\n"...)
}

func (s *openAIStream) delta(d runtime.Delta) bool {
	if d.Text == "" && len(d.ToolCalls) == 0 {
		return !s.gone // a finish reason or usage alone: sent at the end
	}
	s.chunk(s.served.get(s.p.req.Model))
	b := s.buf
	sep := false
	if !s.role {
		s.role = true
		b = append(b, `"role":"assistant"`...)
		sep = true
		if d.Text == "" || d.Refusal {
			b = append(b, `,"content":null`...)
		}
	}
	if d.Text != "" {
		if sep {
			b = append(b, ',')
		}
		if d.Refusal {
			s.refused = true
			b = append(b, `"refusal":`...)
		} else {
			b = append(b, `"content":`...)
		}
		b = wire.AppendString(b, d.Text)
		sep = true
	}
	if len(d.ToolCalls) > 0 {
		if sep {
			b = append(b, ',')
		}
		b = append(b, `"tool_calls":[`...)
		for i, tc := range d.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"index":`...)
			b = appendInt(b, int64(tc.Index))
			if tc.ID != "" {
				b = append(b, `,"id":`...)
				b = wire.AppendString(b, tc.ID)
			}
			typ, member, text := "function", "arguments", tc.Arguments
			if tc.Custom {
				// As the API streams a custom tool's call: its text in
				// custom.input.
				typ, member = "custom", "input"
			}
			if !s.begun(tc.Index) {
				b = append(b, `,"type":"`...)
				b = append(b, typ...)
				b = append(b, '"')
			}
			b = append(b, `,"`...)
			b = append(b, typ...)
			b = append(b, `":{`...)
			if tc.Name != "" {
				b = append(b, `"name":`...)
				b = wire.AppendString(b, tc.Name)
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, member...)
			b = append(b, `":`...)
			b = wire.AppendString(b, text)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	s.buf = b
	s.closeChunk("")
	return s.send(d.More)
}

// begun reports whether the tool call at index has begun, noting it.
func (s *openAIStream) begun(index int) bool {
	if _, ok := s.calls.find(index); ok {
		return true
	}
	s.calls.add(index, 0)
	return false
}

func (s *openAIStream) end(resp *runtime.ChatResponse) {
	model := servedName(resp, s.p)
	s.chunk(model)
	if !s.role {
		s.buf = append(s.buf, `"role":"assistant","content":""`...)
	}
	s.closeChunk(openAIFinish(resp.FinishReason, s.refused, s.calls.any()))
	if s.p.includeUsage {
		b := append(s.buf, `data: {"id":`...)
		b = wire.AppendString(b, s.id)
		b = append(b, `,"object":"chat.completion.chunk","created":`...)
		b = appendInt(b, s.created)
		b = append(b, `,"model":`...)
		b = wire.AppendString(b, model)
		b = appendFingerprint(b, s.served)
		b = append(b, `,"choices":[],"usage":`...)
		b = appendOpenAIUsage(b, resp.Usage)
		s.buf = append(b, "}\n\n"...)
	}
	s.buf = append(s.buf, "data: [DONE]\n\n"...)
	s.flush()
}

// fail sends the error as a chunk holding only an error object (what the
// API sends when a stream fails), and no [DONE].
func (s *openAIStream) fail(err error) {
	status, _ := StatusOf(err)
	body, _ := json.Marshal(callError(apiOpenAI, status, err).body(apiOpenAI))
	s.buf = append(s.buf, "data: "...)
	s.buf = append(s.buf, body...)
	s.buf = append(s.buf, "\n\n"...)
	s.flush()
}

// unmarshal decodes a JSON body, naming the position of a syntax error and
// the field of a type error.
func unmarshal(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errors.New("empty body: want a JSON object")
	}
	err := json.Unmarshal(b, v)
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(b, se.Offset)
		return fmt.Errorf("malformed JSON at line %d, column %d (byte %d): %v", line, col, se.Offset, se)
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Errorf("the body must be a JSON object, got JSON %s", te.Value)
		}
		return fmt.Errorf("%s: want %s, got JSON %s (at byte %d)", te.Field, runtime.JSONKind(te.Type), te.Value, te.Offset)
	}
	return fmt.Errorf("malformed JSON: %v", err)
}

// textRun joins the texts of adjacent text parts by line breaks.
type textRun struct {
	first string
	b     strings.Builder
	n     int
}

func (r *textRun) add(s string) {
	switch r.n {
	case 0:
		r.first = s
	case 1:
		r.b.WriteString(r.first)
		fallthrough
	default:
		r.b.WriteByte('\n')
		r.b.WriteString(s)
	}
	r.n++
}

// flush appends the run's text, if any, to parts as a text part, and
// empties the run.
func (r *textRun) flush(parts []runtime.ContentPart) []runtime.ContentPart {
	text := r.first
	switch r.n {
	case 0:
		return parts
	case 1:
	default:
		text = r.b.String()
	}
	*r = textRun{}
	return append(parts, runtime.ContentPart{Type: runtime.PartText, Text: text})
}

// position returns the 1-based line and column of byte offset off.
func position(b []byte, off int64) (line, col int) {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	line, col = 1, 1
	for _, c := range b[:max(off-1, 0)] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// nullIsEmpty returns nil for an absent or null JSON value.
func nullIsEmpty(r json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(r); len(t) == 0 || string(t) == "null" {
		return nil
	}
	return r
}

// writeRaw answers status with the JSON document b.
func writeRaw(x *exchange, status int, b []byte) {
	h := x.Header()
	h.Set("Content-Type", "application/json")
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	x.WriteHeader(status)
	_, _ = x.Write(b)
}

// oaCustomTool maps the custom tool tools[i] of a Chat Completions request.
func oaCustomTool(i int, t *oaTool) (*runtime.ToolDef, error) {
	c := &t.Custom
	if t.Function.Name != "" || t.Function.Parameters != nil {
		return nil, fmt.Errorf("tools[%d].function: belongs to a tool of type function, not custom", i)
	}
	if c.Name == "" {
		return nil, fmt.Errorf("tools[%d].custom.name: required", i)
	}
	var typ, syntax, definition string
	if f := c.Format; f != nil {
		typ, syntax, definition = f.Type, f.Grammar.Syntax, f.Grammar.Definition
	}
	at := fmt.Sprintf("tools[%d].custom.format", i)
	format, err := customFormat(at, at+".grammar", typ, syntax, definition)
	if err != nil {
		return nil, err
	}
	return &runtime.ToolDef{Name: c.Name, Description: c.Description, Custom: format}, nil
}
