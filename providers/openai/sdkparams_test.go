package openai

import (
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentc-dev/agentc/runtime"
)

// The request body in the SDK's parameter types, as the client built it
// before it encoded the body itself: the reference body.Test compares the
// client's body to.

// sdkParams builds the request body in the SDK's types.
func (c *Client) sdkParams(req *runtime.ChatRequest) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(c.cfg.Model),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	msgs, err := sdkMessages(req.Messages)
	if err != nil {
		return p, err
	}
	p.Messages = msgs
	if n := req.MaxTokens; n > 0 || c.cfg.MaxTokens > 0 {
		if n <= 0 {
			n = c.cfg.MaxTokens
		}
		if c.official {
			p.MaxCompletionTokens = openai.Int(int64(n))
		} else {
			p.MaxTokens = openai.Int(int64(n))
		}
	}
	for _, t := range req.Tools {
		if c := t.Custom; c != nil {
			cp := openai.ChatCompletionCustomToolCustomParam{Name: t.Name}
			if t.Description != "" {
				cp.Description = openai.String(t.Description)
			}
			switch c.Format {
			case runtime.CustomText:
				cp.Format.OfText = &openai.ChatCompletionCustomToolCustomFormatTextParam{}
			case runtime.CustomGrammar:
				cp.Format.OfGrammar = &openai.ChatCompletionCustomToolCustomFormatGrammarParam{
					Grammar: openai.ChatCompletionCustomToolCustomFormatGrammarGrammarParam{Definition: c.Definition, Syntax: c.Syntax}}
			}
			p.Tools = append(p.Tools, openai.ChatCompletionCustomTool(cp))
			continue
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fd.Description = openai.String(t.Description)
		}
		if len(t.Parameters) > 0 {
			if err := json.Unmarshal(t.Parameters, &fd.Parameters); err != nil {
				return p, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
			}
		}
		if t.Strict {
			fd.Strict = openai.Bool(true)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	if req.ParallelToolCalls != nil && len(req.Tools) > 0 {
		p.ParallelToolCalls = openai.Bool(*req.ParallelToolCalls)
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String(req.ToolChoice)}
	default:
		p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice})
		for _, t := range req.Tools {
			if t.Name == req.ToolChoice && t.Custom != nil {
				p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfCustomToolChoice: &openai.ChatCompletionNamedToolChoiceCustomParam{
					Custom: openai.ChatCompletionNamedToolChoiceCustomCustomParam{Name: req.ToolChoice}}}
			}
		}
	}
	if req.Temperature != nil {
		p.Temperature = openai.Float(*req.Temperature)
	}
	if req.TopP != nil {
		p.TopP = openai.Float(*req.TopP)
	}
	if req.ReasoningEffort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	if req.Verbosity != "" {
		p.Verbosity = openai.ChatCompletionNewParamsVerbosity(req.Verbosity)
	}
	if req.Seed != nil {
		p.Seed = openai.Int(*req.Seed)
	}
	if req.FrequencyPenalty != nil {
		p.FrequencyPenalty = openai.Float(*req.FrequencyPenalty)
	}
	if req.PresencePenalty != nil {
		p.PresencePenalty = openai.Float(*req.PresencePenalty)
	}
	for token, bias := range req.LogitBias {
		if p.LogitBias == nil {
			p.LogitBias = map[string]int64{}
		}
		p.LogitBias[token] = int64(bias)
	}
	if id := req.Metadata["user_id"]; id != "" {
		p.User = openai.String(id)
	}
	if req.SafetyIdentifier != "" {
		p.SafetyIdentifier = openai.String(req.SafetyIdentifier)
	}
	if req.PromptCacheKey != "" {
		p.PromptCacheKey = openai.String(req.PromptCacheKey)
	}
	if len(req.Stop) > 0 {
		p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: req.Stop}
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case runtime.FormatText:
			p.ResponseFormat.OfText = &shared.ResponseFormatTextParam{}
		case runtime.FormatJSONObject:
			p.ResponseFormat.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
		case runtime.FormatJSONSchema:
			js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: rf.Name}
			if js.Name == "" {
				js.Name = "output"
			}
			if rf.Strict {
				js.Strict = openai.Bool(true)
			}
			if len(rf.Schema) > 0 {
				js.Schema = rf.Schema
			}
			p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}
		default:
			return p, fmt.Errorf("unknown response format %q", rf.Type)
		}
	}
	return p, nil
}

