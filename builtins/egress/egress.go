package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Resolver looks up the addresses of a host name. *net.Resolver satisfies it. network is
// "ip", "ip4" or "ip6".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Checker.
type Config struct {
	// Allow lists the hosts a URL may name. An entry is an exact host name
	// ("api.example.com"), a wildcard "*.example.com" that matches any name below
	// example.com (not example.com itself), an IP literal ("203.0.113.7", "2001:db8::1"), or
	// "*" for any host. Any entry may carry a port ("api.example.com:8443",
	// "[2001:db8::1]:443"), which then restricts the URL's effective port (80 for http and 443
	// for https when the URL names none). Matching is case-insensitive and ignores one
	// trailing dot. An empty Allow permits no host at all: write "*" to rely on the address
	// checks alone.
	Allow []string

	// AllowPrivate exempts addresses inside these prefixes from the special-range refusal. It
	// exists for tests that run servers on 127.0.0.1 and for deployments that deliberately
	// reach one internal network; leave it empty in production. IPv4-mapped addresses are
	// matched by the IPv4 address they carry.
	AllowPrivate []netip.Prefix

	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
}

// DeniedError reports a URL or a connection that the egress policy refuses.
type DeniedError struct {
	// URL is the URL that was refused; it is empty when a dial was refused.
	URL string
	// Reason says why, in lower case ("loopback address 127.0.0.1", "host not allowed").
	Reason string
}

// Error returns "egress: <url> denied: <reason>" (or "egress: denied: <reason>" for a dial).
func (e *DeniedError) Error() string {
	if e.URL == "" {
		return "egress: denied: " + e.Reason
	}
	return fmt.Sprintf("egress: %q denied: %s", e.URL, e.Reason)
}

// Checker vets URLs and addresses against an egress policy. It is safe for concurrent use.
type Checker struct {
	anyHost      bool
	exact        map[string][]int // host -> allowed ports; 0 means any port
	wildcards    []wildcardRule
	allowPrivate []netip.Prefix
	resolver     Resolver
}

type wildcardRule struct {
	suffix string // ".example.com"
	port   int    // 0 means any port
}

// New builds a Checker. It fails when an Allow entry is malformed (empty, a wildcard other
// than a leading "*.", a bad port, a non-ASCII or otherwise invalid host) or when an
// AllowPrivate prefix is invalid.
func New(cfg Config) (*Checker, error) {
	c := &Checker{exact: map[string][]int{}, resolver: cfg.Resolver}
	if c.resolver == nil {
		c.resolver = net.DefaultResolver
	}
	for _, entry := range cfg.Allow {
		if err := c.addAllow(entry); err != nil {
			return nil, fmt.Errorf("egress: allow entry %q: %w", entry, err)
		}
	}
	for _, p := range cfg.AllowPrivate {
		if !p.IsValid() {
			return nil, fmt.Errorf("egress: invalid allow_private prefix %v", p)
		}
		c.allowPrivate = append(c.allowPrivate, p.Masked())
	}
	return c, nil
}

func (c *Checker) addAllow(entry string) error {
	host, port, err := splitAllowEntry(strings.TrimSpace(entry))
	if err != nil {
		return err
	}
	if host == "*" {
		if port != 0 {
			return errors.New("\"*\" cannot carry a port")
		}
		c.anyHost = true
		return nil
	}
	if suffix, ok := strings.CutPrefix(host, "*."); ok {
		h, reason := normalizeHost(suffix)
		if reason != "" {
			return errors.New(reason)
		}
		if h.isIP() {
			return errors.New("a wildcard cannot name an ip address")
		}
		c.wildcards = append(c.wildcards, wildcardRule{suffix: "." + h.name, port: port})
		return nil
	}
	if strings.Contains(host, "*") {
		return errors.New("a wildcard must be a leading \"*.\"")
	}
	h, reason := normalizeHost(host)
	if reason != "" {
		return errors.New(reason)
	}
	c.exact[h.name] = append(c.exact[h.name], port)
	return nil
}

