package predicate

import (
	"context"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A deny "args.url.startsWith('https://api.example.com/v1/admin')" let
// through every other spelling of the URL a server routes to /v1/admin.
// url_path() gives the routed path, or an error where servers read the
// path in more than one way, so a guard testing url_host() and url_path()
// blocks each spelling (an error applies the guard's on_error).
func TestURLPathBlocksEverySpellingOfAPrefix(t *testing.T) {
	ctx := context.Background()
	env := mustEnv(t, EnvConfig{Stage: Turn})
	p := mustCompile(t, env, "url_host(input.text) == 'api.example.com' && url_path(input.text).startsWith('/v1/admin')")
	for _, tt := range []struct{ url, want, wantErr string }{
		{url: "https://api.example.com/v1/admin", want: "/v1/admin"},
		{url: "https://api.example.com/v1/x/../admin", want: "/v1/admin"},
		{url: "https://api.example.com/v1/x/./../admin/", want: "/v1/admin/"},
		{url: "https://api.example.com/v1/%61dmin", want: "/v1/admin"},
		{url: "https://api.example.com/%76%31/%41dmin/../admin", want: "/v1/admin"},
		{url: "https://api.example.com/v1/x/%2e%2e/admin", want: "/v1/admin"},
		{url: "https://api.example.com/v1/x/%2E%2e/admin", want: "/v1/admin"},
		{url: "https://api.example.com/v1/x/.%2E/admin", want: "/v1/admin"},
		{url: "https://api.example.com/v1/%2e/admin", want: "/v1/admin"},
		{url: "https://API.Example.COM/v1/admin", want: "/v1/admin"},
		{url: "https://api.example.com./v1/admin", want: "/v1/admin"},
		{url: "https://api.example.com:8443/v1/admin", want: "/v1/admin"},
		{url: "https://user:pw@api.example.com/v1/admin", want: "/v1/admin"},
		{url: "https://api.example.com/v1//admin", want: "/v1/admin"},
		{url: "https://api.example.com//v1/admin", want: "/v1/admin"},
		{url: `https://api.example.com/v1\admin`, want: "/v1/admin"},
		{url: `https://api.example.com/v1/x\..\admin`, want: "/v1/admin"},
		{url: "https://api.example.com/../v1/admin", want: "/v1/admin"},
		{url: "https://api.example.com/v1/admin?x=/../public", want: "/v1/admin"},
		{url: "https://api.example.com/v1/admin#/../public", want: "/v1/admin"},
		{url: "https://api.example.com/v1/x//../admin", wantErr: `empty segments ("//") are kept`},
		{url: "https://api.example.com/v1%2Fadmin", wantErr: "encoded slash or backslash"},
		{url: "https://api.example.com/v1/x%2f..%2fadmin", wantErr: "encoded slash or backslash"},
		{url: "https://api.example.com/v1/x%5C..%5Cadmin", wantErr: "encoded slash or backslash"},
		{url: "https://api.example.com/v1/x/%252e%252e/admin", wantErr: "encoded percent sign"},
		{url: "https://api.example.com/v1/x/%25%32%65%25%32%65/admin", wantErr: "encoded percent sign"},
		{url: "https://api.example.com/v1/x/%252%65%25%32e/admin", wantErr: "encoded percent sign"},
		{url: "https://api.example.com/v1%25%32%66admin", wantErr: "encoded percent sign"},
		{url: "https://api.example.com/v1/x/..;/admin", wantErr: `holds a ";"`},
		{url: "https://api.example.com/v1;x/admin", wantErr: `holds a ";"`},
		{url: "https://api.example.com/v1/admin%00.txt", wantErr: "encoded control character"},
		{url: "https://api.example.com/v1/x/..%3b/admin", wantErr: `holds an encoded ";"`},
		{url: "https://api.example.com/v1/x/%2e%2e%3B/admin", wantErr: `holds an encoded ";"`},
		{url: "https://api.example.com/v1/x/\uff0e\uff0e/admin", wantErr: "maps Unicode to ASCII"},
		{url: "https://api.example.com/v1/x/%EF%BC%8E%EF%BC%8E/admin", wantErr: "maps Unicode to ASCII"},
		{url: "https://api.example.com/v1/x\uff0f..\uff0fadmin", wantErr: "maps Unicode to ASCII"},
		{url: "https://api.example.com/v1/x\u2215..\u2215admin", wantErr: "maps Unicode to ASCII"},
		{url: "https://api.example.com/v1/x\u2044..\u2044admin", wantErr: "maps Unicode to ASCII"},
		{url: "https://api.example.com/v1/x/\u2025/admin", wantErr: "maps Unicode to ASCII"},
		{url: "https://api.example.com/v1/x/\ufe52\ufe52/admin", wantErr: "maps Unicode to ASCII"},
		{url: "https://api.example.com/v1/x\uff3c..\uff3cadmin", wantErr: "maps Unicode to ASCII"},
		{url: "https://api.example.com/v1/\uff41dmin", wantErr: "maps Unicode to ASCII"},
		{url: "https://api.example.com/\u2174\u2160/admin", wantErr: "maps Unicode to ASCII"},
		{url: "https://api.example.com/v1/x/%0a/../admin", wantErr: "encoded control character"},
		{url: "https://api.example.com/v1/%c0%ae%c0%ae/admin", wantErr: "not UTF-8"},
		{url: "https://api.example.com/v1/admin./", wantErr: "ends in a dot or a space"},
		{url: "https://api.example.com/v1/admin../x", wantErr: "ends in a dot or a space"},
		{url: "https://api.example.com/v1/admin%20/", wantErr: "ends in a dot or a space"},
		{url: "https://api.example.com/v1/admin%2e%20", wantErr: "ends in a dot or a space"},
		{url: "https://api.example.com/v1/x/..%20/admin", wantErr: "ends in a dot or a space"},
		{url: "https://api.example.com/v1/x/.../admin", wantErr: "ends in a dot or a space"},
		{url: "https://api.example.com/v1/admin::$DATA", wantErr: `":$"`},
		{url: "https://api.example.com/v1/admin:$i30:$INDEX_ALLOCATION/x", wantErr: `":$"`},
		{url: "https://api.example.com/v1/admin%3A%3A%24DATA", wantErr: `":$"`},
		{url: `foo://api.example.com/v1/x\..\admin`, wantErr: "backslash"},
		{url: "https://api.example.com/v1/%zzadmin", wantErr: "url_path: invalid URL"},
		{url: "https:/api.example.com/v1/admin", wantErr: "url_path: \"https:/api.example.com/v1/admin\" has no host to net/url"},
		{url: "https://0x7f.1/v1/admin", wantErr: "is not a dotted quad"},
	} {
		v := urlPath(types.String(tt.url))
		if tt.wantErr != "" {
			if assert.True(t, types.IsError(v), "%s: %v", tt.url, v) {
				assert.Contains(t, v.(*types.Err).Error(), tt.wantErr, tt.url)
			}
			_, err := p.Eval(ctx, &TurnVars{Input: TurnInput{Text: tt.url}})
			assert.Error(t, err, tt.url)
			continue
		}
		assert.Equal(t, types.String(tt.want), v, tt.url)
		got, err := p.Eval(ctx, &TurnVars{Input: TurnInput{Text: tt.url}})
		require.NoError(t, err, tt.url)
		assert.Equal(t, true, got, tt.url)
	}
	for _, tt := range []struct{ url, want string }{
		{"https://api.example.com/v1/administrators/../public", "/v1/public"},
		{"https://api.example.com/v1/admin/..", "/v1/"},
		{"https://api.example.com/v1/public/a%20b/caf%C3%A9", "/v1/public/a b/café"},
		{"https://api.example.com/v1/public?next=/v1/admin", "/v1/public"},
		{"https://api.example.com/V1/ADMIN", "/V1/ADMIN"},
		{"https://api.example.com", "/"},
		{"https://api.example.com?q=1", "/"},
		{"file:///etc/./passwd", "/etc/passwd"},
		{"https://api.example.com/v1/public/a.b/v1.2/x:y", "/v1/public/a.b/v1.2/x:y"},
		{"foo://h", ""},
		{"/v1/x/../public", "/v1/public"},
	} {
		v := urlPath(types.String(tt.url))
		assert.Equal(t, types.String(tt.want), v, tt.url)
		got, err := p.Eval(ctx, &TurnVars{Input: TurnInput{Text: tt.url}})
		require.NoError(t, err, tt.url)
		assert.Equal(t, false, got, tt.url)
	}
	v := urlPath(types.String("mailto:admin@example.com"))
	if assert.True(t, types.IsError(v)) {
		assert.Contains(t, v.(*types.Err).Error(), "no path a server routes")
	}
	// A relative URL resolved against an http one reads its backslashes
	// as slashes: "/v1/x/../admin".
	v = urlPath(types.String(`/v1/x\..\admin`))
	if assert.True(t, types.IsError(v)) {
		assert.Contains(t, v.(*types.Err).Error(), "backslash")
	}
}

// url_path never returns a path with a dot segment or repeated slashes
// (where keeping empty segments would change the result it refuses the
// URL); it reads the path net/url does; on a URL of a special
// scheme written without escapes, backslashes, semicolons or repeated
// slashes, it agrees with net/url's path cleaned by path.Clean (but for a
// trailing slash, which it keeps).
func FuzzURLPath(f *testing.F) {
	for _, s := range []string{"https://api.example.com/v1/x/../admin", "https://api.example.com/v1/%61dmin",
		"https://api.example.com/v1/x/%2e%2e/admin", `http://h/v1\..\admin`, "http://h/v1//../admin",
		"http://h/v1%2Fadmin", "http://h/..;/admin", "http://h/%252e", "http://h/%25%32%65", "http://h/%00", "http://h/..%3B/admin", "http://h/%EF%BC%8E%EF%BC%8E/admin", "file:///etc/../x",
		"foo://h/a/../b", `foo://h/a\..\b`, "a/../../b", "http://h/admin./", "http://h/admin::$DATA", "mailto:x", "http://h/a/b/.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if u, err := url.Parse(s); err == nil && u.Opaque == "" {
			// The path as written is the one net/url decodes.
			un, err := url.PathUnescape(rawPath(s, u))
			require.NoError(t, err, s)
			require.Equal(t, u.Path, un, s)
		}
		v := urlPath(types.String(s))
		if types.IsError(v) {
			return
		}
		p := string(v.(types.String))
		require.NotContains(t, p, "//", "%q: %q", s, p)
		require.NotContains(t, p, ";", "%q: %q", s, p)
		// Decoded again, the path is the same: no "%" before two hex digits.
		again, err := url.PathUnescape(p)
		require.True(t, err != nil || again == p, "%q: %q", s, p)
		_, _, lookalike := asciiLookalike(p)
		require.False(t, lookalike, "%q: %q", s, p)
		require.NotContains(t, p, `\`, "%q: %q", s, p)
		for _, seg := range strings.Split(p, "/") {
			require.NotEqual(t, "..", seg, "%q: %q", s, p)
			require.NotEqual(t, ".", seg, "%q: %q", s, p)
			require.Empty(t, windowsAlias(seg), "%q: %q", s, p)
		}
		u, err := url.Parse(s)
		require.NoError(t, err, s)
		if !isSpecialScheme(u.Scheme) {
			return
		}
		require.True(t, strings.HasPrefix(p, "/"), "%q: %q", s, p)
		if raw := rawPath(s, u); strings.ContainsAny(raw, `%\;`) || strings.Contains(raw, "//") {
			return
		}
		require.Equal(t, path.Clean("/"+u.Path), path.Clean(p), "%q: %q", s, p)
	})
}
