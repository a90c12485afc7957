package egress

import (
	"net/netip"
	"strings"
)

// hostName is a normalized URL host: a lower-case ASCII name without a trailing dot, or an IP
// literal (then name is the address's canonical text).
type hostName struct {
	name string
	addr netip.Addr
}

func (h hostName) isIP() bool { return h.addr.IsValid() }

// normalizeHost lower-cases host, drops one trailing dot and vets its spelling. It returns a
// refusal reason instead of guessing whenever two parsers could disagree on the host:
// non-ASCII and full-width characters, numeric forms other than a canonical dotted quad,
// IPv4-mapped literals and IPv6 zones.
func normalizeHost(host string) (hostName, string) {
	if host == "" {
		return hostName{}, "missing host"
	}
	for _, r := range host {
		if r >= 0x80 {
			if isWideForm(r) {
				return hostName{}, "full-width characters in host"
			}
			return hostName{}, "non-ascii host (use the punycode form)"
		}
	}
	if strings.Contains(host, ":") {
		return ipv6Literal(host)
	}
	host = strings.ToLower(host)
	host = strings.TrimSuffix(host, ".")
	if host == "" || len(host) > 253 {
		return hostName{}, "invalid host name"
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if !validLabel(l) {
			return hostName{}, "invalid host name"
		}
	}
	if numericLabel(labels[len(labels)-1]) {
		addr, err := netip.ParseAddr(host)
		if err != nil || !addr.Is4() {
			return hostName{}, "ambiguous numeric host " + host
		}
		return hostName{name: addr.String(), addr: addr}, ""
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return hostName{}, "localhost name"
	}
	return hostName{name: host}, ""
}

func ipv6Literal(host string) (hostName, string) {
	if strings.Contains(host, "%") {
		return hostName{}, "zoned ipv6 address"
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !addr.Is6() {
		return hostName{}, "invalid ipv6 literal"
	}
	if addr.Is4In6() {
		return hostName{}, "ipv4-mapped ipv6 literal " + addr.String()
	}
	return hostName{name: addr.String(), addr: addr}, ""
}

// isWideForm reports the full-width and ideographic forms that some parsers fold to ASCII.
func isWideForm(r rune) bool {
	return (r >= 0xFF00 && r <= 0xFFEF) || r == 0x3002 || r == 0x3000
}

func validLabel(l string) bool {
	if l == "" || len(l) > 63 {
		return false
	}
	for i := 0; i < len(l); i++ {
		b := l[i]
		switch {
		case b >= 'a' && b <= 'z', b >= '0' && b <= '9', b == '-', b == '_':
		default:
			return false
		}
	}
	return true
}

// numericLabel reports a label that inet_aton-style parsers read as a number: decimal,
// octal (leading 0) or hexadecimal (0x). Such a final label makes the whole host numeric.
func numericLabel(l string) bool {
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		for i := 0; i < len(rest); i++ {
			if !isHex(rest[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(b byte) bool {
	return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f')
}
