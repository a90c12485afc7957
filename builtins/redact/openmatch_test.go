package redact

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestConfiguredPatternOverLineBreakInOutput: a configured pattern that matches over a line
// break masks the model's output as it masks the same text sent to the model, whether the
// text arrives in one delta or cut anywhere. Each line was released and masked alone
// unless a line of letters and digits would complete a match: "account number:" then
// "12345678" on the next line went out in clear.
func TestConfiguredPatternOverLineBreakInOutput(t *testing.T) {
	config := `{"defaults": false, "patterns": ["ACCT-\\s*[0-9]{6}", "tok_[a-z]+", "(?i)account number:\\s*[0-9]{8}"]}`
	for text, want := range map[string]string{
		"Your account number:\n12345678, thanks": "Your [REDACTED:pattern-2], thanks",
		"your account ACCT-\n123456 ok":          "your account [REDACTED:pattern-0] ok",
		"ACCT-\n\n\n123456\nnext\n":              "[REDACTED:pattern-0]\nnext\n",
	} {
		for cut := 0; cut < len(text); cut++ {
			deltas := []string{text}
			if cut > 0 {
				deltas = []string{text[:cut], text[cut:]}
			}
			got, _ := streamedOutput(t, config, deltas)
			assert.Equal(t, want, got, "%q cut at %d", text, cut)
		}
	}
}

// TestDefaultRuleKeyWordOverLineBreakInOutput: a key word ending a line and its value after
// "=" or ":" on the next ("token" then "= hunter22x") is masked in the output as in a whole
// text: the line was released alone, since a line of letters and digits does not complete
// the match.
func TestDefaultRuleKeyWordOverLineBreakInOutput(t *testing.T) {
	for _, deltas := range [][]string{{"my token\n= hunter22x\nbye\n"}, {"my token\n", "= hunter22x\nbye\n"}, {"api_key\n\n: hunter22x\n"}} {
		out, _ := streamedOutput(t, "", deltas)
		assert.NotContains(t, out, "hunter22x", "%q", deltas)
		assert.Contains(t, out, "[REDACTED:password-assignment]", "%q", deltas)
	}
}

// TestOpenMatchHeldWithinBounds: a match left open holds the output from the line it begins
// in, and the hold ends where the match does: the lines after it go out before the stream
// ends. One left open over more than 64 lines (or 4 KiB) holds the rest of the stream to its
// end, then released masked whole: the output is still the text masked whole.
func TestOpenMatchHeldWithinBounds(t *testing.T) {
	config := `{"defaults": false, "patterns": ["(?s)BEGIN SECRET.*?END SECRET"]}`
	block := func(lines int) []string {
		out := []string{"intro\n", "BEGIN SECRET\n"}
		for range lines {
			out = append(out, "body line\n")
		}
		return append(out, "END SECRET\n", "after\n", "more\n", "tail")
	}
	all, got := streamedOutput(t, config, block(10))
	assert.Equal(t, "intro\n[REDACTED:pattern-0]\nafter\nmore\ntail", all)
	assert.Equal(t, []string{"intro\n", "[REDACTED:pattern-0]\n", "after\n", "more\n", "tail"}, got,
		"the hold ends with the match")

	_, got = streamedOutput(t, config, block(100))
	assert.Equal(t, []string{"intro\n", "[REDACTED:pattern-0]\nafter\nmore\ntail"}, got,
		"past 64 lines the rest is held to the end")

	long := []string{"intro\n", "BEGIN SECRET " + strings.Repeat("x y ", 1250) + "\n", "END SECRET\n", "after\n", "tail"}
	_, got = streamedOutput(t, config, long)
	assert.Equal(t, []string{"intro\n", "[REDACTED:pattern-0]\nafter\ntail"}, got, "past 4 KiB the rest is held to the end")
}
