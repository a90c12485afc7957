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

// Where a prefix test lets nothing more through than written, it is not
// a cel/loose-match finding; each case lists the findings that remain.
func TestPrefixFindingsExcused(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		// A ".." test excuses a prefix test in another all() over the same list
		// where the predicate lets calls through (and so in an exists() where it
		// blocks them): each element passes both. One in an exists() where the
		// predicate lets calls through holds for one element alone, and one
		// over a filter() of the list for the elements it keeps: neither
		// excuses anything.
		{"DotsTestInAnotherMacro", `package p

tools: copy: {path_arg: "/files/*/path", args: {type: "object", required: ["files"], properties: {
	files: {type: "array", items: {type: "object", required: ["path"], properties: path: type: "string"}}
}}}
chains: tool: [
	{use: "guard", name: "ok1", tools: ["copy"], require: "args.files.all(f, f.path.startsWith('/srv/')) && args.files.all(g, !g.path.contains('..'))"},
	{use: "guard", name: "ok2", tools: ["copy"], deny: "args.files.exists(f, !f.path.startsWith('/srv/')) || args.files.exists(f, f.path.contains('..'))"},
	{use: "guard", name: "ok3", tools: ["copy"], require: "!args.files.exists(f, f.path.contains('..')) && args.files.all(f, f.path.startsWith('/srv/'))"},
	{use: "guard", name: "a", tools: ["copy"], require: "args.files.all(f, f.path.startsWith('/srv/')) && args.files.exists(f, !f.path.contains('..'))"},
	{use: "guard", name: "b", tools: ["copy"], require: "args.files.all(f, f.path.startsWith('/srv/')) && args.files.all(f, !f.path.contains('..') || f.path == 'x')"},
	{use: "guard", name: "c", tools: ["copy"], require: "args.files.all(f, f.path.startsWith('/srv/')) && args.files.filter(f, f.path != 'x').all(f, !f.path.contains('..'))"},
]
`, []string{
			"10 warning: the require lets the call through on startsWith('/srv/'), a prefix test of f.path",
			"11 warning: the require lets the call through on startsWith('/srv/'), a prefix test of f.path",
			"12 warning: the require lets the call through on startsWith('/srv/'), a prefix test of f.path",
		}},
		// A prefix whose last name ends in a character that no name goes on
		// from unnoticed ('/tmp/upload-', '/srv/report.', '/v1/items:') is a
		// partial name by design, and a pattern that says how the name may go on
		// ('^/tmp/agent[^/]*(/.*)?$') says what it lets through: neither is a
		// sibling finding. '.*' after the name is.
		{"SiblingDeliberate", `package p

tools: fetch: {url_arg: "url", args: {type: "object", required: ["url"], properties: url: type: "string"}}
tools: read_file: {path_arg: "path", args: {type: "object", required: ["path"], properties: path: type: "string"}}
chains: tool: [
	{use: "egress", allow: ["api.example.com"]},
	{use: "guard", name: "ok1", tools: ["read_file"], require: "path_clean(args.path).startsWith('/tmp/upload-') || path_clean(args.path).startsWith('/srv/report.') || path_clean(args.path).startsWith('/srv/x_')"},
	{use: "guard", name: "ok2", tools: ["fetch"], require: "url_path(args.url).startsWith('/v1/items:') || url_path(args.url).matches('^/v1/agent[^/]*(/.*)?$') || url_path(args.url).matches('^/v1/run-[-a-z0-9]+$')"},
	{use: "guard", name: "ok3", tools: ["read_file"], require: "args.path.startsWith('/tmp/upload-') && !args.path.contains('..')"},
	{use: "guard", name: "a", tools: ["fetch"], require: "url_path(args.url).matches('^/v1/public.*') || url_path(args.url).matches('^/v1/x.+$')"},
]
`, []string{
			"10 warning: the require lets the call through on the pattern '^/v1/public.*', which also holds for /v1/public-secrets",
			"10 warning: the require lets the call through on the pattern '^/v1/x.+$', which also holds for /v1/x-secrets",
		}},
		// A file_check layer refuses a path outside its roots: where the path
		// beside a prefix is outside the roots of every layer covering the tool,
		// a prefix test of it lets nothing more through and is not reported.
		{"SiblingOutsideFileCheckRoots", `package p

tools: read_file: {path_arg: "path", args: {type: "object", required: ["path"], properties: path: type: "string"}}
tools: write_file: {path_arg: "path", args: {type: "object", required: ["path"], properties: path: type: "string"}}
chains: tool: [
	{use: "file_check", name: "fc_read", tools: ["read_file"], roots: ["/srv/data", "/tmp"]},
	{use: "file_check", name: "fc_write", tools: ["write_file"], roots: ["/srv"]},
	{use: "guard", name: "ok", tools: ["read_file"], require: "args.path.startsWith('/srv/data')"},
	{use: "guard", name: "a", tools: ["write_file"], require: "args.path.startsWith('/srv/data')"},
	{use: "guard", name: "b", tools: ["read_file", "write_file"], require: "args.path.startsWith('/srv/data')"},
]
`, []string{
			"9 warning: the require lets the call through on startsWith('/srv/data'), a prefix test of args.path, the path write_file's path_arg names: it also holds for /srv/data-secrets",
			"10 warning: the require lets the call through on startsWith('/srv/data'), a prefix test of args.path",
		}},
		// A test beside a prefix test excuses its traversals where it fails
		// for each way out of the prefix, not only for the few spelled in full:
		// a test of the path for a word the usual traversal names (passwd,
		// admin) and of its end for .. lets /srv/data/../ and
		// /v1/public/%2e%2e through.
		{"DotsTestOfAWord", `package p

tools: fetch: {url_arg: "url", args: {type: "object", required: ["url"], properties: url: type: "string"}}
tools: read_file: {path_arg: "path", args: {type: "object", required: ["path"], properties: path: type: "string"}}
chains: tool: [
	{use: "egress", allow: ["api.example.com"]},
	{use: "guard", name: "ok", tools: ["fetch"], require: "args.url.startsWith('https://api.example.com/v1/public/') && !args.url.contains('..') && !args.url.contains('%')"},
	{use: "guard", name: "a", tools: ["fetch"], require: "args.url.startsWith('https://api.example.com/v1/public/') && !args.url.contains('..') && !args.url.contains('admin')"},
	{use: "guard", name: "b", tools: ["read_file"], require: "args.path.startsWith('/srv/data/') && !args.path.contains('passwd') && !args.path.endsWith('..')"},
	{use: "guard", name: "ok2", tools: ["read_file"], require: "args.path.startsWith('/srv/data/') && args.path.split('/').all(s, s != '..')"},
	{use: "guard", name: "ok3", tools: ["read_file"], deny: "!args.path.startsWith('/srv/data/') || !args.path.split('/').all(s, s != '..')"},
	{use: "guard", name: "c", tools: ["read_file"], require: "args.path.startsWith('/srv/data/') && args.path.split('/').exists(s, s != '..')"},
]
`, []string{
			"8 warning: the require lets the call through on startsWith('https://api.example.com/v1/public/'), a prefix test of args.url",
			"9 warning: the require lets the call through on startsWith('/srv/data/'), a prefix test of args.path",
			"12 warning: the require lets the call through on startsWith('/srv/data/'), a prefix test of args.path",
		}},
		// A conditional one branch of which never lets the call through holds
		// its condition beside the other: a ".." test there excuses a prefix test
		// in that branch, as a conjunct does.
		{"DotsTestInConditional", `package p

tools: read_file: {path_arg: "path", args: {type: "object", required: ["path", "note"], properties: {path: type: "string", note: type: "string"}}}
chains: tool: [
	{use: "guard", name: "ok1", tools: ["read_file"], require: "args.path.contains('..') ? false : args.path.startsWith('/srv/')"},
	{use: "guard", name: "ok2", tools: ["read_file"], require: "!args.path.contains('..') ? args.path.startsWith('/srv/') : false"},
	{use: "guard", name: "ok3", tools: ["read_file"], deny: "args.path.contains('..') ? true : !args.path.startsWith('/srv/')"},
	{use: "guard", name: "a", tools: ["read_file"], require: "args.path.contains('..') ? args.note == 'x' : args.path.startsWith('/srv/')"},
	{use: "guard", name: "b", tools: ["read_file"], require: "args.path.contains('..') ? true : args.path.startsWith('/srv/')"},
]
`, []string{
			"8 warning: the require lets the call through on startsWith('/srv/'), a prefix test of args.path",
			"9 warning: the require lets the call through on startsWith('/srv/'), a prefix test of args.path",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assertPrefixes(t, ruleFindings(t, tc.src, ruleLooseMatch), tc.want)
		})
	}
}

