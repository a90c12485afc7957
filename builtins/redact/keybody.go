package redact

import (
	"encoding/base64"
	"strings"
)

// minKeyBody is the fewest characters of base64 read as the body of a private key: the
// shortest key's (an Ed25519 key in PKCS #8, 48 bytes).
const minKeyBody = 64

// opensshKey is how the body of an OpenSSH private key begins, in base64: "openssh-key-v1".
const opensshKey = "b3BlbnNzaC1rZXktdjE"

// keyBodySpans appends to spans, with the rule rule, each run of base64 in text (wrapped over
// lines as PEM wraps it, or on one line) that is the body of a private key without its BEGIN
// line: one that decodes to the DER encoding of a private key (keyDER), or to an OpenSSH
// private key. A tool that pages a file hands over the body of a key on a page of its own.
// The body of a certificate or of a public key is another structure, and is left as its PEM
// block is.
func keyBodySpans(text string, rule int, spans []span) []span {
	ssh := -2 // where the next OpenSSH body starts, -1 when none does, -2 not looked for yet
	for i := 0; i < len(text); {
		p := strings.IndexByte(text[i:], 'M')
		if p >= 0 {
			p += i
		}
		if ssh != -1 && ssh < i {
			if ssh = strings.Index(text[i:], opensshKey); ssh >= 0 {
				ssh += i
			}
		}
		if ssh >= 0 && (p < 0 || ssh < p) {
			p = ssh
		}
		if p < 0 {
			break
		}
		end, chars := keyBodyEnd(text, p)
		// A run starts at p when the character before is not of the alphabet.
		if (p == 0 || !isBase64Byte(text[p-1])) && chars >= minKeyBody && isKeyBody(text[p:min(end, p+24)]) {
			spans = append(spans, span{start: p, end: end, match: p, matchE: end, rule: rule})
		}
		i = max(end, p+1)
	}
	return spans
}

// keyBodyEnd returns the end of the lines of base64 (the standard alphabet, and padding) from
// start in text, and the number of characters of the alphabet they hold: a line of 16
// characters or more goes on over its line break when the next line is base64 too, whatever
// its length (PEM wraps a body at 64 characters, OpenSSH at 70).
func keyBodyEnd(text string, start int) (end, chars int) {
	i := start
	for {
		line := i
		for i < len(text) && isStdBase64Byte(text[i]) {
			i++
		}
		chars += i - line
		for i < len(text) && text[i] == '=' {
			i++
		}
		end = i
		brk := 0
		if i < len(text) && text[i] == '\n' {
			brk = 1
		} else if i+1 < len(text) && text[i] == '\r' && text[i+1] == '\n' {
			brk = 2
		}
		if brk == 0 || end-line < 16 || text[end-1] == '=' || i+brk >= len(text) || !isStdBase64Byte(text[i+brk]) {
			return end, chars
		}
		i += brk
	}
}

// isKeyBody reports whether prefix, the first characters of a run of base64, starts a
// private key's body.
func isKeyBody(prefix string) bool {
	if strings.HasPrefix(prefix, opensshKey) {
		return true
	}
	var buf [18]byte
	n, err := base64.StdEncoding.Decode(buf[:], []byte(prefix[:len(prefix)/4*4]))
	if err != nil && n == 0 {
		return false
	}
	return keyDER(buf[:n])
}

// keyDER reports whether der starts as the DER encoding of a private key does: a SEQUENCE of
// which the first element is a small INTEGER version (0 to 3) and the second an INTEGER, an
// OCTET STRING or a SEQUENCE. These are PKCS #1 RSA keys (version, modulus), SEC 1 EC keys
// (version, key), PKCS #8 keys (version, algorithm), DSA keys and PKCS #12 files. A
// certificate, a certificate request and a CRL open with a SEQUENCE, a public key with an
// algorithm SEQUENCE, an RSA public key with its modulus: none is taken for a key.
func keyDER(der []byte) bool {
	if len(der) < 2 || der[0] != 0x30 {
		return false
	}
	h := 2 // the SEQUENCE's header: tag and length
	switch {
	case der[1] < 0x80:
	case der[1] == 0x81:
		h = 3
	case der[1] == 0x82:
		h = 4
	default:
		return false
	}
	if len(der) < h+4 {
		return false
	}
	v := der[h:]
	return v[0] == 0x02 && v[1] == 0x01 && v[2] <= 3 && (v[3] == 0x02 || v[3] == 0x04 || v[3] == 0x30)
}

func isBase64Byte(c byte) bool { return c == '-' || c == '_' || isStdBase64Byte(c) }

func isStdBase64Byte(c byte) bool {
	return c == '+' || c == '/' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
