package compiler

import "testing"

// A url_host(), lower() or lowerAscii() result compared with a constant it
// never equals, or tested for a part it never holds: url_host() returns the
// host lower-cased, without a trailing dot, so a deny with 'Evil.com' never
// fires (an error) and a require with 'API.example.com' refuses every call
// (a warning: it only blocks more). A dead constant of a list another of
// whose constants may match is a warning. Constants of the fold's form are
// not reported, nor a non-ASCII capital under lowerAscii(), which keeps it.
func TestFoldedLiterals(t *testing.T) {
	got := argValueFindings(t, `package p

tools: fetch: {
	url_arg: "url"
	args: {type: "object", required: ["url", "user"], properties: {url: {type: "string"}, user: {type: "string"}}}
}
chains: tool: [
	{use: "guard", name: "g1", tools: ["fetch"], deny: "url_host(args.url) == 'Evil.com'"},
	{use: "guard", name: "g2", tools: ["fetch"], deny: "url_host(args.url) in ['evil.com', 'https://bad.com/']"},
	{use: "guard", name: "g3", tools: ["fetch"], deny: "lower(args.user) == 'Admin'"},
	{use: "guard", name: "g4", tools: ["fetch"], deny: "url_host(args.url).endsWith('.Evil.com')"},
	{use: "guard", name: "g5", tools: ["fetch"], deny: "url_host(args.url) == 'evil.com.'"},
	{use: "guard", name: "g6", tools: ["fetch"], require: "url_host(args.url) == 'API.example.com'"},
	{use: "guard", name: "g7", tools: ["fetch"], deny: "!(args.user.lowerAscii() != 'Root')"},
	{use: "guard", name: "g8", tools: ["fetch"], deny: "url_host(args.url) in ['evil.com:8443', '::1', '2001:db8::1']"},
	{use: "guard", name: "ok", tools: ["fetch"], deny: "url_host(args.url).endsWith(':1') || url_host(args.url) == 'evil.com' || lower(args.user).contains('adm') || args.user.lowerAscii() == 'émile' || args.user.lowerAscii() == 'Émile' || url_host(args.url).startsWith('evil.')"},
]
`)
	want := []string{
		"8 error: url_host() never returns a value that is 'Evil.com': it returns the value lower-cased, so url_host(args.url) == 'Evil.com' is always false; did you mean 'evil.com'?",
		"9 warning: url_host() never returns a value that is 'https://bad.com/': a host holds no \"/\", so 'https://bad.com/' in the list never matches (its other values may); did you mean 'bad.com'?",
		"10 error: lower() never returns a value that is 'Admin'",
		"11 error: url_host() never returns a value that holds '.Evil.com': it returns the value lower-cased, so url_host(args.url).endsWith('.Evil.com') is always false; did you mean '.evil.com'?",
		"12 error: url_host() never returns a value that is 'evil.com.': it returns the host without a trailing dot",
		"13 warning: url_host() never returns a value that is 'API.example.com'",
		"14 error: lowerAscii() never returns a value that is 'Root'",
		"15 warning: url_host() never returns a value that is 'evil.com:8443': it returns the host without its port, so 'evil.com:8443' in the list never matches (its other values may); did you mean 'evil.com'?",
	}
	assertPrefixes(t, got, want)
}

