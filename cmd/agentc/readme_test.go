package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
)

// readme returns the repository's README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(examplesDir(t)), "README.md"))
	require.NoError(t, err)
	return string(b)
}

// TestReadmeNamesEveryRule: every rule agentc vet -rules lists is named in
// README.md, and each rule of the vet suite (order/, guard/, state/) has a
// row of the rule table with its severity, so a reader of the README learns
// of every rule a policy may trip.
func TestReadmeNamesEveryRule(t *testing.T) {
	text := readme(t)
	rowRE := regexp.MustCompile("(?m)^\\| `([a-z]+/[a-z0-9<>-]+)` \\| ([a-z, ]+) \\|")
	rows := map[string]string{}
	for _, m := range rowRE.FindAllStringSubmatch(text, -1) {
		rows[m[1]] = m[2]
	}
	for _, r := range compiler.Rules() {
		assert.True(t, strings.Contains(text, "`"+r.ID+"`"), "README.md does not name rule %s", r.ID)
		family, _, _ := strings.Cut(r.ID, "/")
		if family != "order" && family != "guard" && family != "state" {
			continue
		}
		sev, ok := rows[r.ID]
		if assert.True(t, ok, "README.md's rule table has no row for %s", r.ID) && r.ID != "order/<id>" {
			assert.Equal(t, strings.ReplaceAll(string(r.Severity), "/", ", "), sev, "the severity README.md gives %s", r.ID)
		}
	}
}

// TestReadmeFailingCase: the failing case README.md quotes is what agentc
// test prints for its example case, with the layer misspelt, beside its
// example policy: the place and the message.
func TestReadmeFailingCase(t *testing.T) {
	text := readme(t)
	blocks := regexp.MustCompile("(?ms)^```cue\n(.*?)^```$").FindAllStringSubmatch(text, -1)
	var policy, cases string
	for _, b := range blocks {
		switch {
		case strings.HasPrefix(b[1], "package support\n"):
			policy = b[1]
		case strings.HasPrefix(b[1], "tests: "):
			cases = b[1]
		}
	}
	require.NotEmpty(t, policy, "README.md's example policy")
	require.NotEmpty(t, cases, "README.md's example test cases")
	require.Contains(t, cases, `layer: "refund_limit"`)
	quoted := regexp.MustCompile("(?s)A failing case is printed.*?`(FAIL [^`]*)`").FindStringSubmatch(text)
	require.NotNil(t, quoted, "README.md quotes no failing case")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(policy), 0o644))
	cases = "package support\n\n" + strings.Replace(cases, `layer: "refund_limit"`, `layer: "refund_limt"`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy_test.cue"), []byte(cases), 0o644))
	var stdout, stderr strings.Builder
	code := cmdTest(t.Context(), &cliEnv{stdout: &stdout, stderr: &stderr, wd: dir}, []string{dir})
	assert.Equal(t, exitProblems, code, stderr.String())
	// The quote runs over lines and leaves parts out ("..."): each part,
	// its spaces as Markdown renders them, is in the output in order.
	got := strings.Join(strings.Fields(stdout.String()), " ")
	for _, part := range strings.Split(strings.Join(strings.Fields(quoted[1]), " "), " ...") {
		part = strings.TrimSpace(part)
		i := strings.Index(got, part)
		if !assert.True(t, i >= 0, "README.md quotes %q, agentc test printed:\n%s", part, stdout.String()) {
			break
		}
		got = got[i+len(part):]
	}
}

// TestUsageAlignsSummaries: in the usage text each command's summary
// starts in one column, on its synopsis line or, after a synopsis too long
// for it, on the next line, as README.md's command list shows them.
func TestUsageAlignsSummaries(t *testing.T) {
	lines := strings.Split(usage(), "\n")
	for _, c := range commands {
		if c.summary == "" {
			continue
		}
		found := false
		for i, l := range lines {
			if !strings.HasPrefix(l, "  agentc "+c.name+" ") {
				continue
			}
			found = true
			col := strings.Index(l, c.summary)
			if col < 0 && i+1 < len(lines) {
				col = strings.Index(lines[i+1], c.summary)
				assert.Equal(t, strings.Repeat(" ", col), lines[i+1][:col], "agentc %s: the summary line holds nothing else", c.name)
			}
			assert.Equal(t, 54, col, "the column of agentc %s's summary", c.name)
		}
		assert.True(t, found, "usage lists agentc %s", c.name)
	}
	assert.Contains(t, usage(), "exit 1 on any error (with -strict: any warning)")
}

// TestHelpPlaceholdersMatchSynopsis: agentc help CMD names each flag's value
// as the command's synopsis (and README.md) does (-format text|json|sarif,
// -grace D), not by its Go type (-format format, -grace duration).
func TestHelpPlaceholdersMatchSynopsis(t *testing.T) {
	flagRE := regexp.MustCompile(`(?m)^  -([a-z]+)(?: (.+))?$`)
	for _, c := range commands {
		var stderr strings.Builder
		code := Main(t.Context(), []string{c.name, "-h"}, io.Discard, &stderr)
		require.Equal(t, exitOK, code, c.name)
		for _, m := range flagRE.FindAllStringSubmatch(stderr.String(), -1) {
			name, placeholder := m[1], m[2]
			want := synopsisPlaceholder(c.synopsis, name)
			assert.Equal(t, want, placeholder, "agentc %s -%s: the placeholder of its help, the synopsis says %q", c.name, name, c.synopsis)
		}
	}
}
