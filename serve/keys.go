package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// keyring holds the SHA-256 of every virtual API key of a plan. An empty
// keyring admits every caller (the policy declares no keys).
type keyring struct {
	keys []virtualKey
}

type virtualKey struct {
	name, tenant string
	hash         [sha256.Size]byte
}

// newKeyring resolves the plan's keys: a hash is decoded, a variable is
// read with lookup and hashed. A variable that is unset or empty fails, naming
// the variable (never its value).
func newKeyring(keys map[string]plan.Key, lookup func(string) (string, bool)) (*keyring, error) {
	names := make([]string, 0, len(keys))
	for name := range keys {
		names = append(names, name)
	}
	sort.Strings(names)
	kr := &keyring{}
	// Every unset variable is named, not only the first.
	var unset []error
	for _, name := range names {
		k := keys[name]
		vk := virtualKey{name: name, tenant: k.TenantOf(name)}
		switch {
		case k.SHA256 != "":
			b, err := hex.DecodeString(k.SHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("key %q: sha256 must be 64 hex digits", name)
			}
			copy(vk.hash[:], b)
		case k.Env != "":
			v, ok := lookup(k.Env)
			// A header's value is read without the spaces around it
			// (presentedKey), so the key is too: a variable read from a
			// file whole keeps its last newline.
			v = strings.TrimSpace(v)
			if !ok || v == "" {
				if !varName.MatchString(k.Env) {
					// Not shaped like a variable's name: it may be the key
					// itself, written where its variable's name goes.
					unset = append(unset, fmt.Errorf("key %q: the environment variable its env names is not set (the name is not shown: it is not upper-case like a variable's, and may be the key itself)", name))
					continue
				}
				unset = append(unset, fmt.Errorf("key %q: environment variable %s is not set", name, k.Env))
				continue
			}
			vk.hash = sha256.Sum256([]byte(v))
		default:
			return nil, fmt.Errorf("key %q has neither sha256 nor env", name)
		}
		kr.keys = append(kr.keys, vk)
	}
	if len(unset) > 0 {
		return nil, errors.Join(unset...)
	}
	// One secret under two keys would admit its holder as whichever the
	// keyring compares last: the tenant of the other's budgets and runs.
	seen := make(map[[sha256.Size]byte]string, len(kr.keys))
	for _, k := range kr.keys {
		if other, dup := seen[k.hash]; dup {
			return nil, fmt.Errorf("keys %q and %q are the same key (their hashes or their variables' values are equal), so a caller presenting it could not be told to be one or the other; give each its own key", other, k.name)
		}
		seen[k.hash] = k.name
	}
	return kr, nil
}

// open reports whether the keyring admits every caller.
func (kr *keyring) open() bool { return len(kr.keys) == 0 }

// tenants returns how many tenants the keys name.
func (kr *keyring) tenants() int {
	seen := map[string]bool{}
	for _, k := range kr.keys {
		seen[k.tenant] = true
	}
	return len(seen)
}

// match returns the key whose hash is that of presented. It compares
// against every key in constant time, so the time taken does not tell how
// much of a hash matched nor which key did.
func (kr *keyring) match(presented string) (*virtualKey, bool) {
	h := sha256.Sum256([]byte(presented))
	found := -1
	for i := range kr.keys {
		if subtle.ConstantTimeCompare(h[:], kr.keys[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	return &kr.keys[found], true
}

// presentedKey returns the key a request carries: `Authorization: Bearer
// KEY` (OpenAI clients, MCP clients), `x-api-key: KEY` (Anthropic clients)
// or `api-key: KEY` (Azure OpenAI's clients), "" when it carries none. An
// Authorization header of another scheme is no key: beside none of these
// it is refused with errNotBearer, so that the caller learns why its key
// was not read; beside one it is left to whatever it was meant for. A
// request that carries two keys that differ (two of the headers, or one
// repeated) is refused with errKeyConflict: which one the caller meant is
// not the gateway's to guess, and a proxy in front may have checked the
// other. The same key twice is one key.
func presentedKey(h http.Header) (string, error) {
	var key string
	add := func(v string) error {
		if v = strings.TrimSpace(v); v == "" {
			return nil
		}
		if key != "" && v != key {
			return errKeyConflict
		}
		key = v
		return nil
	}
	for _, name := range []string{"x-api-key", "api-key"} {
		for _, v := range h.Values(name) {
			if err := add(v); err != nil {
				return "", err
			}
		}
	}
	notBearer := false
	for _, a := range h.Values("Authorization") {
		switch a = strings.TrimSpace(a); {
		case len(a) > 7 && strings.EqualFold(a[:7], "bearer "):
			if err := add(a[7:]); err != nil {
				return "", err
			}
		case a != "" && !strings.EqualFold(a, "bearer"):
			notBearer = true
		}
	}
	if key == "" && notBearer {
		// Not "missing": the caller sent something, most likely its key
		// without the scheme, or credentials of another scheme.
		return "", errNotBearer
	}
	return key, nil
}

// errNotBearer refuses a request whose only credentials are an
// Authorization header of another scheme than Bearer (the key alone,
// Basic credentials). Its value is not shown: it may be the key.
var errNotBearer = errors.New("the Authorization header does not use the Bearer scheme: send the key as Authorization: Bearer KEY (OpenAI clients), x-api-key: KEY (Anthropic clients) or api-key: KEY")

// urlKeyParams are the query parameters in which clients of some APIs
// send their key (Google's key, api_key, access_token...), lower-case.
var urlKeyParams = map[string]bool{"key": true, "api_key": true, "api-key": true, "apikey": true, "x-api-key": true,
	"access_token": true, "token": true}

// keyInURL returns the name of a query parameter of rawQuery that would
// carry a key (urlKeyParams, in any case), "" when none does. The query is
// split at '&' and at ';', as some proxies split it, so that a parameter
// net/url would skip is seen too.
func keyInURL(rawQuery string) string {
	for _, pair := range strings.FieldsFunc(rawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		name, _, _ := strings.Cut(pair, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if urlKeyParams[strings.ToLower(strings.TrimSpace(name))] {
			return name
		}
	}
	return ""
}

// errKeyInURL refuses a request whose URL carries a key.
func errKeyInURL(param string) error {
	return fmt.Errorf("API key in the URL (query parameter %q): the gateway reads a key from a header only (Authorization: Bearer KEY, x-api-key or api-key), since a URL is written to the logs of the proxies it crosses; send it in a header, and rotate a key that was sent in a URL", param)
}

// errNoKeys refuses a policy without keys where Options.RequireKeys is set.
var errNoKeys = errors.New("the policy declares no keys, so it would serve every caller that reaches the gateway's network address on the operator's providers; declare keys (keys: NAME: {sha256: \"...\"} or {env: \"VAR\"}), listen on a loopback address, or serve it open (agentc serve -keyless)")

// errKeyConflict refuses a request that carries two different keys.
var errKeyConflict = errors.New("conflicting API keys: the request carries more than one key (Authorization: Bearer, x-api-key, api-key, or a header repeated) and they differ; send one")

// varName matches the conventional name of an environment variable.
var varName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