// url_path() returns the path alone, decoded, its repeated slashes
// joined, its dot segments resolved and no ";": a deny testing it for a
// constant with a scheme, a "//", a whole "." or ".." segment, a ";", an
// escape, a backslash, a segment ending in a dot or a space or one holding
// ":$" never fires (an error). A constant whose "." or ".." may go on in the path (a
// startsWith() ending in "/..": "/..x") is not reported, nor capitals,
// which url_path() keeps.
func TestFoldedURLPathLiterals(t *testing.T) {
	got := argValueFindings(t, `package p

tools: fetch: {
	url_arg: "url"
	args: {type: "object", required: ["url"], properties: {url: {type: "string"}}}
}
chains: tool: [
	{use: "guard", name: "g1", tools: ["fetch"], deny: "url_path(args.url).startsWith('https://api.example.com/v1/admin')"},
	{use: "guard", name: "g2", tools: ["fetch"], deny: "url_path(args.url).startsWith('/v1//admin')"},
	{use: "guard", name: "g3", tools: ["fetch"], deny: "url_path(args.url) == '/v1/x/../admin'"},
	{use: "guard", name: "g4", tools: ["fetch"], deny: "url_path(args.url).contains('/./')"},
	{use: "guard", name: "g5", tools: ["fetch"], deny: "url_path(args.url).endsWith('/..')"},
	{use: "guard", name: "g6", tools: ["fetch"], deny: "url_path(args.url).contains(';')"},
	{use: "guard", name: "g7", tools: ["fetch"], require: "url_path(args.url) in ['/v1/public', '/v1//public']"},
	{use: "guard", name: "g8", tools: ["fetch"], deny: "url_path(args.url).startsWith('/v1/%61dmin')"},
	{use: "guard", name: "g9", tools: ["fetch"], deny: "url_path(args.url).startsWith('/v1/admin./')"},
	{use: "guard", name: "g10", tools: ["fetch"], deny: "url_path(args.url) == '/v1/admin::$DATA'"},
	{use: "guard", name: "g11", tools: ["fetch"], deny: "url_path(args.url).startsWith('/v1\\\\admin')"},
	{use: "guard", name: "g12", tools: ["fetch"], deny: "url_path(args.url).endsWith('/admin /')"},
	{use: "guard", name: "ok2", tools: ["fetch"], deny: "url_path(args.url).startsWith('/v1/admin.') || url_path(args.url).endsWith('.json') || url_path(args.url).contains('v1.2/x:y') || url_path(args.url) == '/v1/a.b'"},
	{use: "guard", name: "ok", tools: ["fetch"], deny: "url_path(args.url).startsWith('/V1/Admin') || url_path(args.url).startsWith('/v1/public/..') || url_path(args.url).endsWith('..x') || url_path(args.url).contains('..') || url_path(args.url) == '/v1/admin/' || url_path(args.url).matches('^/V1/')"},
]
`)
	want := []string{
		"8 error: url_path() never returns a value that holds 'https://api.example.com/v1/admin': it returns the path alone, without the scheme and host, so url_path(args.url).startsWith('https://api.example.com/v1/admin') is always false; did you mean '/v1/admin'?",
		"9 error: url_path() never returns a value that holds '/v1//admin': it joins repeated slashes, so url_path(args.url).startsWith('/v1//admin') is always false; did you mean '/v1/admin'?",
		"10 error: url_path() never returns a value that is '/v1/x/../admin': it resolves . and .. segments, so url_path(args.url) == '/v1/x/../admin' is always false",
		"11 error: url_path() never returns a value that holds '/./': it resolves . and .. segments",
		"12 error: url_path() never returns a value that holds '/..': it resolves . and .. segments",
		"13 error: url_path() never returns a value that holds ';': it refuses a path holding \";\"",
		"14 warning: url_path() never returns a value that is '/v1//public': it joins repeated slashes, so '/v1//public' in the list never matches (its other values may); did you mean '/v1/public'?",
		"15 error: url_path() never returns a value that holds '/v1/%61dmin': it returns the path decoded, and refuses one still holding an escape, so url_path(args.url).startsWith('/v1/%61dmin') is always false; did you mean '/v1/admin'?",
		"16 error: url_path() never returns a value that holds '/v1/admin./': it refuses a segment that ends in a dot or a space, which a Windows server drops, so url_path(args.url).startsWith('/v1/admin./') is always false; did you mean '/v1/admin/'?",
		"17 error: url_path() never returns a value that is '/v1/admin::$DATA': it refuses a segment holding \":$\", an NTFS stream to a Windows server, so url_path(args.url) == '/v1/admin::$DATA' is always false; did you mean '/v1/admin'?",
		"18 error: url_path() never returns a value that holds '/v1\\admin': it reads a backslash as a slash (and refuses one in a URL of another scheme), so url_path(args.url).startsWith('/v1\\admin') is always false; did you mean '/v1/admin'?",
		"19 error: url_path() never returns a value that holds '/admin /': it refuses a segment that ends in a dot or a space, which a Windows server drops, so url_path(args.url).endsWith('/admin /') is always false; did you mean '/admin/'?",
	}
	assertPrefixes(t, got, want)
}
