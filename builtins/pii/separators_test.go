package pii_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
)

// decodedJSON is the text a JSON string decodes to: a lone surrogate ("\udc00") reads as
// U+FFFD.
func decodedJSON(t testing.TB, quoted string) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal([]byte(quoted), &s))
	return s
}

// cardSpellings are card numbers whose digits the model reads as one card, written with
// separators, marks and groupings a card is not printed with.
func cardSpellings(t testing.TB) map[string]string {
	return map[string]string{
		"replacement character":     "4111\ufffd1111\ufffd1111\ufffd1111",
		"lone surrogate":            decodedJSON(t, `"4111\udc00 1111\udc00 1111\udc00 1111"`),
		"combining mark":            "4\u0301111111111111111",
		"combining marks":           "4\u0301111 1\u0308111 1111 111\u03011",
		"keycaps":                   "4\u20e31\u20e31\u20e31\u20e3111111111111",
		"tab":                       "card 4111\t1111\t1111\t1111",
		"two tabs":                  "card 4111\t\t1111\t\t1111\t\t1111",
		"colon":                     "visa 4111:1111:1111:1111",
		"4-8-4":                     "4111 11111111 1111",
		"8-8":                       "41111111-11111111",
		"4-12":                      "4111 111111111111",
		"two spaces":                "Card number:  4111  1111  1111  1111",
		"three spaces":              "cc   4111   1111   1111   1111",
		"blocks run together":       "card 4111 11111111 1111 end",
		"replacement in a sentence": "pay with 4111\ufffd1111\ufffd1111\ufffd1111 today",
	}
}

// TestCardSeparatorsTheModelReads: a card number is found however its digits are joined,
// when the model reads them as the digits of one number: by the replacement character (what
// a lone surrogate of a JSON string decodes to), with combining marks on its digits, by tabs,
// colons or a few spaces repeated alike after a word naming a card, and in groups of any length from three digits whose
// digits total a card.
func TestCardSeparatorsTheModelReads(t *testing.T) {
	s, err := pii.New(pii.Config{Kinds: []pii.Kind{pii.KindCard}})
	require.NoError(t, err)
	for name, text := range cardSpellings(t) {
		t.Run(name, func(t *testing.T) {
			ms := s.Find(text)
			require.Len(t, ms, 1, "%q", text)
			got := text[ms[0].Start:ms[0].End]
			assert.True(t, strings.HasPrefix(got, "4"), "%q found as %q", text, got)
			assert.True(t, strings.HasSuffix(strings.TrimRight(got, "\u0301"), "1"), "%q found as %q", text, got)
			red, n := s.Redact(text)
			assert.Equal(t, 1, n)
			assert.NotContains(t, red, "1111", "%q redacted as %q", text, red)
		})
	}
}

// TestNumbersAreNoCards: what a card's separators join elsewhere is left alone: times, IPv6
// addresses of decimal groups, hex dumps, dates, byte dumps, groups that mix a tab or several
// spaces with another separator,
// numbers set out in columns that no card layout holds, and groups joined by tabs, colons or
// several spaces, as a table's columns are, that no word naming a card comes before.
func TestNumbersAreNoCards(t *testing.T) {
	s, err := pii.New(pii.Config{Kinds: []pii.Kind{pii.KindCard}})
	require.NoError(t, err)
	for _, text := range []string{
		"at 12:30:45 UTC",
		"2001:db8:4111:1111:1111:1111::1",
		"fe80::4111:1111:1111:1111",
		"4111:1111:1111:1111::1",
		"::4111:1111:1111:1111",
		"0000: 4111 1111 1111 1111 de ad be ef",
		"00000010: 4111 1111 1111 1111 6c6c 6f20",
		"41 11 11 11 11 11 11 11",
		"41\t11\t11\t11\t11\t11\t11\t11",
		"4111 1111\t1111 1111",
		"4111111111111111.25",
		"2024\t01\t15\t4111",
		"ORD-4111:1111:1111:1111",
		"4111\t1111\t1111\t1111",
		"4111  1111  1111  1111",
		"Total:\t4111\t1111\t1111\t1111",
		"4111:1111:1111:1111",
	} {
		assert.Empty(t, s.Find(text), "%q", text)
	}
}

