package vet_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/compiler/vet"
)

func TestCallerRead(t *testing.T) {
	for _, tc := range []struct {
		src, path, at string // at: the source from the read on; "" when none is reported
	}{
		{"request.params.metadata.tier != 'internal'", "request.params.metadata", "request.params.metadata.tier"},
		{"request.params.metadata.?tier.orValue('') != 'x'", "request.params.metadata", "request.params"},
		{"'tier' in request.params.metadata && size(messages) > 2", "request.params.metadata", "request.params.metadata &&"},
		{"request.params.metadata['tier'] == 'gold'", "request.params.metadata", "request.params.metadata["},
		{"size(messages) > 2 && request.params.temperature > 0.5", "request.params.temperature", "request.params.temperature"},
		{"has(request.params.seed)", "request.params.seed", "request.params.seed"},
		{"request.max_tokens == 0", "request.max_tokens", "request.max_tokens"},
		{"!run.id.startsWith('trusted-')", "run.id", "run.id"},
		{"messages.exists(m, m.role == 'tool' && run.id != 'x')", "run.id", "run.id"},
		// An optional read is a read all the same.
		{"run.?id.orValue('') != 'ops'", "run.id", "run"},
		{"request.?max_tokens.orValue(0) < 4096", "request.max_tokens", "request"},
		{"request.?params.?metadata.?tier.orValue('') != 'internal'", "request.params.metadata", "request"},
		{"request.params.?seed.hasValue()", "request.params.seed", "request.params"},
		{"request.?params.metadata[?'tier'].hasValue()", "request.params.metadata", "request"},
		{"run.?meta.?tenant.orValue('') != 'internal'", "", ""},
		// Every term of the || reads what the caller writes.
		{"request.max_tokens > 10 || run.id == 'x'", "request.max_tokens", "request.max_tokens"},
		{"tool.name == 'a' && run.id == 'x' || 'é' == request.params.stop[0]", "run.id", "run.id"},
		{"'é' == request.params.stop[0] || tool.name == 'a' && run.id == 'x'", "request.params.stop", "request.params.stop"},
		// A term the caller cannot touch: it can only add calls, as the
		// other terms are false for a caller who sends nothing.
		{"tool.side_effecting || run.id.startsWith('audit-')", "", ""},
		{"(request.model == 'big' || request.params.metadata.?strict.orValue('') == 'yes')", "", ""},
		{"request.model == 'big' || has(request.params.metadata.strict) && size(messages) > 2", "", ""},
		// ...unless a term holds for such a caller: sending a value makes it
		// false, and the layer is skipped for the calls it applied to.
		{"request.model == 'big' || request.params.metadata.?tier.orValue('') != 'internal'", "request.params.metadata", "request.params.metadata.?tier"},
		{"request.model == 'big' || !has(request.params.metadata.tier)", "request.params.metadata", "request.params.metadata.tier"},
		{"request.model == 'big' || request.max_tokens == 0", "request.max_tokens", "request.max_tokens"},
		{"tool.side_effecting || !run.id.startsWith('trusted-')", "run.id", "run.id"},
		// An MCP session's calls without the header are of run mcp-...
		{"tool.side_effecting || !run.id.startsWith('anon-')", "run.id", "run.id"},
		// A term no value the caller can send makes false: a run id is
		// never empty nor longer than 128 characters, max_tokens never
		// negative, and metadata is a map. The layer applies to every call.
		{"tool.side_effecting || run.id != ''", "", ""},
		{"run.id != ''", "", ""},
		{"size(run.id) > 0 && request.max_tokens >= 0", "", ""},
		{"request.model == 'big' || request.max_tokens <= 1000000", "", ""},
		{"tool.side_effecting || !run.id.contains(' ')", "", ""},
		// ...while one a value makes false is reported.
		{"tool.side_effecting || run.id != 'ops'", "run.id", "run.id"},
		{"tool.side_effecting || size(run.id) < 100", "run.id", "run.id"},
		{"request.model == 'big' || request.max_tokens < 4096", "request.max_tokens", "request.max_tokens"},
		{"request.model == 'big' || request.params.metadata.?tier.orValue('free') == 'free'", "request.params.metadata", "request.params.metadata"},
		{"request.model == 'big' || !('skip' in request.params.metadata)", "request.params.metadata", "request.params.metadata"},
		{"request.model == 'big' || request.params.metadata.size() < 2", "request.params.metadata", "request.params.metadata"},
		{"request.model == 'big' || request.params.metadata.size() < 50", "request.params.metadata", "request.params.metadata"},
		{"request.model == 'big' || size(request.params.metadata.?note.orValue('')) < 1000", "request.params.metadata", "request.params.metadata"},
		{"request.model == 'big' || run.id.matches('^[a-z0-9-]+$')", "run.id", "run.id"},
		// A pattern's matches are not among the values tried: taken to be
		// the caller's to make false.
		{"tool.side_effecting || !run.id.matches('^adm-[0-9]+$')", "run.id", "run.id"},
		// A when is reported unless it is proven to hold: values a caller
		// sends together, a length, a string built from pieces.
		{"run.id != 'adm' || request.params.metadata.?t.orValue('') != 'y'", "run.id", "run.id"},
		{"request.model == 'big' || !(run.id == 'adm' && request.params.metadata.?t.orValue('') == 'y')", "run.id", "run.id"},
		{"request.model == 'big' || run.id.size() != 7", "run.id", "run.id"},
		{"request.model == 'big' || run.id != 'adm' + 'in'", "run.id", "run.id"},
		{"tool.side_effecting || '' != run.id", "", ""},
		{"tool.side_effecting || 0 < run.id.size()", "", ""},
		// Under keys a run id carries its tenant: it may be longer than 128.
		{"tool.side_effecting || size(run.id) <= 128", "run.id", "run.id"},
		// What the layer decides about, the model's name, and the host's run data.
		{"request.model == 'big'", "", ""},
		{"size(request.tools) > 0 && messages.exists(m, m.role == 'tool')", "", ""},
		{"run.meta.?tenant.orValue('') != 'internal' && run.agent == 'serve'", "", ""},
		{"args.amount > 100.0", "", ""},
		{"request.params.(", "", ""}, // does not parse: cel/syntax's
	} {
		stage := "chat"
		if strings.Contains(tc.src, "tool.") || strings.Contains(tc.src, "args.") {
			stage = "tool"
		}
		path, off, ok := vet.CallerRead(stage, tc.src)
		if tc.path == "" {
			assert.False(t, ok, "%s: reported %s", tc.src, path)
			continue
		}
		if assert.True(t, ok, tc.src) {
			assert.Equal(t, tc.path, path, tc.src)
			assert.True(t, strings.HasPrefix(tc.src[off:], tc.at), "%s: reported at %q", tc.src, tc.src[off:])
		}
	}
}
