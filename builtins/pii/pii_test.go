package pii

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newScanner(t testing.TB, kinds ...Kind) *Scanner {
	t.Helper()
	s, err := New(Config{Kinds: kinds})
	require.NoError(t, err)
	return s
}

// found renders matches as "kind:text" for readable assertions.
func found(text string, ms []Match) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, string(m.Kind)+":"+text[m.Start:m.End])
	}
	return out
}

func TestFind(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		// email
		{"email", "write to jane.doe+tag@example.co.uk today", []string{"email:jane.doe+tag@example.co.uk"}},
		{"email end of sentence", "Contact: a_b@sub.example.org.", []string{"email:a_b@sub.example.org"}},
		{"email in brackets", "<ops@example.com>", []string{"email:ops@example.com"}},
		{"not an email: handle", "ping @alice on chat", []string{}},
		{"not an email: no tld", "user@localhost", []string{}},
		{"not an email: numeric tld", "root@10.0.0", []string{}},
		{"email non-ascii local part", "write jöhn.müller@example.com", []string{"email:jöhn.müller@example.com"}},
		{"email non-ascii last letter", "or josé@example.es.", []string{"email:josé@example.es"}},
		{"email combining accent", "jose\u0301@example.es", []string{"email:jose\u0301@example.es"}},
		{"email idn domain", "mail user@bücher.example.de now", []string{"email:user@bücher.example.de"}},
		{"email cyrillic", "почта: иван@пример.рф", []string{"email:иван@пример.рф"}},
		{"email after non-ascii punctuation", "«maria@example.com»", []string{"email:maria@example.com"}},
		{"not an email: non-ascii without tld", "straße@localhost", []string{}},
		{"not an email: digit tld after idn", "ö@bücher.1", []string{}},
		{"email punycode domain", "to user@xn--bcher-kva.example.com.", []string{"email:user@xn--bcher-kva.example.com"}},
		{"email punycode tld", "пишите ivan@xn--e1afmkfd.xn--p1ai", []string{"email:ivan@xn--e1afmkfd.xn--p1ai"}},
		{"email idn tld", "mail ivan@пример.рф.", []string{"email:ivan@пример.рф"}},

		// phone
		{"us dashed", "call 415-555-2671 now", []string{"phone:415-555-2671"}},
		{"us parens", "call (415) 555-2671", []string{"phone:(415) 555-2671"}},
		{"us dotted", "415.555.2671", []string{"phone:415.555.2671"}},
		{"us spaced with +1", "+1 415 555 2671", []string{"phone:+1 415 555 2671"}},
		{"us 1- prefix", "dial 1-800-555-0199.", []string{"phone:1-800-555-0199"}},
		{"e164", "tel:+14155552671", []string{"phone:+14155552671"}},
		{"uk", "ring +44 20 7946 0958 please", []string{"phone:+44 20 7946 0958"}},
		{"germany with parens", "+49 (30) 901820", []string{"phone:+49 (30) 901820"}},
		{"france dotted", "+33.1.23.45.67.89", []string{"phone:+33.1.23.45.67.89"}},
		{"us exchange starting 1", "call 555-123-4567 now", []string{"phone:555-123-4567"}},
		{"us parens exchange starting 1", "call (555) 123-4567", []string{"phone:(555) 123-4567"}},
		{"us dotted exchange starting 1", "555.123.4567", []string{"phone:555.123.4567"}},
		{"us exchange starting 0 with +1", "+1 (555) 012-3456", []string{"phone:+1 (555) 012-3456"}},
		{"us extension x", "415-555-2671x123", []string{"phone:415-555-2671x123"}},
		{"us extension ext.", "call 415-555-2671 ext. 12 today", []string{"phone:415-555-2671 ext. 12"}},
		{"us extension ext", "(415) 555-2671 ext 7.", []string{"phone:(415) 555-2671 ext 7"}},
		{"us extension spaced x", "415.555.2671 x 204", []string{"phone:415.555.2671 x 204"}},
		{"international extension", "+44 20 7946 0958 Ext.204", []string{"phone:+44 20 7946 0958 Ext.204"}},
		{"extension word without digits", "415-555-2671 ext", []string{"phone:415-555-2671"}},
		{"not a phone: glued letters after", "415-555-2671xyz", []string{}},
		{"not a phone: bare digits with 1 exchange", "order 5551234567 shipped", []string{}},
		{"not a phone: bare digits then x", "id 5551234567x12", []string{}},
		{"not a phone: bare digits", "order 4155552671 shipped", []string{}},
		{"not a phone: area code starting 1", "ref 123-456-7890", []string{}},
		{"not a phone: short number", "room 555-1234", []string{}},
		{"not a phone: date", "on 2024-01-15 at 10:30", []string{}},
		{"not a phone: plus count", "+3 more items", []string{}},
		{"not a phone: signed decimal", "delta +3.14159265358979", []string{}},
		{"not a phone: glued to letters", "SKU415-555-2671", []string{}},
		{"not a phone: longer dashed id", "415-555-2671-99", []string{}},
		{"uk national", "ring 020 7946 0958 today", []string{"phone:020 7946 0958"}},
		{"uk mobile national", "mobile 07700 900123", []string{"phone:07700 900123"}},
		{"germany national", "Tel. 030 901820", []string{"phone:030 901820"}},
		{"france national", "appelez le 01 42 68 53 00", []string{"phone:01 42 68 53 00"}},
		{"brazil national", "fone (11) 4706-6184", []string{"phone:(11) 4706-6184"}},
		{"international call prefix", "dial 0044 20 7946 0958", []string{"phone:0044 20 7946 0958"}},
		{"dash before a word", "555-867-5309-Fax", []string{"phone:555-867-5309"}},
		{"not a phone: german number without trunk prefix", "ref 30 901820", []string{}},
		{"not a phone: date and time", "at 2023-11-02 12:00", []string{}},
		{"not a phone: european date", "on 15.01.2024 we", []string{}},
		{"other region after a phone word", "Phone:\n60-56-85-91", []string{"phone:60-56-85-91"}},
		{"other region before a phone word", "416 60 039 fax", []string{"phone:416 60 039"}},
		{"other region after call", "You can call 9472 7916?", []string{"phone:9472 7916"}},
		{"bare digits after a phone word", "Fax: 9498777106", []string{"phone:9498777106"}},
		{"not a phone: other region without a phone word", "ref 60-56-85-91", []string{}},
		{"not a phone: a word that starts like tel", "tell me about 60-56-85-91", []string{}},
		{"not a phone: bare digits without a phone word", "invoice 9498777106", []string{}},
		{"not a phone: short bare digits after a phone word", "Phone: 1234567", []string{}},
		{"not a phone: date after a phone word", "call on 2024-01-15", []string{}},
		{"phone after a portuguese phone word", "Meu telefone é 280930640.", []string{"phone:280930640"}},
		{"phone after a chinese phone word", "我的电话号是280930640。", []string{"phone:280930640"}},
		{"phone after a hindi phone word", "मेरा फोन नंबर 26741570 है.", []string{"phone:26741570"}},
		{"phone with a spaced slash", "Mobil 0176 / 12345678", []string{"phone:0176 / 12345678"}},
		{"phone with a dash before a space", "+49 176- 12345678", []string{"phone:+49 176- 12345678"}},
		{"phone with a spaced dash", "Tel. 010 - 123 45 67", []string{"phone:010 - 123 45 67"}},
		{"phone with spaces and a dash", "+55 11 98456-5666", []string{"phone:+55 11 98456-5666"}},
		{"two phones joined by a spaced dash", "+49 30 1234567 - +49 30 7654321", []string{"phone:+49 30 1234567", "phone:+49 30 7654321"}},
		{"bare phone with an extension", "Phone: 01611234567x123", []string{"phone:01611234567x123"}},
		{"not a phone: date and time with a dash", "call at 2023-11-02 12", []string{}},
		{"not a phone: word that holds a phone word", "the hotel 12345678", []string{}},

		// ssn
		{"ssn", "SSN 123-45-6789.", []string{"ssn:123-45-6789"}},
		{"ssn spaced", "ssn: 123 45 6789", []string{"ssn:123 45 6789"}},
		{"not ssn: area 000", "000-12-3456", []string{}},
		{"not ssn: area 666", "666-12-3456", []string{}},
		{"not ssn: area 9xx", "900-12-3456", []string{}},
		{"not ssn: group 00", "123-00-4567", []string{}},
		{"not ssn: mixed separators", "123-45 6789", []string{}},
		{"not ssn: part of longer id", "A123-45-6789", []string{}},
		{"ssn dotted", "ssn 123.45.6789", []string{"ssn:123.45.6789"}},
		{"ssn bare after context word", "SSN: 123456789", []string{"ssn:123456789"}},
		{"ssn bare after social security", "my social security number is 078051120.", []string{"ssn:078051120"}},
		{"not ssn: bare without context", "order 123456789 shipped", []string{}},
		{"not ssn: bare context too far", "ssn field left empty; the tracking number of the parcel is 123456789", []string{}},
		{"not ssn: bare area 9xx", "SSN 912345678", []string{}},

		// cards
		{"visa plain", "card 4111111111111111 exp", []string{"card:4111111111111111"}},
		{"visa spaced", "4111 1111 1111 1111", []string{"card:4111 1111 1111 1111"}},
		{"mastercard dashed", "5555-5555-5555-4444", []string{"card:5555-5555-5555-4444"}},
		{"amex 15", "amex 3782 822463 10005", []string{"card:3782 822463 10005"}},
		{"discover", "6011111111111117.", []string{"card:6011111111111117"}},
		{"visa 13", "4222222222222", []string{"card:4222222222222"}},
		{"card followed by year", "4111 1111 1111 1111 2027", []string{"card:4111 1111 1111 1111"}},
		{"card after a number", "qty 12 4111 1111 1111 1111", []string{"card:4111 1111 1111 1111"}},
		{"not card: non-luhn 16", "4111111111111112", []string{}},
		{"not card: order id", "order 1234567890123456", []string{}},
		{"not card: ms timestamp", "ts=1700000000000", []string{}},
		{"not card: 20 digits", "41111111111111111111", []string{}},
		{"not card: glued to id", "ORD-4111111111111111", []string{}},
		{"not card: decimal", "4111111111111111.25", []string{}},
		{"maestro 12", "card 5018 0000 0009", []string{"card:5018 0000 0009"}},
		{"visa 19", "4111 1111 1111 1111 003", []string{"card:4111 1111 1111 1111 003"}},
		{"jcb", "jcb 3530111333300000", []string{"card:3530111333300000"}},
		{"mastercard 2-series", "2221000000000009", []string{"card:2221000000000009"}},
		{"unionpay 19", "6212345678901265 is 16; 6212345678901234569 is 19", []string{"card:6212345678901265", "card:6212345678901234569"}},
		{"not card: unknown iin", "7111111111111111", []string{}},
		{"not card: visa of 14 digits", "41111111111113", []string{}},
		{"not card: hex dump", "0000: 4111 1111 1111 1111 de ad be ef", []string{}},
		{"not card: xxd line", "00000010: 4111 1111 1111 1111 6c6c 6f20", []string{}},
		{"not card: byte dump of 2-digit groups", "41 11 11 11 11 11 11 11", []string{}},

		// ipv4
		{"ipv4", "from 203.0.113.42, port 22", []string{"ipv4:203.0.113.42"}},
		{"ipv4 end", "host=10.0.0.1", []string{"ipv4:10.0.0.1"}},
		{"ipv4 cidr", "allow 10.0.0.0/8 and 192.168.1.0/24.", []string{"ipv4:10.0.0.0/8", "ipv4:192.168.1.0/24"}},
		{"ipv4 cidr 32", "1.2.3.4/32", []string{"ipv4:1.2.3.4/32"}},
		{"ipv4 cidr 0", "0.0.0.0/0", []string{"ipv4:0.0.0.0/0"}},
		{"not ipv4: prefix over 32", "10.0.0.1/33", []string{}},
		{"not ipv4: prefix leading zero", "10.0.0.1/08", []string{}},
		{"not ipv4: path after address", "10.0.0.1/index.html", []string{}},
		{"not ipv4: prefix then more path", "10.0.0.0/8/x", []string{}},
		{"not ipv4: version", "v1.2.3.4", []string{}},
		{"not ipv4: five parts", "1.2.3.4.5", []string{}},
		{"not ipv4: octet", "300.1.1.1", []string{}},
		{"not ipv4: leading zero", "10.01.0.1", []string{}},
		{"not ipv4: semver", "version 1.21.3 released", []string{}},

		// ipv6
		{"ipv6", "peer 2001:db8:85a3::8a2e:370:7334 connected", []string{"ipv6:2001:db8:85a3::8a2e:370:7334"}},
		{"ipv6 full", "fe80:0:0:0:202:b3ff:fe1e:8329", []string{"ipv6:fe80:0:0:0:202:b3ff:fe1e:8329"}},
		{"ipv6 short", "fe80::1", []string{"ipv6:fe80::1"}},
		{"ipv6 mapped", "::ffff:192.0.2.128", []string{"ipv6:::ffff:192.0.2.128"}},
		{"ipv6 sentence end", "at 2001:db8::1.", []string{"ipv6:2001:db8::1"}},
		{"not ipv6: time", "at 10:30:45 UTC", []string{}},
		{"not ipv6: cpp", "std::vector<int>", []string{}},
		{"not ipv6: mac", "00:1a:2b:3c:4d:5e", []string{}},
		{"not ipv6: loopback alone", "::1", []string{}},
		{"not ipv6: iso timestamp", "2024-01-15T10:30:45Z", []string{}},

		// mixed and guards
		{"several", "Jane (jane@example.com, +1 415-555-2671) paid with 4111-1111-1111-1111 from 198.51.100.7",
			[]string{"email:jane@example.com", "phone:+1 415-555-2671", "card:4111-1111-1111-1111", "ipv4:198.51.100.7"}},
		{"card with no-break spaces", "card 4111\u00a01111\u00a01111\u00a01111 ok", []string{"card:4111\u00a01111\u00a01111\u00a01111"}},
		{"card with narrow no-break spaces", "4111\u202f1111\u202f1111\u202f1111", []string{"card:4111\u202f1111\u202f1111\u202f1111"}},
		{"card with zero-width spaces", "card 4111\u200b1111\u200b1111\u200b1111", []string{"card:4111\u200b1111\u200b1111\u200b1111"}},
		{"card with en dashes", "4111\u20131111\u20131111\u20131111", []string{"card:4111\u20131111\u20131111\u20131111"}},
		{"full-width card", "card ４１１１１１１１１１１１１１１１", []string{"card:４１１１１１１１１１１１１１１１"}},
		{"full-width ssn", "ssn １２３-４５-６７８９", []string{"ssn:１２３-４５-６７８９"}},
		{"ssn with no-break spaces", "ssn 123\u00a045\u00a06789", []string{"ssn:123\u00a045\u00a06789"}},
		{"email with zero-width space", "bob\u200b@example.com", []string{"email:bob\u200b@example.com"}},
		{"email with full-width at", "mail bob＠example.com", []string{"email:bob＠example.com"}},
		{"phone with no-break spaces", "+1\u00a0415\u00a0555\u00a02671", []string{"phone:+1\u00a0415\u00a0555\u00a02671"}},
		{"full-width phone", "call ＋１ ４１５ ５５５ ２６７１", []string{"phone:＋１ ４１５ ５５５ ２６７１"}},
		{"ipv4 with a full-width digit", "ip 192.168.1.１", []string{"ipv4:192.168.1.１"}},
		{"zero-width space before a card", "abc\u200b4111111111111111", []string{"card:4111111111111111"}},
		{"plain prose", "Release 2.4.1 fixes 17 bugs; see ticket #48213 from 2023-11-02 12:00:05.", []string{}},
		{"empty", "", []string{}},
	}
	s := newScanner(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, found(tt.in, s.Find(tt.in)))
		})
	}
}

