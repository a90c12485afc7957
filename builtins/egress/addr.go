package egress

import (
	"net/netip"
)

// addrRule names one special-purpose address range.
type addrRule struct {
	prefix netip.Prefix
	reason string
}

// Reasons of the ranges no deployment may reach, allow_private or not
// (privatePrefixes).
const (
	reasonMetadata    = "cloud metadata address"
	reasonUnspecified = "unspecified address"
)

// v4Rules lists the IPv4 ranges that are never a valid egress destination. More specific
// ranges come first so that the reason names the most precise category.
var v4Rules = []addrRule{
	{netip.MustParsePrefix("169.254.169.254/32"), reasonMetadata},
	{netip.MustParsePrefix("169.254.170.2/32"), reasonMetadata},
	{netip.MustParsePrefix("100.100.100.200/32"), reasonMetadata},
	{netip.MustParsePrefix("0.0.0.0/32"), reasonUnspecified},
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade nat address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "ietf protocol assignment address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation address"},
	{netip.MustParsePrefix("192.31.196.0/24"), "as112 address"},
	{netip.MustParsePrefix("192.52.193.0/24"), "amt address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private address"},
	{netip.MustParsePrefix("192.175.48.0/24"), "as112 address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast address"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved address"},
}

// v6Rules lists the IPv6 ranges that are refused outright. Ranges that embed an IPv4 address
// (NAT64 64:ff9b::/96, 6to4 2002::/16) are handled in v6Reason, not here.
var v6Rules = []addrRule{
	{netip.MustParsePrefix("::/128"), reasonUnspecified},
	{netip.MustParsePrefix("::1/128"), "loopback address"},
	{netip.MustParsePrefix("::/96"), "ipv4-compatible ipv6 address"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "ipv4-translated ipv6 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use nat64 address"},
	{netip.MustParsePrefix("100::/64"), "discard-only address"},
	{netip.MustParsePrefix("2001::/32"), "teredo address"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation address"},
	{netip.MustParsePrefix("2001::/23"), "ietf protocol assignment address"},
	{netip.MustParsePrefix("3fff::/20"), "documentation address"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), reasonMetadata},
	{netip.MustParsePrefix("fc00::/7"), "unique local address"},
	{netip.MustParsePrefix("fe80::/10"), "link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "multicast address"},
}

var (
	nat64Prefix     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFourPrefix = netip.MustParsePrefix("2002::/16")
	globalUnicastV6 = netip.MustParsePrefix("2000::/3")
)

// AddrReason reports why addr is not a valid egress destination, or "" when it is a public
// unicast address. IPv4-mapped IPv6 addresses are judged by the IPv4 address they carry, as
// are NAT64 (64:ff9b::/96) and 6to4 (2002::/16) addresses; a zoned address is always refused.
func AddrReason(addr netip.Addr) string {
	if !addr.IsValid() {
		return "invalid address"
	}
	if addr.Zone() != "" {
		return "zoned ipv6 address"
	}
	if addr.Is4In6() {
		if r := v4Reason(addr.Unmap()); r != "" {
			return "ipv4-mapped " + r
		}
		return ""
	}
	if addr.Is4() {
		return v4Reason(addr)
	}
	return v6Reason(addr)
}

func v4Reason(addr netip.Addr) string {
	for _, r := range v4Rules {
		if r.prefix.Contains(addr) {
			return r.reason
		}
	}
	return ""
}

func v6Reason(addr netip.Addr) string {
	for _, r := range v6Rules {
		if r.prefix.Contains(addr) {
			return r.reason
		}
	}
	b := addr.As16()
	switch {
	case nat64Prefix.Contains(addr):
		v4 := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if r := v4Reason(v4); r != "" {
			return "nat64 address embedding " + r
		}
		return ""
	case sixToFourPrefix.Contains(addr):
		v4 := netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		if r := v4Reason(v4); r != "" {
			return "6to4 address embedding " + r
		}
		return ""
	case !globalUnicastV6.Contains(addr):
		return "non-global ipv6 address"
	}
	return ""
}