// TestCardSpellingsStreamedAsWhole: a card written so, streamed in one delta, cut in two at
// every byte or a line break before it, goes out of the layer as Redact masks the whole text,
// and with "block" ends the call before it.
func TestCardSpellingsStreamedAsWhole(t *testing.T) {
	c := newStreamedAsWhole(t)
	for name, card := range cardSpellings(t) {
		t.Run(name, func(t *testing.T) {
			for _, text := range []string{card, "Hello.\n" + card + "\nbye", fmt.Sprintf("Hello.\nyours: %s ok\n", card)} {
				_, n := c.s.Redact(text)
				require.NotZero(t, n, "%q", text)
				c.check(t, text, []string{text})
				for i := 0; i <= len(text); i++ {
					c.check(t, text, []string{text[:i], text[i:]})
				}
			}
		})
	}
}

// TestCardWordOnTheLineBeforeStreamed: a card's groups joined by tabs or several spaces count
// after a word naming a card that ends the line before, streamed line by line as in the whole
// text.
func TestCardWordOnTheLineBeforeStreamed(t *testing.T) {
	c := newStreamedAsWhole(t)
	for _, text := range []string{"Card number:\n4111\t1111\t1111\t1111\n", "visa\n4111  1111  1111  1111\nok\n"} {
		_, n := c.s.Redact(text)
		require.Equal(t, 1, n, "%q", text)
		c.check(t, text, strings.SplitAfter(text, "\n"))
	}
}

// A card number in a URL path segment, between slashes after a word
// ("/u/4111-1111-1111-1111/a.png") or before a file's extension
// ("4111111111111111.png"), was left alone: a slash or a dot between a
// letter and a digit read as inside a token. It is a card; a slash or a
// dot next to a digit still is not a boundary (a date, an amount, a
// dotted or slashed run of numbers), nor a dash next to a letter (an id).
func TestCardInAURLPathSegment(t *testing.T) {
	s, err := pii.New(pii.Config{Kinds: []pii.Kind{pii.KindCard}})
	require.NoError(t, err)
	for text, want := range map[string]string{
		"https://img.example/u/4111-1111-1111-1111/a.png": "4111-1111-1111-1111",
		"https://img.example/u/4111111111111111/a.png":    "4111111111111111",
		"https://img.example/cards/4111111111111111.png":  "4111111111111111",
		"/files/4111 1111 1111 1111.pdf":                  "4111 1111 1111 1111",
		"card 4111111111111111.Thanks":                    "4111111111111111",
		"https://img.example/2024/4111111111111111/a.png": "",
		"amount 4111111111111111.25":                      "",
		"ORD-4111111111111111":                            "",
		"4111111111111111-abc":                            "",
		"v1.4111111111111111":                             "",
		"https://img.example/4111111111111111/2.png":      "",
		// alone in a path, a number only Maestro's ranges of any length take is an id
		// (TestRandomIDsInURLPaths); in its printed groups, or in text, it is a card
		"https://shop.example/orders/5612345678901230":     "",
		"https://shop.example/orders/604123456789012346/a": "",
		"https://shop.example/orders/6759649826438453":     "6759649826438453",
		"https://shop.example/cards/5612-3456-7890-1230":   "5612-3456-7890-1230",
		"card 5612345678901230, or 604123456789012346":     "604123456789012346",
		"https://shop.example/u/6011000990139424/receipt":  "6011000990139424",
	} {
		var got string
		for _, m := range s.Find(text) {
			got = text[m.Start:m.End]
		}
		assert.Equal(t, want, got, text)
	}
}

// A Visa card has 13, 16 or 19 digits, but any length from 13 to 19 was
// read as one, so an id of 14, 15, 17 or 18 digits starting with a 4 that
// passes the Luhn check (one in ten), a store's variant id in a product
// image's URL ("/variants/44012345678901.png"), was a card, and pii refused
// the call for it. Such a number is no card.
func TestVisaLengths(t *testing.T) {
	s, err := pii.New(pii.Config{Kinds: []pii.Kind{pii.KindCard}})
	require.NoError(t, err)
	for text, want := range map[string]bool{
		"https://shop.example/products/variants/44012345678901.png": false,
		"https://img.example/media/440123456789013.jpg":             false,
		"id 40123456789012343":                                      false,
		"id 401234567890123454":                                     false,
		"card 4222222222222":                                        true,
		"card 4111111111111111":                                     true,
		"card 4111111111111111110":                                  true,
	} {
		assert.Equal(t, want, len(s.Find(text)) > 0, text)
	}
}

