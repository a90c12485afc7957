package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// The request body in the SDK's parameter types, as the client built it
// before it encoded the body itself: the reference TestBodyMatchesSDK
// compares the client's body to.

// sdkParams builds the request body in the SDK's types, and the options
// for the sampling parameters they do not carry.
func (c *Client) sdkParams(req *runtime.ChatRequest) (anthropic.MessageNewParams, []option.RequestOption, error) {
	p := anthropic.MessageNewParams{Model: anthropic.Model(c.cfg.Model), MaxTokens: int64(c.cfg.MaxTokens)}
	if req.MaxTokens > 0 {
		p.MaxTokens = int64(req.MaxTokens)
	}
	var opts []option.RequestOption
	sys, msgs, err := sdkMessages(req.Messages)
	if err != nil {
		return p, nil, err
	}
	p.System, p.Messages = sys, msgs
	tools, called := req.Tools, historyTools(req)
	if called != nil {
		tools = called
	}
	for _, t := range tools {
		tp, err := sdkTool(t)
		if err != nil {
			return p, nil, err
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	// One tool call at a time is the tool choice's
	// disable_parallel_tool_use, which needs a tool choice (auto by
	// default); it means nothing with none, nor without tools.
	serial := req.ParallelToolCalls != nil && !*req.ParallelToolCalls && len(req.Tools) > 0
	switch req.ToolChoice {
	case "":
		if serial {
			p.ToolChoice.OfAuto = &anthropic.ToolChoiceAutoParam{DisableParallelToolUse: anthropic.Bool(true)}
		}
	case "auto":
		p.ToolChoice.OfAuto = &anthropic.ToolChoiceAutoParam{}
		if serial {
			p.ToolChoice.OfAuto.DisableParallelToolUse = anthropic.Bool(true)
		}
	case "none":
		p.ToolChoice.OfNone = &anthropic.ToolChoiceNoneParam{}
	case "required":
		p.ToolChoice.OfAny = &anthropic.ToolChoiceAnyParam{}
		if serial {
			p.ToolChoice.OfAny.DisableParallelToolUse = anthropic.Bool(true)
		}
	default:
		p.ToolChoice.OfTool = &anthropic.ToolChoiceToolParam{Name: req.ToolChoice}
		if serial {
			p.ToolChoice.OfTool.DisableParallelToolUse = anthropic.Bool(true)
		}
	}
	if called != nil {
		p.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
	}
	if req.CacheControl != nil {
		p.CacheControl = cacheControl(req.CacheControl)
	}
	if len(req.Betas) > 0 {
		opts = append(opts, option.WithHeader("anthropic-beta", strings.Join(req.Betas, ",")))
	}
	if req.Temperature != nil {
		opts = append(opts, option.WithJSONSet("temperature", *req.Temperature))
	}
	if req.TopP != nil {
		opts = append(opts, option.WithJSONSet("top_p", *req.TopP))
	}
	if req.TopK != nil {
		opts = append(opts, option.WithJSONSet("top_k", *req.TopK))
	}
	if len(req.Stop) > 0 {
		p.StopSequences = req.Stop
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type == runtime.FormatJSONSchema && len(rf.Schema) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(rf.Schema, &schema); err != nil {
			return p, nil, fmt.Errorf("response_format schema is not a JSON object: %w", err)
		}
		p.OutputConfig.Format = anthropic.JSONOutputFormatParam{Schema: schema}
	}
	if req.Effort != "" {
		p.OutputConfig.Effort = anthropic.OutputConfigEffort(req.Effort)
	}
	if len(req.ContextEdits) > 0 {
		// A beta parameter: the SDK's beta type, as an extra field of the
		// request.
		var cm anthropic.BetaContextManagementConfigParam
		for _, e := range req.ContextEdits {
			var edit anthropic.BetaContextManagementConfigEditUnionParam
			if err := json.Unmarshal(e.Params, &edit); err != nil {
				return p, nil, err
			}
			cm.Edits = append(cm.Edits, edit)
		}
		p.SetExtraFields(map[string]any{"context_management": cm})
	}
	if id := endUser(req); id != "" {
		p.Metadata.UserID = anthropic.String(id)
	}

	if t := req.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			p.Thinking.OfEnabled = &anthropic.ThinkingConfigEnabledParam{BudgetTokens: int64(t.BudgetTokens), Display: anthropic.ThinkingConfigEnabledDisplay(t.Display)}
		case "adaptive":
			p.Thinking.OfAdaptive = &anthropic.ThinkingConfigAdaptiveParam{Display: anthropic.ThinkingConfigAdaptiveDisplay(t.Display)}
		case "between_tools":
			p.Thinking.OfBetweenTools = &anthropic.ThinkingConfigBetweenToolsParam{}
		}
	}
	return p, opts, nil
}