// A test of a path beside a prefix test excuses it where its exact key
// names every element the prefix test's names: the same element (a
// constant index, a macro's variable) or every element of the list.
func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		beside, test string
		covers       bool
	}{
		{"args.path", "args.path", true},
		{"args.path", "args.note", false},
		{"args.files[].path", "args.files[0].path", true},
		{"args.files[].path", "args.files[@3].path", true},
		{"args.files[].path", "args.files[?].path", true},
		{"args.files[0].path", "args.files[0].path", true},
		{"args.files[0].path", "args.files[1].path", false},
		{"args.files[0].path", "args.files[@3].path", false},
		{"args.files[@3].path", "args.files[@3].path", true},
		{"args.files[@3].path", "args.files[@4].path", false},
		{"args.files[?].path", "args.files[?].path", false},
		{"args.files[0].path", "args.files[].path", false},
		{"args.dirs[].files[0].path", "args.dirs[@1].files[0].path", true},
		{"args.dirs[2].files[].path", "args.dirs[1].files[0].path", false},
		{"args.files[0].path", "args.files[0].name", false},
		{"args.files", "args.files[0]", false},
	} {
		assert.Equal(t, tc.covers, covers(tc.beside, tc.test), "%s over %s", tc.beside, tc.test)
	}
}

// A pattern anchored at its start has the prefix it goes on from with a
// traversal: its literal start, or the longest part ending in a / of a
// value it matches that it also matches with a traversal after it. A
// pattern that lets no segment be .. has none.
func TestTraversalMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern       string
		url           bool
		prefix, probe string
	}{
		{`^/srv/data/`, false, "/srv/data/", "/srv/data/../../etc/passwd"},
		{`^/srv/data/[^/]+$`, false, "/srv/data/", "/srv/data/.."},
		{`^/srv/(data|reports)/`, false, "/srv/data/", "/srv/data/../../etc/passwd"},
		{`(?i)^/SRV/data/`, false, "/srv/data/", "/srv/data/../../etc/passwd"},
		{`^/srv/[a-z]+/`, false, "/srv/a/", "/srv/a/../../etc/passwd"},
		{`^/srv/data/.*\.csv$`, false, "/srv/data/", "/srv/data/../../x/.csv"},
		{`^https://api\.example\.com/v1/(public|docs)/.*\.json$`, true, "https://api.example.com/v1/public/", "https://api.example.com/v1/public/../../x/.json"},
		{`^/srv/(data|reports).*`, false, "/srv/data", "/srv/data/../../etc/passwd"},
		{`^/srv/[a-z]+.*$`, false, "/srv/a", "/srv/a/../../etc/passwd"},
		{`^https://api\.example\.com/v1/(public|docs).*`, true, "https://api.example.com/v1/public", "https://api.example.com/v1/public/../../admin"},
		{`^/srv/[a-z]+$`, false, "/srv/", ""},
		{`^/srv/(data|reports)/[a-z0-9_]+\.csv$`, false, "/srv/", ""},
		{`^/srv/data/([^./][^/]*/)*[^./][^/]*$`, false, "/srv/data/", ""},
		{`^/(etc|root)/passwd$`, false, "/etc/passwd", ""},
		{`^https://(api|www)\.example\.com/v1/admin`, true, "https://api.example.com/v1/admin", "https://api.example.com/v1/admin/../../admin"},
		{`(?i)^/etc/passwd$`, false, "/etc/passwd", ""},
		{`/srv/data/`, false, "", ""},
	} {
		prefix, probe, _ := traversalMatches(tc.pattern, tc.url)
		assert.Equal(t, tc.prefix, prefix, tc.pattern)
		assert.Equal(t, tc.probe, probe, tc.pattern)
	}
}

