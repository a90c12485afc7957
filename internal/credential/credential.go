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
	"sync"
)

// Name returns the expression that matches the name of a variable or
// parameter that holds a credential. The expressions of this package are
// compiled on first use: a command that reads no credential (agentc vet of
// a policy without one) does not compile them at start.
var Name = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(token|secret|passw|api_?key|credential)`)
})

// Shape is a credential's shape: a credential told by its own form, where
// it stands, without a key word beside it.
type Shape struct {
	// Label names the shape; redact masks a credential of it as
	// [REDACTED:Label].
	Label string
	// Expr matches a credential of the shape, whole (RE2, no anchors).
	Expr string
	// Needles are texts one of which every credential of the shape holds
	// (case-sensitive), which spare the expression the texts that hold
	// none.
	Needles []string
}

// Shapes are the shapes of the credentials agentc knows, the one list vet
// reads a value written in a policy by (Value, Var), the scrubber reads a
// text by (Scrub, Redact, LogHandler) and the redact builtin masks by
// (beside its rules of a key word and the value next to it): a PEM private
// key (its block from the BEGIN line to the END line, or to the end of a
// text that cuts it off, or the base64 lines of a body cut off before that
// run into its END line), an Anthropic key (sk-ant-), an OpenAI one (sk-,
// sk-proj-...), an AWS access key id (AKIA, ASIA and the other prefixes
// of AWS's unique ids), a GitHub token (ghp_, gho_, ghu_, ghs_, ghr_,
// github_pat_), a GitLab one (glpat-), a Slack one (xoxa-, xoxb-, xoxo-,
// xoxp-, xoxr-, xoxs-), a Google API key (AIza), a Stripe one (sk_ or rk_,
// live_ or test_), a Hugging Face token (hf_ and letters or digits, not a
// snake_case name), a JWT (eyJ...eyJ...sig) and a bearer token (Bearer,
// spaces or tabs on its line, and a token68 of 16 or more characters,
// letters, digits and -._~+/ then any =: a JWT, an opaque token; not a
// challenge's realm="..."). Where two overlap (sk-ant- is an sk- key),
// the first names it.
var Shapes = []Shape{
	{"private-key", privateKey, []string{"PRIVATE KEY"}},
	{"anthropic-key", `sk-ant-[A-Za-z0-9_-]{20,}`, []string{"sk-ant-"}},
	{"openai-key", `sk-[A-Za-z0-9_-]{16,}`, []string{"sk-"}},
	{"aws-access-key-id", `(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[0-9A-Z]{16}`,
		[]string{"AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA", "APKA"}},
	{"github-token", `gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}`, []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}},
	{"gitlab-token", `glpat-[\w-]{20,}`, []string{"glpat-"}},
	{"slack-token", `xox[abposr]-[\w-]{10,}`, []string{"xox"}},
	{"google-api-key", `AIza[\w-]{35}`, []string{"AIza"}},
	{"stripe-key", `(?:sk|rk)_(?:live|test)_\w{16,}`, []string{"_live_", "_test_"}},
	{"huggingface-token", `hf_[A-Za-z0-9]{30,}`, []string{"hf_"}},
	{"jwt", `eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}`, []string{"eyJ"}},
	{"bearer-token", `[Bb]earer[ \t]+[A-Za-z0-9._~+/-]{16,}=*`, []string{"earer"}},
}

// privateKey is a PEM private key's shape (RSA, EC, OPENSSH, ENCRYPTED,
// PGP's PRIVATE KEY BLOCK...): a block from its BEGIN line (to its END
// line, or to the end of the text when it is cut off), or the body of one
// cut off before, the lines of base64 that run into its END line.
const privateKey = `-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)` +
	`|[A-Za-z0-9+/]{16,}={0,2}\r?\n(?:[A-Za-z0-9+/]*={0,2}\r?\n)*-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`

// anyShape returns the expression of every shape.
func anyShape() string {
	exprs := make([]string, len(Shapes))
	for i, s := range Shapes {
		exprs[i] = s.Expr
	}
	return strings.Join(exprs, "|")
}

// Value returns the expression that matches a value that is a credential
// of one of the known shapes, whole.
var Value = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:` + anyShape() + `)$`)
})

// pemKey matches a PEM private key anywhere in a value.
var pemKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(privateKey) })

// keyWord matches a variable's name holding the word KEY or AUTH
// (SSH_KEY, DEPLOY_KEY, NPM_AUTH), which Name leaves to a header's
// check: a variable's name is words joined by underscores, so the whole
// word does not catch KEYBOARD or AUTHOR.
var keyWord = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(^|_)(key|auth)(_|$)`) })

// Var reports whether the environment variable name holding
// value holds a credential: its name reads as a credential's (token,
// secret, passw, api_key or apikey, credential, or a KEY or AUTH word), or
// its value has the shape of a known credential (Value), or holds a PEM
// private key. Either may be empty.
func Var(name, value string) bool {
	if name != "" && (Name().MatchString(name) || keyWord().MatchString(name)) {
		return true
	}
	return Value().MatchString(value) || strings.Contains(value, "PRIVATE KEY") && pemKey().MatchString(value)
}