func TestKindsSelection(t *testing.T) {
	text := "mail a@example.com or call 415-555-2671"
	s := newScanner(t, KindEmail)
	assert.Equal(t, []string{"email:a@example.com"}, found(text, s.Find(text)))

	_, err := New(Config{Kinds: []Kind{"passport"}})
	assert.ErrorContains(t, err, `unknown kind "passport"`)
	assert.Len(t, AllKinds(), 7)
}

func TestRegions(t *testing.T) {
	text := "Tel. 030 901820 oder 0171 1234567"
	de, err := New(Config{Regions: []string{"de"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"phone:030 901820", "phone:0171 1234567"}, found(text, de.Find(text)))
	us, err := New(Config{Regions: []string{"US"}})
	require.NoError(t, err)
	bare := "Zentrale 030 901820 oder 0171 1234567"
	assert.Empty(t, us.Find(bare), "German national formats are not recognised for the US")
	assert.Equal(t, []string{"phone:030 901820", "phone:0171 1234567"}, found(text, us.Find(text)),
		"a phone word before them makes them phone numbers in any region")
	intl := "+49 30 901820"
	assert.Equal(t, []string{"phone:" + intl}, found(intl, us.Find(intl)), "international format whatever the regions")
	_, err = New(Config{Regions: []string{"XX"}})
	assert.ErrorContains(t, err, `regions[0] "XX" is not an ISO 3166-1 alpha-2 region code`)
}

func TestRedact(t *testing.T) {
	s := newScanner(t)
	out, n := s.Redact("mail jane@example.com, SSN 123-45-6789, card 4111 1111 1111 1111.")
	assert.Equal(t, "mail [REDACTED:email], SSN [REDACTED:ssn], card [REDACTED:card].", out)
	assert.Equal(t, 3, n)

	out, n = s.Redact("jöhn.müller@example.com or josé@example.es")
	assert.Equal(t, "[REDACTED:email] or [REDACTED:email]", out)
	assert.Equal(t, 2, n)

	out, n = s.Redact("nothing to see")
	assert.Equal(t, "nothing to see", out)
	assert.Zero(t, n)
}

func TestScanValue(t *testing.T) {
	s := newScanner(t)
	var args any
	require.NoError(t, json.Unmarshal([]byte(`{
		"to": ["bob@example.com", "ok"],
		"body": {"text": "call 415-555-2671", "n": 3},
		"card": 4111111111111111,
		"a/b": "10.0.0.1",
		"flag": true
	}`), &args))
	got := []string{}
	for _, m := range s.ScanValue(args) {
		got = append(got, m.Path+"="+string(m.Kind))
	}
	assert.Equal(t, []string{"/a~1b=ipv4", "/body/text=phone", "/card=card", "/to/0=email"}, got, `"bob@example.com" is whole where its element ends`)
	assert.Empty(t, s.ScanValue(map[string]string{"x": "fine"}))
	keyed := map[string]any{"recipients": map[string]any{"ann@example.com": "cc", "ok": "bob@example.com"}}
	got = []string{}
	for _, m := range s.ScanValue(keyed) {
		got = append(got, m.Path+"="+string(m.Kind))
	}
	assert.Equal(t, []string{"/recipients=email", "/recipients/ok=email"}, got, "keys are scanned")
	assert.Len(t, s.ScanValue(map[string]string{"4111 1111 1111 1111": "visa"}), 1)
	assert.Len(t, s.ScanValue([]string{"a@example.com"}), 1)
	assert.Empty(t, s.ScanValue(nil))
}

func TestRedactValueDoesNotMutate(t *testing.T) {
	s := newScanner(t)
	in := map[string]any{
		"to":   []any{"bob@example.com", "ok"},
		"meta": map[string]any{"ip": "10.0.0.1", "n": 2.0},
		"card": 4111111111111111.0,
		"tags": []string{"x", "415-555-2671"},
		"hdr":  map[string]string{"From": "a@example.com"},
	}
	before, err := json.Marshal(in)
	require.NoError(t, err)

	out, n := s.RedactValue(in)
	assert.Equal(t, 5, n)
	assert.Equal(t, map[string]any{
		"to":   []any{"[REDACTED:email]", "ok"}, // an address whole where its element ends keeps the next
		"meta": map[string]any{"ip": "[REDACTED:ipv4]", "n": 2.0},
		"card": "[REDACTED:card]",
		"tags": []string{"x", "[REDACTED:phone]"},
		"hdr":  map[string]string{"From": "[REDACTED:email]"},
	}, out)

	after, err := json.Marshal(in)
	require.NoError(t, err)
	assert.JSONEq(t, string(before), string(after))
}

func TestLuhn(t *testing.T) {
	digits := func(s string) []byte {
		out := []byte{}
		for _, c := range s {
			out = append(out, byte(c-'0'))
		}
		return out
	}
	assert.True(t, luhn(digits("79927398713")))
	assert.False(t, luhn(digits("79927398710")))
	assert.True(t, luhn(digits("4111111111111111")))
}

func TestFindOffsetsAreByteOffsets(t *testing.T) {
	s := newScanner(t)
	text := "héllo – jane@example.com"
	ms := s.Find(text)
	require.Len(t, ms, 1)
	assert.Equal(t, "jane@example.com", text[ms[0].Start:ms[0].End])
	assert.True(t, strings.HasSuffix(text, text[ms[0].Start:]))
}

// ticket2KB is a realistic support conversation of about 2 KB with a few items to find.
var ticket2KB = func() string {
	base := `Hi team, following up on order ORD-2024-118234 placed on 2024-03-11 at 14:22:05 UTC.
The customer, Maria Gonzalez (maria.gonzalez@example.com), says the package never arrived at
221B Baker Street. She can be reached at +44 20 7946 0958 or (415) 555-2671 after 6pm.
Tracking shows the parcel left the Reno hub (build 3.14.2, node 10.20.30.40) on March 12th and
then nothing. Version 2.7.1 of the app crashed twice while she tried to reopen the ticket;
the crash id was 7f3a9c1e-55b2-4f0e-9d0a-1c2b3c4d5e6f. She paid 129.99 USD with a card ending
in 4242 and asks for a refund to the same card. Previous tickets: #48213, #48377, #49001.
Please do not ask her to repeat the SSN she typed by mistake earlier; it has been removed.
Internal note: escalate if not resolved within 48 hours; SLA tier 2; queue EU-West-1.
`
	var b strings.Builder
	for b.Len() < 2048 {
		b.WriteString(base)
	}
	return b.String()[:2048]
}()

func BenchmarkScan2KB(b *testing.B) {
	s := newScanner(b)
	b.SetBytes(int64(len(ticket2KB)))
	b.ReportAllocs()
	for b.Loop() {
		if len(s.Find(ticket2KB)) == 0 {
			b.Fatal("nothing found")
		}
	}
}

// TestFindEncoded: a value written in base64 or hex is found as the whole run; a JWT's
// payload is read, and masked when its claims carry personal data; binary payloads and
// claims without any are left alone.
func TestFindEncoded(t *testing.T) {
	s := newScanner(t)
	b64 := func(v string) string { return base64.RawURLEncoding.EncodeToString([]byte(v)) }
	header := b64(`{"alg":"HS256","typ":"JWT"}`)
	withEmail := b64(`{"sub":"u-42","email":"jane.doe@example.com"}`)
	plain := b64(`{"sub":"1234567890","iat":1516239022}`)
	sig := "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	for _, tt := range []struct {
		name, in string
		want     []string
	}{
		{"card in base64", "card=" + base64.StdEncoding.EncodeToString([]byte("4111 1111 1111 1111")),
			[]string{"card:" + base64.StdEncoding.EncodeToString([]byte("4111 1111 1111 1111"))}},
		{"ssn in hex", "v " + hex.EncodeToString([]byte("ssn 078-05-1120")), []string{"ssn:" + hex.EncodeToString([]byte("ssn 078-05-1120"))}},
		// Binary bytes around the value, as many as the value has: a reader decoding the run
		// still reads the card between them.
		{"card in base64 between binary bytes", "blob=" + base64.StdEncoding.EncodeToString(noisy("4111 1111 1111 1111")),
			[]string{"card:" + base64.StdEncoding.EncodeToString(noisy("4111 1111 1111 1111"))}},
		{"ssn in hex between binary bytes", "v " + hex.EncodeToString(noisy("ssn 078-05-1120 ")), []string{"ssn:" + hex.EncodeToString(noisy("ssn 078-05-1120 "))}},
		{"jwt carrying an email", header + "." + withEmail + "." + sig, []string{"email:" + withEmail}},
		{"jwt without personal data", header + "." + plain + "." + sig, []string{}},
		{"image", "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, found(tt.in, s.Find(tt.in)))
		})
	}
}

