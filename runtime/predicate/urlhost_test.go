package predicate

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A URL of a special scheme that net/url reads with no host, or with a host
// spelt so that a WHATWG parser (a browser, JavaScript's fetch) reads
// another, gave "" or that other spelling, and a guard's deny
// "url_host(args.url) in ['169.254.169.254']" let the request through. Such
// a URL is an evaluation error, as the egress layer refuses it, so the
// guard's on_error applies.
func TestURLHostFailsClosedOnWHATWGSpellings(t *testing.T) {
	ctx := context.Background()
	env := mustEnv(t, EnvConfig{Stage: Turn})
	p := mustCompile(t, env, "url_host(input.text) in ['169.254.169.254', 'evil.com']")
	for _, tt := range []struct{ url, wantErr string }{
		{"http:169.254.169.254/latest/meta-data", `has no host to net/url`},
		{`http:\\169.254.169.254\latest`, `has no host to net/url`},
		{"http:/evil.com/x", `has no host to net/url`},
		{"HTTP:/evil.com/x", `has no host to net/url`},
		{"http:///evil.com/x", `has no host to net/url`},
		{"wss:evil.com", `has no host to net/url`},
		{`file:\\evil.com\share`, `has no host to net/url`},
		{`file:/\evil.com\share`, `has no host to net/url`},
		{"http://user@:80/", `has no host to net/url`},
		{"http://2852039166/", `numeric host "2852039166" is not a dotted quad`},
		{"http://0xa9.0xfe.0xa9.0xfe/", `numeric host "0xa9.0xfe.0xa9.0xfe" is not a dotted quad`},
		{"http://0251.254.169.254/", `numeric host "0251.254.169.254" is not a dotted quad`},
		{"http://169.254.43518/", `numeric host "169.254.43518" is not a dotted quad`},
		{"http://169。254。169。254/", `host "169。254。169。254" is not ASCII`},
		{"http://ｅvil.com/", `host "ｅvil.com" is not ASCII`},
		{"http://\u212Aevil.com/", "host \"\u212Aevil.com\" is not ASCII"},
		{"http://\u0130nternal.com/", "host \"\u0130nternal.com\" is not ASCII"},
		{"http://[::ffff:169.254.169.254]/", `host "::ffff:169.254.169.254" is an IPv4 address written as IPv6`},
		{" http://evil.com/x", "url_host: invalid URL"},
		{"ht\ttp://evil.com/x", "url_host: invalid URL"},
	} {
		_, err := p.Eval(ctx, &TurnVars{Input: TurnInput{Text: tt.url}})
		if assert.Error(t, err, tt.url) {
			assert.Contains(t, err.Error(), tt.wantErr, tt.url)
		}
	}
	for _, tt := range []struct {
		url  string
		want bool
	}{
		{"http://169.254.169.254/latest/meta-data", true},
		{"http://EVIL.com./x", true},
		{"https://api.example.com/v1", false},
		{"file:///etc/passwd", false},
		{"file:evil.com/x", false},
		{"file:///C:/x", false},
		{"mailto:evil.com", false},
		{"urn:isbn:0451450523", false},
		{"/relative/path", false},
		{"http://10.0.0.1/", false},
		{"http://[::1]/", false},
	} {
		got, err := p.Eval(ctx, &TurnVars{Input: TurnInput{Text: tt.url}})
		require.NoError(t, err, tt.url)
		assert.Equal(t, tt.want, got, tt.url)
	}
}

// url_host returns, for a URL of a special scheme other than file, either
// an error or a non-empty ASCII host that is a name or a canonical address.
func FuzzURLHost(f *testing.F) {
	for _, s := range []string{"http:169.254.169.254/latest", `http:\\169.254.169.254\latest`, "http:/evil.com/x",
		"http:///evil.com", "http://2852039166/", "http://169。254。169。254/", "https://API.Example.COM:8443/v1",
		"http://[::ffff:a9fe:a9fe]/", "ws://user@host./", "file:///etc/passwd", `file:\\host\share`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := urlHost(types.String(s))
		if types.IsError(v) {
			return
		}
		host := string(v.(types.String))
		scheme, _, ok := strings.Cut(s, ":")
		if !ok || !isSpecialScheme(strings.ToLower(scheme)) || strings.EqualFold(scheme, "file") {
			return
		}
		require.NotEmpty(t, host, "%q", s)
		require.True(t, utf8.ValidString(host) && host == strings.ToLower(host), "%q: %q", s, host)
		for _, r := range host {
			require.Less(t, r, rune(0x80), "%q: %q", s, host)
		}
		require.Empty(t, numericHostProblem(host), "%q: %q", s, host)
	})
}

// A guard that tests a path's prefix lets /srv/data/../../etc/passwd
// through; path_clean() gives the path the file system reaches, lexically
// (path.Clean), for the prefix to be tested on.
func TestPathClean(t *testing.T) {
	ctx := context.Background()
	env := mustEnv(t, EnvConfig{Stage: Turn})
	p := mustCompile(t, env, "path_clean(input.text).startsWith('/srv/data/')")
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"/srv/data/a.txt", true},
		{"/srv/data/x/../a.txt", true},
		{"//srv/data/./a.txt", true},
		{"/srv/data/../../etc/passwd", false},
		{"/srv/data/..", false},
		{"/srv/data", false},
		{"srv/data/a.txt", false},
		{"", false},
	} {
		got, err := p.Eval(ctx, &TurnVars{Input: TurnInput{Text: tt.path}})
		require.NoError(t, err, tt.path)
		assert.Equal(t, tt.want, got, tt.path)
	}
	q := mustCompile(t, env, "path_clean(input.text) == '.'")
	got, err := q.Eval(ctx, &TurnVars{Input: TurnInput{Text: ""}})
	require.NoError(t, err)
	assert.Equal(t, true, got)
}