// sdkMessages maps the transcript: tool results (a tool message, or the
// tool_result parts of any message) become tool messages; text and images
// of user messages become content parts.
func sdkMessages(in []runtime.Message) ([]openai.ChatCompletionMessageParamUnion, error) {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(in))
	for i := range in {
		m := &in[i]
		text, rest := textOf(m)
		switch m.Role {
		case "system", "developer":
			sm := openai.SystemMessage(text)
			if m.Name != "" {
				sm.OfSystem.Name = openai.String(m.Name)
			}
			out = append(out, sm)
		case "user":
			images := false
			for _, p := range rest {
				switch p.Type {
				case runtime.PartToolResult:
					out = append(out, openai.ToolMessage(toolResultText(p), p.ToolCallID))
				case runtime.PartImage, runtime.PartDocument:
					images = true
				}
			}
			var um openai.ChatCompletionMessageParamUnion
			switch {
			case images:
				// The parts in their order, adjacent texts joined.
				var parts []openai.ChatCompletionContentPartUnionParam
				pending := m.Content
				for j, p := range m.Parts {
					switch p.Type {
					case runtime.PartText:
						if pending != "" && !m.RunsOn(j) {
							pending += "\n"
						}
						pending += p.Text
					case runtime.PartImage:
						if pending != "" {
							parts = append(parts, openai.TextContentPart(pending))
							pending = ""
						}
						parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: imageURL(p), Detail: p.Detail}))
					case runtime.PartDocument:
						if pending != "" {
							parts = append(parts, openai.TextContentPart(pending))
							pending = ""
						}
						f := openai.ChatCompletionContentPartFileFileParam{FileData: openai.String(p.ImageURL)}
						if p.Filename != "" {
							f.Filename = openai.String(p.Filename)
						}
						parts = append(parts, openai.FileContentPart(f))
					}
				}
				if pending != "" {
					parts = append(parts, openai.TextContentPart(pending))
				}
				um = openai.UserMessage(parts)
			case text != "" || len(rest) == 0:
				um = openai.UserMessage(text)
			default:
				continue
			}
			if m.Name != "" {
				um.OfUser.Name = openai.String(m.Name)
			}
			out = append(out, um)
		case "assistant":
			a := openai.ChatCompletionAssistantMessageParam{}
			if m.Name != "" {
				a.Name = openai.String(m.Name)
			}
			if text != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = openai.String(text)
			}
			for _, tc := range m.ToolCalls {
				if tc.Custom {
					in, err := tc.CustomInput()
					if err != nil {
						return nil, err
					}
					a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
						OfCustom: &openai.ChatCompletionMessageCustomToolCallParam{ID: tc.ID,
							Custom: openai.ChatCompletionMessageCustomToolCallCustomParam{Name: tc.Name, Input: in}}})
					continue
				}
				args := string(tc.Arguments)
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args}}})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case "tool":
			// The results are the message's tool_result parts, or else its
			// text answering ToolCallID.
			n := len(out)
			for _, p := range rest {
				if p.Type == runtime.PartToolResult {
					out = append(out, openai.ToolMessage(toolResultText(p), p.ToolCallID))
				}
			}
			if len(out) == n && m.ToolCallID != "" {
				out = append(out, openai.ToolMessage(text, m.ToolCallID))
			}
		default:
			return nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	return out, nil
}
