// Package errtext says what a layer that keeps a call's failure (audit's
// records, log's lines) writes of its error when it does not write the
// text in clear.
package errtext

import (
	"fmt"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
)

// Withheld returns what is kept of an error whose text is withheld, since
// a tool's error may quote its arguments (a card number, an email
// address): what (a note of the layer's own, such as "panic"), the layer
// the error names (runtime.LayerOf) and the digest of text (d: the hex
// SHA-256, or with the policy's digest key the hex HMAC-SHA256 under it),
// with which someone holding the text (the caller's copy), and the key
// if any, can match it: `panic; layer "bank"; text withheld, sha256 HEX`,
// or `... text withheld, hmac-sha256 HEX`.
func Withheld(d runtime.Digester, err error, text, what string) string {
	var b strings.Builder
	if what != "" {
		b.WriteString(what + "; ")
	}
	if l := runtime.LayerOf(err); l != "" {
		fmt.Fprintf(&b, "layer %q; ", l)
	}
	b.WriteString("text withheld, " + Form(d.Text(text)))
	return b.String()
}

// Form writes a digest as a withheld text's note holds it: "sha256 HEX"
// for a plain one, "hmac-sha256 HEX" for a keyed one.
func Form(digest string) string {
	if hex, ok := strings.CutPrefix(digest, runtime.KeyedDigestPrefix); ok {
		return "hmac-sha256 " + hex
	}
	return "sha256 " + digest
}
