// Package errtext says what a layer that keeps a call's failure (audit's
// records, log's lines) writes of its error when it does not write the
// text in clear.
package errtext

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
)

// Withheld returns what is kept of an error whose text is withheld, since
// a tool's error may quote its arguments (a card number, an email
// address): what (a note of the layer's own, such as "panic"), the layer
// the error names (runtime.LayerOf) and the hex SHA-256 of text, with
// which someone holding the text (the caller's copy) can match it:
// `panic; layer "bank"; text withheld, sha256 HEX`.
func Withheld(err error, text, what string) string {
	sum := sha256.Sum256([]byte(text))
	var b strings.Builder
	if what != "" {
		b.WriteString(what + "; ")
	}
	if l := runtime.LayerOf(err); l != "" {
		fmt.Fprintf(&b, "layer %q; ", l)
	}
	b.WriteString("text withheld, sha256 " + hex.EncodeToString(sum[:]))
	return b.String()
}