// noisy returns v between two runs of binary bytes, together longer than v.
func noisy(v string) []byte {
	noise := []byte{0x00, 0xff, 0x01, 0xfe, 0x02, 0x80, 0x9c, 0x10, 0x00, 0xff, 0x01, 0xfe, 0x02, 0x80, 0x9c, 0x10, 0x07, 0x1b}
	return append(append(append([]byte{}, noise...), v...), noise...)
}

// BenchmarkRedactValue2KB: tool arguments of rows of a few strings each, about 2 KB, no
// personal data.
func BenchmarkRedactValue2KB(b *testing.B) {
	s := newScanner(b)
	var rows []any
	for i := range 16 {
		rows = append(rows, map[string]any{"id": float64(i), "status": "shipped", "tags": []any{"priority", "eu-west", "gift"},
			"note": "customer asked about the delivery window"})
	}
	v := map[string]any{"rows": rows, "lines": strings.Split(strings.Repeat("the order shipped on time and the customer was told\n", 10), "\n")}
	b.ReportAllocs()
	for b.Loop() {
		if _, n := s.RedactValue(v); n != 0 {
			b.Fatal("false positive")
		}
	}
}

// TestPlaceholdersAmongOpenings: a placeholder after openings of others that never close is
// still read as one, and the openings name nothing.
func TestPlaceholdersAmongOpenings(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	for _, text := range []string{"[REDACTED:[REDACTED:phone] 94727916", "[REDACTED:ipv4[REDACTED:phone] 94727916"} {
		assert.Empty(t, s.Find(text), "%q", text)
	}
	assert.Equal(t, "[REDACTED:zzzzz]", blankPlaceholders("[REDACTED:phone]"))
	assert.Equal(t, "[REDACTED:phonez]", blankPlaceholders("[REDACTED:phonez]"))
}
