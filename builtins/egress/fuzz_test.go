package egress

import (
	"context"
	"hash/fnv"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// fuzzResolver answers every name with addresses chosen by the name's hash,
// public and special ones mixed, and records what it answered.
type fuzzResolver struct {
	mu   sync.Mutex
	seen map[string][]netip.Addr
}

var fuzzAddrs = []netip.Addr{
	netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.1.2.3"),
	netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("2606:2800:220:1::1"), netip.MustParseAddr("::1"),
	netip.MustParseAddr("::ffff:127.0.0.1"), netip.MustParseAddr("100.64.0.1"), netip.MustParseAddr("8.8.8.8"),
	netip.MustParseAddr("fe80::1"), netip.MustParseAddr("0.0.0.0"),
}

func (r *fuzzResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(host))
	v := h.Sum32()
	addrs := []netip.Addr{fuzzAddrs[v%uint32(len(fuzzAddrs))]}
	if v&0x100 != 0 {
		addrs = append(addrs, fuzzAddrs[(v>>9)%uint32(len(fuzzAddrs))])
	}
	r.mu.Lock()
	r.seen[host] = append(r.seen[host], addrs...)
	r.mu.Unlock()
	return addrs, nil
}

// FuzzCheckURL: a URL the checker allows never leads to an address that is
// not global, whether the host is an IP literal or a name.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://api.example.com/v1", "http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:8080/",
		"http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://0x7f.1/", "http://2130706433/", "http://017700000001/",
		"http://localhost./", "http://example.com@127.0.0.1/", "http://127.1/", "http://[fe80::1%25eth0]/",
		"gopher://x", "http://xn--e1afmkfd.xn--p1ai/", "http://a.b.c.d.e.f/", "https://93.184.216.34:443/",
		"http:///path", "http://%31%32%37.0.0.1/", "HTTP://EXAMPLE.COM", "http://[0:0:0:0:0:ffff:7f00:1]/",
	} {
		f.Add(s)
	}
	r := &fuzzResolver{seen: map[string][]netip.Addr{}}
	c, err := New(Config{Allow: []string{"*"}, Resolver: r})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r.mu.Lock()
		clear(r.seen)
		r.mu.Unlock()
		if err := c.CheckURL(context.Background(), raw); err != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("allowed %q, which does not parse: %v", raw, err)
		}
		host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
		if a, err := netip.ParseAddr(host); err == nil {
			if reason := AddrReason(a.Unmap()); reason != "" {
				t.Fatalf("allowed %q: literal %s is %s", raw, a, reason)
			}
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for h, addrs := range r.seen {
			for _, a := range addrs {
				if reason := AddrReason(a.Unmap()); reason != "" {
					t.Fatalf("allowed %q: %s resolves to %s, %s", raw, h, a, reason)
				}
			}
		}
	})
}
