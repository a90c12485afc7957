package wire

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ErrOtherOrigin is in the error of a request whose redirect pointed to
// another origin than the request's own: the redirect was not followed.
var ErrOtherOrigin = errors.New("the server redirected to another origin")

// maxRedirects is the most redirects within an origin that are followed
// (net/http's own bound).
const maxRedirects = 10

// SameOrigin reports whether a and b have the same scheme, host and port
// (a scheme's default port when none is written).
func SameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// CheckRedirect is the http.Client.CheckRedirect of every client that
// sends a request upstream (a provider's API, an MCP server, a
// classifier): it follows a redirect within the origin (scheme, host and
// port) of the request that started it, at most 10, and refuses one to
// another origin with ErrOtherOrigin. A request carries its credentials
// (an API key, a server's headers) and a 307 or 308 posts its body (the
// prompt, a call's arguments) again, a 301, 302 or 303 sends a Referer
// naming the upstream: an upstream redirecting elsewhere (compromised,
// misconfigured, or with an open redirect) would hand them to another host.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	switch {
	case len(via) >= maxRedirects:
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	case !SameOrigin(req.URL, via[0].URL):
		return fmt.Errorf("%w (%s://%s); a redirect is followed within the origin of the request only",
			ErrOtherOrigin, req.URL.Scheme, req.URL.Host)
	}
	return nil
}

// SameOriginClient returns a copy of hc whose redirects CheckRedirect
// checks first, then hc's own CheckRedirect (when it has one); a nil hc
// is a new client with a clone of http.DefaultTransport. hc itself is left
// as it is: it may be the host's, shared with other uses.
func SameOriginClient(hc *http.Client) *http.Client {
	if hc == nil {
		return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), CheckRedirect: CheckRedirect}
	}
	c := *hc
	if next := hc.CheckRedirect; next != nil {
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if err := CheckRedirect(req, via); err != nil {
				return err
			}
			return next(req, via)
		}
	} else {
		c.CheckRedirect = CheckRedirect
	}
	return &c
}