// sdkTool maps a tool definition; the schema's properties and required list
// have fields of their own, its other keywords ride along; a tool of no
// parameters has an object schema of no properties.
func sdkTool(t runtime.ToolDef) (*anthropic.ToolParam, error) {
	tp := &anthropic.ToolParam{Name: t.Name}
	if t.Strict {
		tp.Strict = anthropic.Bool(true)
	}
	if t.CacheControl != nil {
		tp.CacheControl = cacheControl(t.CacheControl)
	}
	if t.Description != "" {
		tp.Description = anthropic.String(t.Description)
	}
	if len(t.Parameters) > 0 {
		var schema map[string]any
		if err := json.Unmarshal(t.Parameters, &schema); err != nil {
			return nil, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
		}
		if p, ok := schema["properties"]; ok && p != nil {
			tp.InputSchema.Properties = p
		}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					tp.InputSchema.Required = append(tp.InputSchema.Required, s)
				}
			}
		}
		for k, v := range schema {
			if k == "properties" || k == "required" || k == "type" {
				continue
			}
			if tp.InputSchema.ExtraFields == nil {
				tp.InputSchema.ExtraFields = map[string]any{}
			}
			tp.InputSchema.ExtraFields[k] = v
		}
	}
	if tp.InputSchema.Properties == nil {
		// The API requires an input schema: none is an object of no
		// properties.
		tp.InputSchema.Properties = map[string]any{}
	}
	return tp, nil
}

// sdkMessages maps the transcript: system messages become the system blocks;
// tool messages and tool_result parts become tool_result blocks, and
// consecutive results share one user message, as the API wants them.
func sdkMessages(in []runtime.Message) ([]anthropic.TextBlockParam, []anthropic.MessageParam, error) {
	var sys []anthropic.TextBlockParam
	out := make([]anthropic.MessageParam, 0, len(in))
	// results collects tool results until the next non-tool message.
	var results []anthropic.ContentBlockParamUnion
	flush := func() {
		if results != nil {
			out = append(out, anthropic.NewUserMessage(results...))
			results = nil
		}
	}
	for i := range in {
		m := &in[i]
		switch m.Role {
		case "system", "developer":
			if m.Content != "" {
				sys = append(sys, anthropic.TextBlockParam{Text: m.Content})
			}
			for _, p := range m.Parts {
				if p.Type == runtime.PartText && p.Text != "" {
					sys = append(sys, anthropic.TextBlockParam{Text: p.Text, CacheControl: cacheControl(p.CacheControl)})
				}
			}
		case "tool":
			// The results are the message's tool_result parts, or else its
			// text answering ToolCallID.
			n := len(results)
			for j, p := range m.Parts {
				if p.Type == runtime.PartToolResult {
					results = append(results, sdkResult(m.Parts, j))
				}
			}
			if len(results) == n && m.ToolCallID != "" {
				results = append(results, anthropic.NewToolResultBlock(m.ToolCallID, m.Text(), false))
			}
		case "user":
			var blocks []anthropic.ContentBlockParamUnion
			for j, p := range m.Parts {
				if p.Type == runtime.PartToolResult {
					results = append(results, sdkResult(m.Parts, j))
				}
			}
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for _, p := range m.Parts {
				switch p.Type {
				case runtime.PartText:
					if p.Document {
						blocks = append(blocks, withCache(anthropic.NewDocumentBlock(anthropic.PlainTextSourceParam{Data: p.Text}), p.CacheControl))
					} else {
						blocks = append(blocks, withCache(anthropic.NewTextBlock(p.Text), p.CacheControl))
					}
				case runtime.PartDocument:
					if data, ok := strings.CutPrefix(p.ImageURL, "data:application/pdf;base64,"); ok {
						blocks = append(blocks, withCache(anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: data}), p.CacheControl))
					} else {
						blocks = append(blocks, withCache(anthropic.NewDocumentBlock(anthropic.URLPDFSourceParam{URL: p.ImageURL}), p.CacheControl))
					}
				case runtime.PartImage:
					if p.ToolCallID == "" {
						blocks = append(blocks, withCache(sdkImage(p), p.CacheControl))
					}
				}
			}
			if len(blocks) == 0 && results == nil {
				blocks = append(blocks, anthropic.NewTextBlock(""))
			}
			if results != nil {
				blocks = append(results, blocks...)
				results = nil
			}
			out = append(out, anthropic.NewUserMessage(blocks...))
		case "assistant":
			flush()
			var blocks []anthropic.ContentBlockParamUnion
			if m.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(m.Content))
			}
			for j, k := range m.Blocks() {
				if k >= 0 {
					tc := m.ToolCalls[k]
					input := json.RawMessage(tc.Arguments)
					if len(input) == 0 {
						input = json.RawMessage("{}")
					}
					blocks = append(blocks, withCache(anthropic.NewToolUseBlock(tc.ID, input, tc.Name), tc.CacheControl))
					continue
				}
				switch p := m.Parts[j]; {
				case p.Type == runtime.PartText && p.Text != "":
					blocks = append(blocks, withCache(anthropic.NewTextBlock(p.Text), p.CacheControl))
				case p.Type == runtime.PartThinking:
					blocks = append(blocks, anthropic.NewThinkingBlock(p.Signature, p.Text))
				case p.Type == runtime.PartRedactedThinking:
					blocks = append(blocks, anthropic.NewRedactedThinkingBlock(p.Signature))
				}
			}
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		default:
			return nil, nil, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	flush()
	return sys, out, nil
}

