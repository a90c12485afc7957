package serve

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// The Responses API's compaction (POST /v1/responses/compact), which Codex
// calls to compact a long conversation when its provider is OpenAI's. The
// API answers the user's messages and an encrypted compaction item that
// only the provider reads; the gateway answers the user's messages and a
// summary the model wrote, in an assistant message: a model call on the
// chat chain as any other (keys, runs, budgets, guards, fallback), whose
// answer every layer reads and every provider's model can be sent back.
var responsesCompact = chatAPI{decode: decodeCompact, complete: completeCompact,
	requestIDHeader: "X-Request-Id", wire: "openai", param: rsParam}

// compactPrompt is the request the model summarizes the conversation on,
// sent after it as a user message.
const compactPrompt = "Summarize the conversation above for its continuation: the continuation will read your summary and the user's messages in place of everything else. " +
	"Give the task and the user's requests and constraints, what was done and found (the files, commands and results that matter, the decisions taken), " +
	"the state of the work, and what remains to be done, with the details needed to carry on. Answer with the summary alone."

// decodeCompact decodes a compaction request: a Responses request (its
// fields, its refusals) without stream, tools or a tool choice that
// requires a call, whose conversation the model is asked to summarize
// (compactPrompt). The user's messages of its input are kept for the
// answer.
func decodeCompact(body []byte, p *chatParams) error {
	if err := decodeResponses(body, p); err != nil {
		return err
	}
	if p.stream {
		return errors.New("stream: a compaction is answered whole; send stream false, or leave it out")
	}
	if len(p.req.Tools) > 0 {
		return errors.New("tools: a compaction calls no tool; send none")
	}
	switch p.req.ToolChoice {
	case "", "auto", "none":
		p.req.ToolChoice = ""
	default:
		return errors.New("tool_choice: a compaction calls no tool; send none, auto, or leave it out")
	}
	var in struct {
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return err
	}
	kept, err := userItems(in.Input)
	if err != nil {
		return err
	}
	p.rs.kept = kept
	p.req.Messages = append(p.req.Messages, runtime.Message{Role: "user", Content: compactPrompt})
	return nil
}

// userItems returns the user's messages of a Responses input, as the
// client sent them: the input string as a message, or the message items
// of role user.
func userItems(input json.RawMessage) ([]json.RawMessage, error) {
	var text string
	if json.Unmarshal(input, &text) == nil {
		b, err := json.Marshal(map[string]any{"type": "message", "role": "user",
			"content": []map[string]string{{"type": "input_text", "text": text}}})
		return []json.RawMessage{b}, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(input, &items); err != nil {
		return nil, err
	}
	var kept []json.RawMessage
	for _, it := range items {
		var h struct{ Type, Role string }
		if err := json.Unmarshal(it, &h); err != nil {
			return nil, err
		}
		if (h.Type == "" || h.Type == "message") && h.Role == "user" {
			kept = append(kept, it)
		}
	}
	return kept, nil
}

// completeCompact answers a compacted response: the user's messages, then
// the summary as an assistant message. A call that wrote no summary, a
// refusal, or one cut short (at the output bound, by a filter) fails with
// a 502: the client keeps its conversation rather than replacing it with
// less than a summary.
func completeCompact(x *exchange, p *chatParams, resp *runtime.ChatResponse) {
	why := ""
	switch {
	case resp.Refusal:
		why = "refused to summarize the conversation"
	case resp.FinishReason == runtime.FinishLength || resp.FinishReason == runtime.FinishPauseTurn || resp.FinishReason == runtime.FinishContentFilter:
		why = "wrote a summary that was cut short (" + resp.FinishReason + ")"
	case strings.TrimSpace(resp.Text) == "":
		why = "wrote no summary"
	}
	if why != "" {
		x.failErr(&runtime.CallError{Kind: runtime.KindPermanent, Message: "model " + servedName(resp, p) + " " + why + ": the conversation is not compacted"})
		return
	}
	b := make([]byte, 0, 256+len(resp.Text))
	b = append(b, `{"id":`...)
	b = wire.AppendString(b, responseID("resp_"))
	b = append(b, `,"object":"response.compaction","created_at":`...)
	b = appendInt(b, unixNow())
	b = append(b, `,"output":[`...)
	for _, it := range p.rs.kept {
		b = append(b, it...)
		b = append(b, ',')
	}
	summary := newRSOut(rsMessage)
	summary.text = []byte(resp.Text)
	b = appendItem(b, &summary, true)
	b = append(b, `],"usage":`...)
	b = appendRSUsage(b, &resp.Usage)
	b = append(b, "}\n"...)
	writeRaw(x, http.StatusOK, b)
}
