package serve

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// DNS rebinding: a web page at http://evil.example:8080 whose owner then
// points evil.example at the gateway's address is, to the browser, of the
// same origin as the gateway (Origin and Host both name evil.example), so
// the cross-origin check lets it post, and read the answers. A keyless
// gateway serves whoever reaches it, so the Host header is its only way to
// tell such a page from its clients, on any address: the page may be open
// in any browser that reaches the gateway's network. The page has no key to
// send, so a gateway with keys refuses its calls; on loopback, the address
// a page reaches from the operator's own browser, its Host is checked
// whatever the keys, as the MCP handler does, since /metrics (the tenants
// and their spend) takes no key.
//
// hostRule is the check: where it applies, a request is served only when
// its Host is an IP address (a page's name cannot be one), localhost, or a
// name the operator allowed (Options.AllowHosts).
type hostRule struct {
	allowed map[string]bool
}

func newHostRule(names []string) (*hostRule, error) {
	h := &hostRule{allowed: make(map[string]bool, len(names))}
	for _, n := range names {
		if err := CheckHostName(n); err != nil {
			return nil, fmt.Errorf("serve: Options.AllowHosts: %w", err)
		}
		h.allowed[strings.ToLower(n)] = true
	}
	return h, nil
}

// CheckHostName reports whether n can be an allowed host name
// (Options.AllowHosts): a name alone, without a scheme, a port or a path.
func CheckHostName(n string) error {
	if n == "" || strings.ContainsAny(n, ":/ \t[]@") {
		return fmt.Errorf("%q is not a host name (a name alone, without a scheme or a port)", n)
	}
	return nil
}

// applies reports whether the Host of r is checked: it arrived at a
// loopback address, or the policy admits every caller.
func (h *hostRule) applies(r *http.Request, keyless bool) bool {
	if keyless {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && LoopbackAddr(local.String())
}

// LoopbackAddr reports whether addr, a host and a port (a listener's
// address, a connection's remote address, agentc serve's -listen), names a
// loopback host only: localhost, or a loopback IP, IPv4-mapped
// (::ffff:127.0.0.1) or with a zone (::1%lo). An address of every
// interface (":8080", "0.0.0.0:8080") or of another name is not one.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	host, _, _ = strings.Cut(host, "%")
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// accepts reports whether host (a Host header, perhaps with a port) is
// served where the check applies.
func (h *hostRule) accepts(host string) bool {
	if host == "" {
		return true // HTTP/1.0 without a Host: no page's name
	}
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	} else {
		name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	name = strings.ToLower(name)
	return name == "localhost" || h.allowed[name]
}

// foreignHost returns the refusal of r, or nil when it is served.
func (s *Server) foreignHost(r *http.Request, keyless bool) error {
	if !s.hosts.applies(r, keyless) || s.hosts.accepts(r.Host) {
		return nil
	}
	return fmt.Errorf("Host %q is not a name this gateway answers to (a web page's name pointed at it by DNS rebinding would be one): send Host localhost or an IP address, or start the gateway with -allowhost NAME", r.Host)
}

// errForeignHost is the code of a request whose Host is refused.
const errForeignHost errCode = "foreign_host"

// guardHost serves h only to a request whose Host is accepted, answering
// the others 421 in OpenAI's error format (the routes not registered
// through handle: /metrics).
func (s *Server) guardHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.foreignHost(r, s.cur.Load().keys.open()); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMisdirectedRequest)
			_ = json.NewEncoder(w).Encode(errorBody(apiOpenAI, http.StatusMisdirectedRequest, string(errForeignHost), "", err.Error()))
			return
		}
		h.ServeHTTP(w, r)
	})
}