// sdkResult maps the tool result parts[j] and the images that follow it
// answering the same call: its text, unless it is empty beside images,
// then its images.
func sdkResult(parts []runtime.ContentPart, j int) anthropic.ContentBlockParamUnion {
	p := parts[j]
	block := anthropic.NewToolResultBlock(p.ToolCallID, p.Text, p.IsError)
	var images []anthropic.ToolResultBlockParamContentUnion
	for _, q := range parts[j+1:] {
		if q.Type != runtime.PartImage || q.ToolCallID != p.ToolCallID {
			break
		}
		images = append(images, anthropic.ToolResultBlockParamContentUnion{OfImage: sdkImage(q).OfImage})
	}
	if len(images) > 0 {
		if p.Text == "" {
			block.OfToolResult.Content = nil
		}
		block.OfToolResult.Content = append(block.OfToolResult.Content, images...)
	}
	return withCache(block, p.CacheControl)
}

// sdkImage maps an image part: a URL source, or base64 data.
func sdkImage(p runtime.ContentPart) anthropic.ContentBlockParamUnion {
	if p.ImageURL != "" && !strings.HasPrefix(p.ImageURL, "data:") {
		return anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: p.ImageURL})
	}
	media, data := p.MediaType, wire.Base64(p.Data)
	if rest, ok := strings.CutPrefix(p.ImageURL, "data:"); ok {
		if head, body, ok := strings.Cut(rest, ","); ok {
			media, data = strings.TrimSuffix(head, ";base64"), body
		}
	}
	return anthropic.NewImageBlockBase64(media, data)
}

// cacheControl maps a prompt-cache breakpoint (nil: none, the zero value,
// which is not sent).
func cacheControl(c *runtime.CacheControl) anthropic.CacheControlEphemeralParam {
	if c == nil {
		return anthropic.CacheControlEphemeralParam{}
	}
	cc := anthropic.NewCacheControlEphemeralParam()
	cc.TTL = anthropic.CacheControlEphemeralTTL(c.TTL)
	return cc
}

// withCache sets the prompt-cache breakpoint of block.
func withCache(block anthropic.ContentBlockParamUnion, c *runtime.CacheControl) anthropic.ContentBlockParamUnion {
	if c != nil {
		if p := block.GetCacheControl(); p != nil {
			*p = cacheControl(c)
		}
	}
	return block
}