// TestCardAfterANumberAndAColon: a card after a number and a colon, as a list's item or a
// time labels it ("1:", "131:", "12:30:"), is found as it is after a word and a colon
// ("id:"), written whole or in its groups; groups joined by colons themselves, as a time's
// are, stay no card without a word naming one, and the colon runs of TestNumbersAreNoCards
// stay none.
func TestCardAfterANumberAndAColon(t *testing.T) {
	assertCardsFound(t, map[string]string{
		"1:4111111111111111":                     "4111111111111111",
		"131:4111111111111111":                   "4111111111111111",
		"id:4111111111111111":                    "4111111111111111",
		"item 2:4111111111111111 ok":             "4111111111111111",
		"1:4111 1111 1111 1111":                  "4111 1111 1111 1111",
		"131:4111-1111-1111-1111":                "4111-1111-1111-1111",
		"12:30:4111111111111111":                 "4111111111111111",
		"at 12:30:4111 1111 1111 1111":           "4111 1111 1111 1111",
		"1:٤١١١ ١١١١ ١١١١ ١١١١":                  "٤١١١ ١١١١ ١١١١ ١١١١",
		"SSN-92.138.109.131:4111 1111 1111 1111": "4111 1111 1111 1111",
	}, []string{"1:4111:1111:1111:1111", "12:30:41:11:11:11:11:11:11", "at 12:30:45 UTC", "ORD-4111:1111:1111:1111"})
}

// TestCardOfAnyLengthAfterANumberAndAColonNamed: a number alone after a number and a colon
// is read as a card at 16 digits only (TestRandomIDsAfterColons), but after a word naming a
// card it is read at every length its network issues, as anywhere else: a Visa of 13 or 19
// digits ("card 1:4222222222222") went out in clear. Without the word it still does, and a
// valid Visa of 13 or 19 digits after a word and a colon ("card:4222222222222") was found and
// is.
func TestCardOfAnyLengthAfterANumberAndAColonNamed(t *testing.T) {
	assertCardsFound(t, map[string]string{
		"card 1:4222222222222":               "4222222222222",
		"Visa 2:4111000000000000001 ok":      "4111000000000000001",
		"card no. 3:4532000000008":           "4532000000008",
		"credit card at 12:30:4222222222222": "4222222222222",
		"card:4222222222222":                 "4222222222222",
		"visa:4539000000000000003":           "4539000000000000003",
		"card 4222222222222:1":               "4222222222222",
	}, []string{"1:4222222222222", "orders:3:4111000000000000001", "4222222222222:1", "card:4111111111111"})
}

// assertCardsFound asserts that each text of found holds one card, the one it maps to, and
// that none of none holds any.
func assertCardsFound(t *testing.T, found map[string]string, none []string) {
	t.Helper()
	s, err := pii.New(pii.Config{Kinds: []pii.Kind{pii.KindCard}})
	require.NoError(t, err)
	for text, card := range found {
		ms := s.Find(text)
		if assert.Len(t, ms, 1, "%q", text) {
			assert.Equal(t, card, text[ms[0].Start:ms[0].End], "%q", text)
		}
	}
	for _, text := range none {
		assert.Empty(t, s.Find(text), "%q", text)
	}
}

// TestCardAfterATimeAndASpace: a colon run's last group, read again as the start of a run of
// its own (TestCardAfterANumberAndAColon), does not hide a card the run after it holds read
// without it: the groups of a card of any length from three digits joined by one space or a
// dash, and one copied out of a form's fields, after a time and a space, are found as they
// are alone.
func TestCardAfterATimeAndASpace(t *testing.T) {
	s, err := pii.New(pii.Config{Kinds: []pii.Kind{pii.KindCard}})
	require.NoError(t, err)
	for _, card := range []string{"4111 11111111 1111", "4111-11111111-1111", "4111 1111-1111 1111", "4111 1111 1111 1111"} {
		for _, before := range []string{"at 12:30:41 ", "12:30 ", "1:2 ", "step 1:30 "} {
			text := before + card + " end"
			ms := s.Find(text)
			if assert.Len(t, ms, 1, "%q", text) {
				assert.Equal(t, card, text[ms[0].Start:ms[0].End], "%q", text)
			}
		}
	}
}
