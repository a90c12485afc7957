package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A host pattern anchored at its end is loose where its name does not
// begin at a label boundary: the probe it is tried on is the host named.
func TestLooseHostSuffix(t *testing.T) {
	assertProbes(t, looseHostSuffix, [][2]string{
		{`example\.com$`, "evilexample.com"},
		{`example\.(com|org)$`, "evilexample.com"},
		{`^.*example\.com$`, "evilexample.com"},
		{`^a\.example\.com$|example\.org$`, "evilexample.org"},
		{`[a-z]example\.com\z`, "evilaexample.com"},
		{`(^|\.)example\.com$`, ""},
		{`\.example\.com$`, ""},
		{`^example\.com$`, ""},
		{`^(api|www)\.example\.com$`, ""},
		{`^[a-z]+\.example\.com$`, ""},
		{`(`, ""},
	})
}

// A pattern a whole URL is matched with is loose where the name of the
// host it matches does not begin at a label boundary: the URL it is tried
// on names the host that passes. One whose first label may be any label
// ([a-z]+\.example\.com), or whose name begins after a dot, is not.
func TestLooseURLHost(t *testing.T) {
	assertProbes(t, looseURLHost, [][2]string{
		{`^https://[^/]*example\.com/`, "https://evilexample.com/"},
		{`^https://.*example\.com/.*$`, "https://evilexample.com/"},
		{`^https?://[a-z]*example\.com(/|$)`, "http://evilexample.com/"},
		{`^https://[^/@]*@?[a-z]*example\.com/`, "https://evilexample.com/"},
		{`(?i)^HTTPS://[^/]*Example\.com/`, "https://evilexample.com/"},
		{`^https://example\.com/`, ""},
		{`^https://(www\.)?example\.com/`, ""},
		{`^https://([^/.]+\.)*example\.com/`, ""},
		{`^https://([a-z]+\.)*example\.com/`, ""},
		{`^https://[^/]*\.example\.com/`, ""},
		{`^https://[a-z]+\.example\.com/`, ""},
		{`^https://[a-z0-9-]+\.example\.com(:[0-9]+)?/.*$`, ""},
		{`^/srv/data/.*$`, ""},
		{`^[a-z]+$`, ""},
		{`(`, ""},
	})
}

// A pattern a whole URL is matched with is loose where it lets the host's
// name go on: the URL it is tried on names another host. One that ends
// the host (a /, (/|$), a port, $) is not.
func TestHostGoesOn(t *testing.T) {
	assertProbes(t, hostGoesOn, [][2]string{
		{`^https://api\.example\.com.*`, "https://api.example.com.evil.example"},
		{`^https://api\.example\.com(:\d+)?.*`, "https://api.example.com.evil.example"},
		{`(?i)^HTTPS://API\.example\.com.*`, "https://api.example.com.evil.example"},
		{`^https://api\.example\.com[^/]*/`, "https://api.example.com.evil.example/"},
		{`^https://api\.example\.com(/|$)`, ""},
		{`^https://api\.example\.com(:443)?/.*`, ""},
		{`^https://api\.example\.com(/.*)?$`, ""},
		{`^https://.*`, ""},
		{`^https://[^/]+/v1/`, ""},
		{`^https://[a-z0-9.-]+/v1/.*$`, ""},
		{`^https?://([a-z]+\.)*[a-z]+(:\d+)?/`, ""},
		{`^/srv/data/.*`, ""},
		{`(`, ""},
	})
}

// A pattern a host is matched with that is not anchored at its end
// matches a host that merely holds a name it allows.
func TestHostHolds(t *testing.T) {
	assertProbes(t, hostHolds, [][2]string{
		{`.*\.example\.com`, "a.example.com.evil.example"},
		{`.*example\.com.*`, "example.com.evil.example"},
		{`.*\.example\.com$`, ""},
		{`^(.+\.)?example\.com$`, ""},
		{`^[a-z0-9.-]+$`, ""},
		{`.*`, ""},
	})
}

// A constant a URL is tested to contain names a host where it has a
// scheme or is a host's name, not a file's, a path or a word.
func TestNamesHost(t *testing.T) {
	for s, want := range map[string]bool{
		"api.example.com":          true,
		"example.com":              true,
		"https://api.example.com/": true,
		"api.example.com:8443":     true,
		"report.pdf":               false,
		"openapi.yaml":             false,
		"config.yml":               false,
		"index.php":                false,
		"app.js":                   false,
		"feed.rss":                 false,
		"/v1/public/":              false,
		"debug":                    false,
		"127.0.0.1":                false,
	} {
		assert.Equal(t, want, namesHost(s), s)
	}
}

// assertProbes asserts that probe returns, for each pattern, the value it
// is loose on, or "" and false where it is not.
func assertProbes(t *testing.T, probe func(pattern string) (string, bool), cases [][2]string) {
	t.Helper()
	for _, tc := range cases {
		got, loose := probe(tc[0])
		assert.Equal(t, tc[1], got, tc[0])
		assert.Equal(t, tc[1] != "", loose, tc[0])
	}
}
