package postgres

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/runtime"
)

// replacement stands in the audit table for what PostgreSQL cannot store.
const replacement = "\uFFFD"

// pgText returns s as a text column holds it: PostgreSQL refuses a NUL
// character and bytes that are not UTF-8, so each (each run of invalid
// bytes) becomes U+FFFD.
func pgText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, replacement), "\x00", replacement)
}

// pgJSON returns the JSON b as a jsonb column holds it: PostgreSQL refuses
// the escape \u0000 and an unpaired surrogate escape, so each becomes
// \ufffd. b is valid JSON (from json.Marshal, which has already replaced
// bytes that are not UTF-8).
func pgJSON(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] != 'u' || i+6 > len(b) {
			// Another escape (\\, \", \n...): kept whole, so that its
			// second character is not read as the start of one.
			out = append(out, b[i], b[i+1])
			i++
			continue
		}
		r := hex4(b[i+2 : i+6])
		switch {
		case r == 0:
			out = append(out, `\ufffd`...)
		case utf16.IsSurrogate(r) && r < 0xDC00 && i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' &&
			utf16.DecodeRune(r, hex4(b[i+8:i+12])) != utf8.RuneError:
			// A pair: kept.
			out = append(out, b[i:i+12]...)
			i += 6
		case utf16.IsSurrogate(r):
			out = append(out, `\ufffd`...)
		default:
			out = append(out, b[i:i+6]...)
		}
		i += 5
	}
	return out
}

// hex4 reads the four hex digits of a \u escape (-1 if they are not).
func hex4(b []byte) rune {
	v, err := strconv.ParseUint(string(b), 16, 32)
	if err != nil {
		return -1
	}
	return rune(v)
}

// storable returns r with every text field as the audit table holds it.
func storable(r runtime.AuditRecord) runtime.AuditRecord {
	for _, f := range []*string{&r.Layer, &r.Stage, &r.Tool, &r.ErrorType, &r.ErrorMessage, &r.RunID,
		&r.IdempotencyKey, &r.ArgsDigest} {
		*f = pgText(*f)
	}
	return r
}
