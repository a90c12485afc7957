package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Dialer returns a copy of base (a zero net.Dialer when base is nil) whose ControlContext
// refuses, with a *DeniedError, every connection to an address that c refuses. The check runs
// on the address being connected to, after name resolution, so it also stops DNS rebinding.
// Only TCP and UDP networks are allowed. A Control or ControlContext already set on base
// still runs after the check.
func Dialer(base *net.Dialer, c *Checker) *net.Dialer {
	d := &net.Dialer{}
	if base != nil {
		*d = *base
	}
	prevCtx, prev := d.ControlContext, d.Control
	d.Control = nil
	d.ControlContext = func(ctx context.Context, network, address string, rc syscall.RawConn) error {
		if err := c.checkDial(network, address); err != nil {
			return err
		}
		if prevCtx != nil {
			return prevCtx(ctx, network, address, rc)
		}
		if prev != nil {
			return prev(network, address, rc)
		}
		return nil
	}
	return d
}

func (c *Checker) checkDial(network, address string) error {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return &DeniedError{Reason: fmt.Sprintf("network %q not allowed", network)}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &DeniedError{Reason: fmt.Sprintf("unparsable dial address %q", address)}
	}
	return c.CheckAddr(ap.Addr())
}

// HTTPClient returns an http.Client for tools that fetch URLs under the policy of c. Every
// request URL and every redirect target is checked with CheckURL; connections are made only
// to addresses re-resolved and re-checked at dial time, through Dialer. Environment proxies
// are ignored (a proxy would hide the real destination). At most 10 redirects are followed.
// Errors from Do wrap the *DeniedError, so errors.As finds it.
func HTTPClient(c *Checker) *http.Client {
	d := Dialer(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, c)
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           c.guardedDial(d),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: &guardedTransport{checker: c, base: tr},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("egress: stopped after 10 redirects")
			}
			return c.checkParsed(req.Context(), req.URL.String(), req.URL)
		},
	}
}

// guardedTransport checks each request URL before handing it to base.
type guardedTransport struct {
	checker *Checker
	base    *http.Transport
}

func (t *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.checker.checkParsed(req.Context(), req.URL.String(), req.URL); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of the underlying transport.
func (t *guardedTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// guardedDial resolves the host with the checker's resolver, refuses the whole set when any
// address is refused, and dials the addresses in order through the guarded dialer.
func (c *Checker) guardedDial(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, &DeniedError{Reason: fmt.Sprintf("unparsable dial address %q", address)}
		}
		h, reason := normalizeHost(host)
		if reason != "" {
			return nil, &DeniedError{Reason: reason}
		}
		addrs := []netip.Addr{h.addr}
		if !h.isIP() {
			if addrs, err = c.lookup(ctx, h.name); err != nil {
				return nil, err
			}
		}
		if reason := c.addrsReason(addrs); reason != "" {
			if !h.isIP() {
				reason = h.name + " resolves to " + reason
			}
			return nil, &DeniedError{Reason: reason}
		}
		var errs []error
		for _, a := range addrs {
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		return nil, errors.Join(errs...)
	}
}
