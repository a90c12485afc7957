package wire

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSameOrigin(t *testing.T) {
	u := func(s string) *url.URL {
		v, err := url.Parse(s)
		require.NoError(t, err)
		return v
	}
	assert.True(t, SameOrigin(u("https://api.example.com/v1"), u("https://API.example.com:443/other")), "a scheme's default port")
	assert.True(t, SameOrigin(u("http://127.0.0.1/a"), u("http://127.0.0.1:80/b")))
	assert.False(t, SameOrigin(u("https://api.example.com/v1"), u("http://api.example.com/v1")), "another scheme")
	assert.False(t, SameOrigin(u("http://127.0.0.1:9002/v1"), u("http://localhost:9002/v1")), "another host")
	assert.False(t, SameOrigin(u("http://127.0.0.1:9002/v1"), u("http://127.0.0.1:9003/v1")), "another port")
}

func TestSameOriginClient(t *testing.T) {
	req := func(s string) *http.Request {
		r, err := http.NewRequest(http.MethodPost, s, nil)
		require.NoError(t, err)
		return r
	}
	first := []*http.Request{req("http://127.0.0.1:9002/v1/messages")}

	own := SameOriginClient(nil)
	require.NotNil(t, own.Transport)
	assert.NotSame(t, http.DefaultTransport, own.Transport, "a transport of its own, closed with the client's idle connections")
	assert.NoError(t, own.CheckRedirect(req("http://127.0.0.1:9002/v1/messages/"), first))
	err := own.CheckRedirect(req("http://localhost:9003/steal"), first)
	require.ErrorIs(t, err, ErrOtherOrigin)
	assert.Contains(t, err.Error(), "http://localhost:9003")
	assert.ErrorContains(t, own.CheckRedirect(req("http://127.0.0.1:9002/v1"), make([]*http.Request, 10)), "stopped after 10 redirects")

	hostErr := errors.New("the host's own rule")
	host := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return hostErr }}
	c := SameOriginClient(host)
	assert.NotSame(t, host, c)
	assert.ErrorIs(t, c.CheckRedirect(req("http://localhost:9003/steal"), first), ErrOtherOrigin, "another origin is refused first")
	assert.ErrorIs(t, c.CheckRedirect(req("http://127.0.0.1:9002/moved"), first), hostErr, "within the origin, the host's rule applies")
	assert.ErrorIs(t, host.CheckRedirect(req("http://localhost:9003/steal"), first), hostErr, "the host's client is unchanged")
}
