package egress

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeResolver answers from a fixed table; unknown names fail like a missing DNS record.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs, ok := f[host]; ok {
		return addrs, nil
	}
	return nil, errors.New("no such host")
}

// rebindingResolver answers first with a public address, then with later ones: the shape of
// a DNS rebinding attack.
type rebindingResolver struct {
	answers [][]netip.Addr
	calls   atomic.Int64
}

func (r *rebindingResolver) LookupNetIP(_ context.Context, _, _ string) ([]netip.Addr, error) {
	n := int(r.calls.Add(1)) - 1
	if n >= len(r.answers) {
		n = len(r.answers) - 1
	}
	return r.answers[n], nil
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// testResolver maps names used by the tests. Public answers use real public addresses; no
// test ever connects to them.
var testResolver = fakeResolver{
	"api.example.com":          addrs("93.184.216.34"),
	"files.example.com":        addrs("93.184.216.34"),
	"a.svc.example.com":        addrs("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"),
	"a.b.svc.example.com":      addrs("93.184.216.34"),
	"svc.example.com":          addrs("93.184.216.34"),
	"example.com":              addrs("93.184.216.34"),
	"nat64.example.com":        addrs("64:ff9b::5db8:d822"),
	"mapped.example.com":       addrs("::ffff:93.184.216.34"),
	"rebind.test":              addrs("127.0.0.1"),
	"127.0.0.1.nip.io":         addrs("127.0.0.1"),
	"192.168.0.1.xip.io":       addrs("192.168.0.1"),
	"metadata.google.internal": addrs("169.254.169.254"),
	"ip6-localhost":            addrs("::1"),
	"mixed.test":               addrs("93.184.216.34", "10.0.0.1"),
	"mapped-loopback.test":     addrs("::ffff:127.0.0.1"),
	"ula.test":                 addrs("fd12:3456:789a::1"),
	"ec2-v6-metadata.test":     addrs("fd00:ec2::254"),
	"nat64-private.test":       addrs("64:ff9b::a00:1"),
	"sixtofour-private.test":   addrs("2002:c0a8:1::1"),
}

func newChecker(t testing.TB, cfg Config) *Checker {
	t.Helper()
	if cfg.Resolver == nil {
		cfg.Resolver = testResolver
	}
	c, err := New(cfg)
	require.NoError(t, err)
	return c
}

// ssrfBypasses are known SSRF bypass spellings; none may pass even with an allow-any list.
var ssrfBypasses = []string{
	"http://127.0.0.1/",
	"http://127.0.0.1:8080/admin",
	"http://127.255.255.254/",
	"http://localhost/",
	"http://LOCALHOST/",
	"http://localhost./",
	"http://foo.localhost/",
	"http://2130706433/",
	"http://017700000001/",
	"http://0x7f000001/",
	"http://0x7F000001/",
	"http://0x7f.0.0.1/",
	"http://0x7f.1/",
	"http://0177.0.0.1/",
	"http://0177.1/",
	"http://127.000.000.001/",
	"http://127.1/",
	"http://127.0.1/",
	"http://0/",
	"http://0.0.0.0/",
	"http://0.0.0.0:8080/",
	"http://[::1]/",
	"http://[0000::1]/",
	"http://[::]/",
	"http://[::ffff:127.0.0.1]/",
	"http://[::ffff:7f00:1]/",
	"http://[0:0:0:0:0:ffff:127.0.0.1]/",
	"http://[::ffff:a9fe:a9fe]/",
	"http://[::127.0.0.1]/",
	"http://[::ffff:0:127.0.0.1]/",
	"http://[64:ff9b::127.0.0.1]/",
	"http://[64:ff9b::a9fe:a9fe]/",
	"http://[64:ff9b:1::a00:1]/",
	"http://[2002:7f00:1::]/",
	"http://[2002:a9fe:a9fe::1]/",
	"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
	"http://[fe80::1]/",
	"http://[fe80::1%25eth0]/",
	"http://[fc00::1]/",
	"http://[fd00:ec2::254]/latest/meta-data/",
	"http://[ff02::1]/",
	"http://[2001:db8::1]/",
	"http://169.254.169.254/latest/meta-data/",
	"http://169.254.170.2/v2/credentials",
	"http://100.100.100.200/latest/meta-data/",
	"http://metadata.google.internal/computeMetadata/v1/",
	"http://10.0.0.1/",
	"http://172.16.0.1/",
	"http://172.31.255.255/",
	"http://192.168.1.1/",
	"http://100.64.0.1/",
	"http://198.18.0.1/",
	"http://198.19.255.255/",
	"http://192.0.2.1/",
	"http://198.51.100.1/",
	"http://203.0.113.1/",
	"http://192.0.0.170/",
	"http://224.0.0.1/",
	"http://239.255.255.250/",
	"http://255.255.255.255/",
	"http://240.0.0.1/",
	"http://１２７.０.０.１/",
	"http://127。0。0。1/",
	"http://%EF%BC%91%EF%BC%92%EF%BC%97.0.0.1/",
	"http://ｌｏｃａｌｈｏｓｔ/",
	"http://user:pass@api.example.com/",
	"http://api.example.com@127.0.0.1/",
	"http://:@127.0.0.1/",
	"https://api.example.com\\@127.0.0.1/",
	"http://127.0.0.1%2f@api.example.com/",
	"file:///etc/passwd",
	"gopher://127.0.0.1:6379/_INFO",
	"dict://127.0.0.1:11211/stat",
	"ftp://api.example.com/",
	"jar:http://127.0.0.1!/",
	"http:127.0.0.1",
	"http:/127.0.0.1",
	"//127.0.0.1/",
	" http://127.0.0.1/",
	"http://127.0.0.1\t/",
	"http://rebind.test/",
	"http://127.0.0.1.nip.io/",
	"http://192.168.0.1.xip.io/",
	"http://ip6-localhost/",
	"http://mixed.test/",
	"http://mapped-loopback.test/",
	"http://ula.test/",
	"http://ec2-v6-metadata.test/",
	"http://nat64-private.test/",
	"http://sixtofour-private.test/",
	"http://api.example.com:0/",
	"http://api.example.com:65536/",
	"http://[::1]:80/",
	"http://[127.0.0.1]/",
	"http://127.0.0.1:80:80/",
	"http://api.example.com;.127.0.0.1/",
	"http://a..example.com/",
	"",
}

func TestCheckURLRefusesSSRFBypasses(t *testing.T) {
	require.GreaterOrEqual(t, len(ssrfBypasses), 40)
	c := newChecker(t, Config{Allow: []string{"*"}})
	for _, raw := range ssrfBypasses {
		t.Run(raw, func(t *testing.T) {
			err := c.CheckURL(context.Background(), raw)
			var denied *DeniedError
			require.ErrorAs(t, err, &denied, "must be refused")
			assert.NotEmpty(t, denied.Reason)
			assert.Equal(t, raw, denied.URL)
		})
	}
}

func TestCheckURLAllowlist(t *testing.T) {
	c := newChecker(t, Config{Allow: []string{
		"api.example.com",
		"*.svc.example.com",
		"files.example.com:8443",
		"nat64.example.com",
		"mapped.example.com",
		"93.184.216.34:443",
		"[2606:2800:220:1:248:1893:25c8:1946]",
	}})
	tests := []struct {
		name    string
		raw     string
		wantErr string // substring of the reason; "" means allowed
	}{
		{"exact host", "https://api.example.com/v1/x?q=1", ""},
		{"upper case", "HTTPS://API.EXAMPLE.COM/v1", ""},
		{"trailing dot", "https://api.example.com./v1", ""},
		{"any port without a port rule", "http://api.example.com:8080/", ""},
		{"wildcard one level", "https://a.svc.example.com/", ""},
		{"wildcard two levels", "https://a.b.svc.example.com/", ""},
		{"port rule matches", "https://files.example.com:8443/f", ""},
		{"nat64 of a public address", "http://nat64.example.com/", ""},
		{"mapped public answer", "http://mapped.example.com/", ""},
		{"ip literal with port rule", "https://93.184.216.34/", ""},
		{"ipv6 literal", "https://[2606:2800:220:1:248:1893:25c8:1946]/", ""},
		{"wildcard does not match apex", "https://svc.example.com/", "not allowed"},
		{"suffix trick", "https://api.example.com.evil.test/", "not allowed"},
		{"prefix trick", "https://evilapi.example.com/", "not allowed"},
		{"parent domain", "https://example.com/", "not allowed"},
		{"port rule refuses default port", "https://files.example.com/", "port 443 not allowed"},
		{"port rule refuses other port", "https://files.example.com:8444/", "not allowed"},
		{"ip literal wrong port", "http://93.184.216.34/", "not allowed"},
		{"unknown name fails lookup", "https://unknown.svc.example.com/", "resolve"},
		{"scheme", "ftp://api.example.com/", "scheme \"ftp\" not allowed"},
		{"userinfo", "https://me@api.example.com/", "userinfo not allowed"},
		{"full-width", "https://ａｐｉ.example.com/", "full-width"},
		{"unicode host", "https://аpi.example.com/", "non-ascii"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.CheckURL(context.Background(), tt.raw)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestCheckURLLookupFailureIsNotADenial(t *testing.T) {
	c := newChecker(t, Config{Allow: []string{"*"}})
	err := c.CheckURL(context.Background(), "https://nowhere.test/")
	require.Error(t, err)
	var denied *DeniedError
	assert.False(t, errors.As(err, &denied))
	assert.Contains(t, err.Error(), "resolve nowhere.test")
}

func TestEmptyAllowPermitsNothing(t *testing.T) {
	c := newChecker(t, Config{})
	err := c.CheckURL(context.Background(), "https://api.example.com/")
	var denied *DeniedError
	require.ErrorAs(t, err, &denied)
	assert.Equal(t, "host api.example.com port 443 not allowed", denied.Reason)
}

func TestAllowPrivateIsExplicit(t *testing.T) {
	strict := newChecker(t, Config{Allow: []string{"127.0.0.1", "rebind.test"}})
	assert.Error(t, strict.CheckURL(context.Background(), "http://127.0.0.1/"))
	assert.Error(t, strict.CheckURL(context.Background(), "http://rebind.test/"))

	loose := newChecker(t, Config{
		Allow:        []string{"127.0.0.1", "rebind.test"},
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	})
	assert.NoError(t, loose.CheckURL(context.Background(), "http://127.0.0.1/"))
	assert.NoError(t, loose.CheckURL(context.Background(), "http://rebind.test/"))
	// Spellings stay refused even where the address is exempt.
	for _, raw := range []string{"http://2130706433/", "http://127.1/", "http://[::ffff:127.0.0.1]/", "http://localhost/"} {
		assert.Error(t, loose.CheckURL(context.Background(), raw), raw)
	}
	// Other loopback addresses are not exempt.
	assert.Error(t, loose.CheckAddr(netip.MustParseAddr("127.0.0.2")))
}

func TestNewRejectsBadAllowEntries(t *testing.T) {
	for _, entry := range []string{"", "*.", "a.*.com", "api*.example.com", "*:443", "host:0", "host:99999", "host:x", "ｅxample.com", "a..b", "*.10.0.0.1", "[::ffff:127.0.0.1]", "0x7f.1"} {
		t.Run(entry, func(t *testing.T) {
			_, err := New(Config{Allow: []string{entry}})
			assert.Error(t, err)
		})
	}
	_, err := New(Config{AllowPrivate: []netip.Prefix{{}}})
	assert.Error(t, err)
}

func TestCheckURLCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := newChecker(t, Config{Allow: []string{"*"}, Resolver: ctxResolver{}})
	err := c.CheckURL(ctx, "https://api.example.com/")
	assert.ErrorIs(t, err, context.Canceled)
}

type ctxResolver struct{}

func (ctxResolver) LookupNetIP(ctx context.Context, _, _ string) ([]netip.Addr, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return addrs("93.184.216.34"), nil
}

func TestAddrReason(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{"93.184.216.34", ""},
		{"8.8.8.8", ""},
		{"2606:4700::1111", ""},
		{"64:ff9b::808:808", ""},
		{"2002:808:808::1", ""},
		{"::ffff:8.8.8.8", ""},
		{"127.0.0.1", "loopback address"},
		{"0.0.0.0", "unspecified address"},
		{"0.1.2.3", "this-network address"},
		{"10.1.2.3", "private address"},
		{"172.20.0.1", "private address"},
		{"192.168.255.255", "private address"},
		{"100.127.255.255", "carrier-grade nat address"},
		{"169.254.1.1", "link-local address"},
		{"169.254.169.254", "cloud metadata address"},
		{"198.18.5.5", "benchmarking address"},
		{"192.0.2.55", "documentation address"},
		{"224.0.0.251", "multicast address"},
		{"255.255.255.255", "broadcast address"},
		{"250.1.1.1", "reserved address"},
		{"::", "unspecified address"},
		{"::1", "loopback address"},
		{"::ffff:127.0.0.1", "ipv4-mapped loopback address"},
		{"::ffff:10.0.0.1", "ipv4-mapped private address"},
		{"::7f00:1", "ipv4-compatible ipv6 address"},
		{"64:ff9b::7f00:1", "nat64 address embedding loopback address"},
		{"64:ff9b::c0a8:101", "nat64 address embedding private address"},
		{"2002:7f00:1::", "6to4 address embedding loopback address"},
		{"2002:a9fe:a9fe::", "6to4 address embedding cloud metadata address"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "teredo address"},
		{"2001:db8::1", "documentation address"},
		{"3fff::1", "documentation address"},
		{"fc00::1", "unique local address"},
		{"fd00:ec2::254", "cloud metadata address"},
		{"fe80::1", "link-local address"},
		{"fe80::1%eth0", "zoned ipv6 address"},
		{"fec0::1", "site-local address"},
		{"ff02::1", "multicast address"},
		{"100::1", "discard-only address"},
		{"4000::1", "non-global ipv6 address"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			assert.Equal(t, tt.want, AddrReason(netip.MustParseAddr(tt.addr)))
		})
	}
	assert.Equal(t, "invalid address", AddrReason(netip.Addr{}))
}

func TestDeniedErrorMessage(t *testing.T) {
	assert.Equal(t, `egress: "http://x" denied: loopback address 127.0.0.1`,
		(&DeniedError{URL: "http://x", Reason: "loopback address 127.0.0.1"}).Error())
	assert.Equal(t, "egress: denied: loopback address 127.0.0.1",
		(&DeniedError{Reason: "loopback address 127.0.0.1"}).Error())
}

func BenchmarkCheckURL(b *testing.B) {
	c := newChecker(b, Config{Allow: []string{"api.example.com", "*.svc.example.com"}})
	ctx := context.Background()
	b.Run("allowed-name", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.CheckURL(ctx, "https://api.example.com/v1/orders?id=42"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wildcard-name", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.CheckURL(ctx, "https://a.svc.example.com/v1/orders"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("denied-numeric", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.CheckURL(ctx, "http://2130706433/"); err == nil {
				b.Fatal("allowed")
			}
		}
	})
}
