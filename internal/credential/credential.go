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

// shapes are the shapes of the credentials agentc knows, the one list vet
// reads a value written in a policy by (Value, Var) and the scrubber reads
// a text by (Scrub, Redact, LogHandler): a GitHub token (ghp_, gho_, ghu_,
// ghs_, ghr_, github_pat_), a GitLab one (glpat-), an OpenAI or Anthropic
// key (sk-), a Stripe one (sk_live_, sk_test_), a Slack one (xoxa-,
// xoxb-, xoxp-, xoxr-), an AWS access key id (AKIA), a Google API key
// (AIza), a Hugging Face token (hf_ and letters or digits, not a
// snake_case name), a bearer token (Bearer, spaces or tabs on its line,
// and a token68 of 16 or more characters, letters, digits and -._~+/ then
// any =: a JWT, an opaque token; not a challenge's realm="...") and a PEM private
// key (its block from the BEGIN line to the END line, or to the end of a
// text that cuts it off). needle is a text every credential of the shape
// holds, which spares the expressions the texts that hold none.
var shapes = []struct{ expr, needle string }{
	{`gh[pousr]_[A-Za-z0-9]{20,}`, "gh"},
	{`github_pat_\w{20,}`, "github_pat_"},
	{`glpat-[\w-]{20,}`, "glpat-"},
	{`sk-[A-Za-z0-9_-]{16,}`, "sk-"},
	{`sk_(?:live|test)_\w{16,}`, "sk_"},
	{`xox[abpr]-[\w-]{10,}`, "xox"},
	{`AKIA[0-9A-Z]{16}`, "AKIA"},
	{`AIza[\w-]{35}`, "AIza"},
	{`hf_[A-Za-z0-9]{30,}`, "hf_"},
	{`[Bb]earer[ \t]+[A-Za-z0-9._~+/-]{16,}=*`, "earer"},
	{privateKey, "PRIVATE KEY"},
}

// privateKey is a PEM private key's shape (RSA, EC, OPENSSH, ENCRYPTED,
// PGP's PRIVATE KEY BLOCK...).
const privateKey = `-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)`

// anyShape is the expression of every shape.
var anyShape = func() string {
	exprs := make([]string, len(shapes))
	for i, s := range shapes {
		exprs[i] = s.expr
	}
	return strings.Join(exprs, "|")
}()

// Value matches a value that is a credential of one of the known shapes,
// whole.
var Value = regexp.MustCompile(`^(?:` + anyShape + `)$`)

// pemKey matches a PEM private key anywhere in a value.
var pemKey = regexp.MustCompile(privateKey)

// keyWord matches a variable's name holding the word KEY or AUTH
// (SSH_KEY, DEPLOY_KEY, NPM_AUTH), which Name leaves to a header's
// check: a variable's name is words joined by underscores, so the whole
// word does not catch KEYBOARD or AUTHOR.
var keyWord = regexp.MustCompile(`(?i)(^|_)(key|auth)(_|$)`)

// Var reports whether the environment variable name holding
// value holds a credential: its name reads as a credential's (token,
// secret, passw, api_key or apikey, credential, or a KEY or AUTH word), or
// its value has the shape of a known credential (Value), or holds a PEM
// private key. Either may be empty.
func Var(name, value string) bool {
	if name != "" && (Name.MatchString(name) || keyWord.MatchString(name)) {
		return true
	}
	return Value.MatchString(value) || strings.Contains(value, "PRIVATE KEY") && pemKey.MatchString(value)
}
