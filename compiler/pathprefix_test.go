package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The fix a URL prefix test is given names the host as url_host() returns
// it and the path url_path() is tested for, and the example a server
// routes below the prefix's path without beginning with the prefix. The
// path is the one url_path() returns, decoded and its slashes joined, so
// the test offered can hold.
func TestURLPrefixParts(t *testing.T) {
	for _, tc := range []struct{ prefix, host, path, example string }{
		{"https://api.example.com/v1/admin", "api.example.com", "/v1/admin", "https://api.example.com/v1/x/../admin"},
		{"https://api.example.com/v1/admin/", "api.example.com", "/v1/admin/", "https://api.example.com/v1/x/../admin/"},
		{"https://api.example.com/admin", "api.example.com", "/admin", "https://api.example.com/x/../admin"},
		{"https://ops@API.Example.com.:8443/v1/admin", "api.example.com", "/v1/admin", "https://ops@API.Example.com.:8443/v1/x/../admin"},
		{"http://[::1]/v1/admin", "::1", "/v1/admin", "http://[::1]/v1/x/../admin"},
		{"http://[::1]:80/v1", "::1", "/v1", "http://[::1]:80/x/../v1"},
		{"https://api.example.com/v1//%61dmin", "api.example.com", "/v1/admin", "https://api.example.com/v1//x/../%61dmin"},
		{"https://api.example.com/v1/%zz", "api.example.com", "/v1/%zz", "https://api.example.com/v1/x/../%zz"},
	} {
		host, path, example := urlPrefixParts(tc.prefix)
		assert.Equal(t, tc.host, host, tc.prefix)
		assert.Equal(t, tc.path, path, tc.prefix)
		assert.Equal(t, tc.example, example, tc.prefix)
	}
}

// A prefix test that lets calls through, whose constant does not end in
// a /, holds for the paths beside the one it names: the warning names one
// and the fix. Where the test also lets a traversal through, one warning
// says both, and the url_path() test it offers ends in a /.
func TestPrefixSiblingFindings(t *testing.T) {
	got := ruleFindings(t, `package p

tools: fetch: {url_arg: "url", args: {type: "object", required: ["url"], properties: url: type: "string"}}
tools: read_file: {path_arg: "path", args: {type: "object", required: ["path"], properties: path: type: "string"}}
chains: tool: [
	{use: "egress", allow: ["api.example.com"]},
	{use: "guard", name: "a", tools: ["fetch"], require: "url_path(args.url).startsWith('/v1/public')"},
	{use: "guard", name: "b", tools: ["fetch"], require: "args.url.startsWith('https://api.example.com/v1/public')"},
	{use: "guard", name: "c", tools: ["read_file"], require: "args.path.startsWith('/srv/data') && !args.path.contains('..')"},
	{use: "guard", name: "ok", tools: ["fetch"], deny: "url_path(args.url).startsWith('/v1/admin')"},
]
`, ruleLooseMatch)
	want := []string{
		"7 warning: the require lets the call through on startsWith('/v1/public'), which also holds for /v1/public-secrets, beside /v1/public rather than below it, as the prefix does not end in a /; end the prefix with a / ('/v1/public/'), or write == '/v1/public' || startsWith('/v1/public/') where /v1/public itself is meant",
		"8 warning: the require lets the call through on startsWith('https://api.example.com/v1/public'), a prefix test of args.url, the URL fetch's url_arg names: it also holds for a URL whose path goes on with ../",
		"9 warning: the require lets the call through on startsWith('/srv/data'), a prefix test of args.path, the path read_file's path_arg names: it also holds for /srv/data-secrets, beside /srv/data rather than below it",
	}
	if assertPrefixes(t, got, want) {
		assert.Contains(t, got[1], "url_path(args.url).startsWith('/v1/public/')")
		assert.Contains(t, got[1], "; it also holds for https://api.example.com/v1/public-secrets, beside")
	}
}
