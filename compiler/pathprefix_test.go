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