// splitAllowEntry separates an optional port from an allow entry.
func splitAllowEntry(entry string) (string, int, error) {
	if entry == "" {
		return "", 0, errors.New("empty entry")
	}
	hasPort := strings.HasPrefix(entry, "[") || strings.Count(entry, ":") == 1
	if !hasPort {
		return entry, 0, nil
	}
	if strings.HasPrefix(entry, "[") && strings.HasSuffix(entry, "]") {
		return entry[1 : len(entry)-1], 0, nil
	}
	host, portText, err := net.SplitHostPort(entry)
	if err != nil {
		return "", 0, errors.New("invalid host:port")
	}
	port, ok := parsePort(portText)
	if !ok {
		return "", 0, fmt.Errorf("invalid port %q", portText)
	}
	return host, port, nil
}

func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return n, true
}

// CheckURL vets raw as a destination: it returns nil when raw is an http or https URL
// without userinfo whose host is allowed and resolves only to public addresses. A refusal is
// a *DeniedError. A failed lookup is returned wrapped (not as a *DeniedError) so that callers
// can treat it as a transient failure; when ctx is cancelled the error wraps ctx.Err().
func (c *Checker) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &DeniedError{URL: raw, Reason: "invalid url"}
	}
	return c.checkParsed(ctx, raw, u)
}

// target is a vetted URL destination.
type target struct {
	host hostName
	port int
}

func (c *Checker) checkParsed(ctx context.Context, raw string, u *url.URL) error {
	t, reason := c.checkTarget(u)
	if reason != "" {
		return &DeniedError{URL: raw, Reason: reason}
	}
	if t.host.isIP() {
		if reason := c.addrReason(t.host.addr); reason != "" {
			return &DeniedError{URL: raw, Reason: reason + " " + t.host.addr.String()}
		}
		return nil
	}
	addrs, err := c.lookup(ctx, t.host.name)
	if err != nil {
		return err
	}
	if reason := c.addrsReason(addrs); reason != "" {
		return &DeniedError{URL: raw, Reason: fmt.Sprintf("%s resolves to %s", t.host.name, reason)}
	}
	return nil
}

// checkTarget applies every check that needs no lookup.
func (c *Checker) checkTarget(u *url.URL) (target, string) {
	switch u.Scheme {
	case "http", "https":
	case "":
		return target{}, "missing scheme"
	default:
		return target{}, fmt.Sprintf("scheme %q not allowed", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return target{}, "missing host"
	}
	if u.User != nil {
		return target{}, "userinfo not allowed"
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, ok := parsePort(p)
		if !ok {
			return target{}, fmt.Sprintf("invalid port %q", p)
		}
		port = n
	}
	h, reason := normalizeHost(u.Hostname())
	if reason != "" {
		return target{}, reason
	}
	if !c.allowed(h, port) {
		return target{}, fmt.Sprintf("host %s port %d not allowed", h.name, port)
	}
	return target{host: h, port: port}, ""
}

func (c *Checker) allowed(h hostName, port int) bool {
	if c.anyHost {
		return true
	}
	for _, p := range c.exact[h.name] {
		if p == 0 || p == port {
			return true
		}
	}
	if h.isIP() {
		return false
	}
	for _, w := range c.wildcards {
		if (w.port == 0 || w.port == port) && strings.HasSuffix(h.name, w.suffix) {
			return true
		}
	}
	return false
}

func (c *Checker) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	addrs, err := c.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("egress: resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("egress: resolve %s: no addresses", host)
	}
	return addrs, nil
}

// CheckAddr reports whether a connection to addr is allowed: nil for a public unicast address
// (or one inside Config.AllowPrivate), a *DeniedError otherwise.
func (c *Checker) CheckAddr(addr netip.Addr) error {
	if reason := c.addrReason(addr); reason != "" {
		return &DeniedError{Reason: reason + " " + addr.String()}
	}
	return nil
}

func (c *Checker) addrReason(addr netip.Addr) string {
	plain := addr.Unmap()
	for _, p := range c.allowPrivate {
		if p.Contains(plain) {
			return ""
		}
	}
	return AddrReason(addr)
}

// addrsReason refuses the whole set when any address is refused: the dialer may pick any.
func (c *Checker) addrsReason(addrs []netip.Addr) string {
	for _, a := range addrs {
		if reason := c.addrReason(a); reason != "" {
			return reason + " " + a.String()
		}
	}
	return ""
}
