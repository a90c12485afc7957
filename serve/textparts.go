package serve

import (
	"strings"

	"github.com/agentc-dev/agentc/runtime"
)

// runTextTogether makes the adjacent text parts of each user and
// assistant message one text part, their texts run together, as a model
// reads them: a Claude model reads separate text blocks run together, and
// OpenAI's API content parts. The guards, which read a message's parts
// joined by line breaks (runtime's predicate content), and the detectors
// then read the text the model reads, whichever provider's model serves
// the call: the providers send one text as it is (the openai provider
// would join parts by line breaks). A run ends at a part that is not a
// plain text (an image, a document, a tool result, thinking), at a tool
// call placed among the parts, and after a part with a prompt-cache
// breakpoint, which stays where the client set it. A tool message's parts
// are one result, joined by line breaks, for either provider, as the
// guards read them; the system messages are left as sent (see
// docs/serve.md).
func runTextTogether(msgs []runtime.Message) {
	for i := range msgs {
		if r := msgs[i].Role; len(msgs[i].Parts) > 1 && (r == "user" || r == "assistant") {
			runMessageText(&msgs[i])
		}
	}
}

// runMessageText runs the adjacent text parts of m together (see
// runTextTogether), its tool calls kept in their places.
func runMessageText(m *runtime.Message) {
	plain := func(p *runtime.ContentPart) bool { return p.Type == runtime.PartText && !p.Document }
	callAt := make([]bool, len(m.Parts)+1)
	for k := range m.ToolCalls {
		callAt[m.CallPlace(k)] = true
	}
	var gone []bool
	run := -1 // the part the run goes on in
	var b strings.Builder
	joined := false
	end := func() {
		if joined {
			m.Parts[run].Text = b.String()
			b.Reset()
			joined = false
		}
	}
	for j := range m.Parts {
		p := &m.Parts[j]
		if run < 0 || !plain(p) || callAt[j] || m.Parts[run].CacheControl != nil {
			end()
			run = -1
			if plain(p) {
				run = j
			}
			continue
		}
		if !joined {
			b.WriteString(m.Parts[run].Text)
			joined = true
		}
		b.WriteString(p.Text)
		m.Parts[run].CacheControl = p.CacheControl
		if gone == nil {
			gone = make([]bool, len(m.Parts))
		}
		gone[j] = true
	}
	end()
	if gone == nil {
		return
	}
	// after[j] counts the parts kept from j on: a call's place.
	after := make([]int, len(m.Parts)+1)
	for j := len(m.Parts) - 1; j >= 0; j-- {
		after[j] = after[j+1]
		if !gone[j] {
			after[j]++
		}
	}
	for k := range m.ToolCalls {
		m.ToolCalls[k].PartsAfter = after[m.CallPlace(k)]
	}
	kept := m.Parts[:0]
	for j := range m.Parts {
		if !gone[j] {
			kept = append(kept, m.Parts[j])
		}
	}
	clear(m.Parts[len(kept):])
	m.Parts = kept
	if len(m.Parts) == 1 && m.Content == "" && len(m.ToolCalls) == 0 && m.Parts[0].CacheControl == nil {
		m.Content, m.Parts = m.Parts[0].Text, nil
	}
}