// A path_arg below the top of the arguments read through an optional
// index or field (args.files[?0].path.orValue(""), args.request.?path)
// is the path, as it is through a plain one: a prefix test of it is
// reported, and a ".." test of it beside one excuses it.
func TestPrefixFindingsOptional(t *testing.T) {
	got := ruleFindings(t, `package p

tools: copy: {path_arg: "/files/*/path", args: {type: "object", required: ["files"], properties: {
	files: {type: "array", items: {type: "object", required: ["path"], properties: path: type: "string"}}
}}}
tools: read: {path_arg: "/request/path", args: {type: "object", required: ["request"], properties: {
	request: {type: "object", properties: path: type: "string"}
}}}
chains: tool: [
	{use: "guard", name: "a", tools: ["copy"], require: "args.files[?0].path.orValue('').startsWith('/srv/')"},
	{use: "guard", name: "b", tools: ["read"], require: "args.request.?path.orValue('').startsWith('/srv/')"},
	{use: "guard", name: "ok1", tools: ["copy"], require: "args.files.size() == 1 && args.files[0].path.startsWith('/srv/') && !args.files[?0].path.orValue('').contains('..')"},
	{use: "guard", name: "ok2", tools: ["read"], require: "args.request.?path.value().startsWith('/srv/') && !args.request.?path.orValue('').contains('..')"},
]
`, ruleLooseMatch)
	assertPrefixes(t, got, []string{
		"10 warning: the require lets the call through on startsWith('/srv/'), a prefix test of args.files[?0].path.orValue(\"\")",
		"11 warning: the require lets the call through on startsWith('/srv/'), a prefix test of args.request.?path.orValue(\"\")",
	})
}
