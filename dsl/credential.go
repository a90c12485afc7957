package dsl

import (
	"regexp"
	"strings"
)

// keyWord matches a variable's name holding the word KEY or AUTH
// (SSH_KEY, DEPLOY_KEY, NPM_AUTH), which secretName leaves to a header's
// check: a variable's name is words joined by underscores, so the whole
// word does not catch KEYBOARD or AUTHOR.
var keyWord = regexp.MustCompile(`(?i)(^|_)(key|auth)(_|$)`)

// CredentialVar reports whether the environment variable name holding
// value holds a credential: its name reads as a credential's (token,
// secret, passw, api_key or apikey, credential, or a KEY or AUTH word), or
// its value has the shape of a known credential (GitHub, GitLab, OpenAI,
// Anthropic, Slack, Stripe and AWS access keys, a PEM private key). Either
// may be empty.
func CredentialVar(name, value string) bool {
	if name != "" && (secretName.MatchString(name) || keyWord.MatchString(name)) {
		return true
	}
	if secretValue.MatchString(value) {
		return true
	}
	i := strings.Index(value, "-----BEGIN ")
	return i >= 0 && strings.Contains(value[i:], "PRIVATE KEY-----")
}
