package compiler

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A host pattern anchored at its end is loose where its name does not
// begin at a label boundary: the probe it is tried on is the host named.
func TestLooseHostSuffix(t *testing.T) {
	for _, tc := range []struct {
		pattern, host string
	}{
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
	} {
		host, loose := looseHostSuffix(tc.pattern)
		assert.Equal(t, tc.host, host, tc.pattern)
		assert.Equal(t, tc.host != "", loose, tc.pattern)
	}
}

// A pattern a whole URL is matched with is loose where the name of the
// host it matches does not begin at a label boundary: the URL it is tried
// on names the host that passes. One whose first label may be any label
// ([a-z]+\.example\.com), or whose name begins after a dot, is not.
func TestLooseURLHost(t *testing.T) {
	for _, tc := range []struct {
		pattern, url string
	}{
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
	} {
		url, loose := looseURLHost(tc.pattern)
		assert.Equal(t, tc.url, url, tc.pattern)
		assert.Equal(t, tc.url != "", loose, tc.pattern)
	}
}
