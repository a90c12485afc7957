// Package credential tells a credential from other text by its name and its
// shape: the one rule by which agentc vet reports a credential written out in
// a policy, agentc serve scrubs the values it reads for MCP servers, and the
// credentials a text quotes are scrubbed from what a client reads (Redact)
// and from log lines and spans (Scrub, LogHandler). It links no CUE, so a
// service that loads a compiled plan can use it.
package credential

import (
	"regexp"
	"strings"
)

// Name matches the name of a variable or parameter that holds a
// credential.
var Name = regexp.MustCompile(`(?i)(token|secret|passw|api_?key|credential)`)

// Value matches the shapes of common credentials: GitHub, GitLab, OpenAI,
// Anthropic, Slack, Stripe and AWS access keys.
var Value = regexp.MustCompile(`^(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w-]{20,}|sk-[\w-]{16,}|sk_(live|test)_\w{16,}|xox[abpr]-[\w-]{10,}|AKIA[0-9A-Z]{16})$`)

// keyWord matches a variable's name holding the word KEY or AUTH
// (SSH_KEY, DEPLOY_KEY, NPM_AUTH), which Name leaves to a header's
// check: a variable's name is words joined by underscores, so the whole
// word does not catch KEYBOARD or AUTHOR.
var keyWord = regexp.MustCompile(`(?i)(^|_)(key|auth)(_|$)`)

// Var reports whether the environment variable name holding
// value holds a credential: its name reads as a credential's (token,
// secret, passw, api_key or apikey, credential, or a KEY or AUTH word), or
// its value has the shape of a known credential (GitHub, GitLab, OpenAI,
// Anthropic, Slack, Stripe and AWS access keys, a PEM private key). Either
// may be empty.
func Var(name, value string) bool {
	if name != "" && (Name.MatchString(name) || keyWord.MatchString(name)) {
		return true
	}
	if Value.MatchString(value) {
		return true
	}
	i := strings.Index(value, "-----BEGIN ")
	return i >= 0 && strings.Contains(value[i:], "PRIVATE KEY-----")
}
