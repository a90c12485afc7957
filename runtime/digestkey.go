package runtime

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"log/slog"
	"os"
	"strings"

	"github.com/agentc-dev/agentc/internal/jsonnum"
)

// MinDigestKey is the length, in bytes, of the shortest digest key Build
// accepts (settings.digest_key_env): 32, the output of
// `openssl rand -hex 16`, or of 32 random bytes however written.
const MinDigestKey = 32

// KeyedDigestPrefix starts a keyed digest (Digester.Sum with a key): an
// HMAC-SHA256, in hex, after it. A plain digest is the hex SHA-256 alone,
// so a reader of a record knows which form it holds.
const KeyedDigestPrefix = "hmac-sha256:"

// Digester makes the digests the layers store of a call's arguments and
// of an error's text (an audit record's args_digest, an idempotency
// record's digests and store keys): the hex SHA-256 of the bytes, or,
// with the policy's digest key (settings.digest_key_env), KeyedDigestPrefix
// and the hex HMAC-SHA256 of the bytes under the key. A plain digest of an
// argument of few possible values (a PIN, an amount) is recovered by
// digesting the candidates; a keyed one only by someone who holds the key.
//
// The zero Digester is plain. A Digester never prints, logs or marshals its
// key: it reads as "plain" or "keyed".
type Digester struct {
	// key is behind a pointer so that printing a struct that holds a
	// Digester (a layer's, with %+v, where its String is not called)
	// shows an address, not the key.
	key *digestKey
}

// digestKey is a Digester's key.
type digestKey struct{ b []byte }

// NewDigester returns the Digester of key, which must be MinDigestKey
// bytes at least; an auditor holding the key matches a record with it
// (Args, Text).
func NewDigester(key []byte) (Digester, error) {
	if len(key) < MinDigestKey {
		return Digester{}, fmt.Errorf("a digest key needs at least %d bytes, this one has %d (make one with: openssl rand -hex 32)", MinDigestKey, len(key))
	}
	return Digester{key: &digestKey{b: append([]byte(nil), key...)}}, nil
}

// digestKeyFromEnv returns the Digester of the key in the environment
// variable env (settings.digest_key_env), or an error naming the variable,
// never its value.
func digestKeyFromEnv(env string) (Digester, error) {
	v, ok := os.LookupEnv(env)
	if !ok || v == "" {
		return Digester{}, fmt.Errorf("settings.digest_key_env: environment variable %s is not set; the digests of arguments and error text would be plain SHA-256, which anyone who reads the store or the trail can match against guessed values", env)
	}
	d, err := NewDigester([]byte(v))
	if err != nil {
		return Digester{}, fmt.Errorf("settings.digest_key_env: environment variable %s: %w", env, err)
	}
	return d, nil
}

// Keyed reports whether d digests with a key.
func (d Digester) Keyed() bool { return d.key != nil }

// Plain returns the plain Digester, which the layers use to find the
// records written before a deployment set a digest key.
func (d Digester) Plain() Digester { return Digester{} }

// New returns a fresh hash of d: HMAC-SHA256 under its key, or SHA-256.
func (d Digester) New() hash.Hash {
	if d.Keyed() {
		return hmac.New(sha256.New, d.key.b)
	}
	return sha256.New()
}

// Sum returns the digest of b: KeyedDigestPrefix and the hex HMAC-SHA256
// under d's key, or the hex SHA-256 when d is plain.
func (d Digester) Sum(b []byte) string {
	h := d.New()
	h.Write(b)
	var sum [sha256.Size]byte
	s := hex.EncodeToString(h.Sum(sum[:0]))
	if d.Keyed() {
		return KeyedDigestPrefix + s
	}
	return s
}

// Text returns the digest of an error's text, as an audit record (or a
// log line, a span) keeps it when it withholds the text.
func (d Digester) Text(s string) string { return d.Sum([]byte(s)) }

// Args returns the digest of v's canonical JSON (object keys sorted,
// equal numbers alike: runtime.ToolCall.ArgsDigest), or an error when v
// cannot be canonicalised (a NaN or infinite number). With the key an
// audit layer used, Args of a call's arguments is the args_digest of its
// records (a turn's record holds Text of its input).
func (d Digester) Args(v any) (string, error) {
	b, err := json.Marshal(jsonnum.Canonical(v))
	if err != nil {
		return "", err
	}
	return d.Sum(b), nil
}

// Of returns the Digester that made the stored digest s: d when s is keyed
// (KeyedDigestPrefix), the plain one when it is not. A keyed digest read
// without a key matches nothing.
func (d Digester) Of(s string) Digester {
	if strings.HasPrefix(s, KeyedDigestPrefix) {
		return d
	}
	return Digester{}
}

// String implements fmt.Stringer without the key.
func (d Digester) String() string {
	if d.Keyed() {
		return "keyed"
	}
	return "plain"
}

// GoString implements fmt.GoStringer without the key.
func (d Digester) GoString() string { return "runtime.Digester(" + d.String() + ")" }

// LogValue implements slog.LogValuer without the key.
func (d Digester) LogValue() slog.Value { return slog.StringValue(d.String()) }

// MarshalJSON writes d without the key.
func (d Digester) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }
