package pii

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCardAfterAShortNumber: a card number after another number (a room's, an item's, a
// quantity) or before one (a security code, a year) is found whole, however its groups are
// laid out, and the number beside it is not taken into it: the groups of a run joined by one
// separator were read as a card only as a whole run (groups of any length) or from the first
// group of a separator (groups joined otherwise), so "room 1 4111 11111111 1111" and
// "room 1 4111-1111-1111-1111" went out in clear.
func TestCardAfterAShortNumber(t *testing.T) {
	s := newScanner(t, KindCard)
	cards := []string{
		"4111 11111111 1111", "4111-11111111-1111", "4111 111111111111", "4111 1111111 11111",
		"3782 822463 10005", "3782-822463-10005", "3782 82246310005",
		"4111 1111 1111 1111", "4111-1111-1111-1111", "4111.1111.1111.1111",
		"4111 1111-1111 1111", "4111-1111 1111.1111", "4111111111111111",
		"4111\u00a01111\u00a01111\u00a01111", "4111\u00a011111111\u00a01111",
	}
	befores := []string{"", "room 1 ", "12:301 302 ", "room 12 ", "room 101 ", "no. 7 ", "1  ", "qty 3, ", "12:30 ", "item 2: ", "1-2 ", "7\u00a0"}
	afters := []string{"", " 2", " 123", " 2027", " end", ", 12"}
	for _, card := range cards {
		for _, before := range befores {
			for _, after := range afters {
				text := before + card + after
				ms := s.Find(text)
				if assert.Len(t, ms, 1, "%q: %v", text, found(text, ms)) {
					assert.Equal(t, card, text[ms[0].Start:ms[0].End], "%q", text)
				}
			}
		}
	}
	// groups of any other length are a card only as all the run holds between its ends and
	// groups of one or two digits: a row of a table of numbers is laid out so, and a card is
	// printed from a group of four digits
	for text, want := range map[string][]string{
		"41111111 11111111":        {"card:41111111 11111111"},
		"room 1 41111111 11111111": {"card:41111111 11111111"},
		"41111111 11111111 12":     {"card:41111111 11111111"},
		"2024 41111111 11111111":   {},
		"41111111 11111111 2024":   {},
		// joined as a table's columns are, each group is read as a number alone is
		"1001\t4111111111111111\t7":  {"card:4111111111111111"},
		"4111111111111111:12:27: ok": {"card:4111111111111111"},
		"1  4111111111111111  2":     {"card:4111111111111111"},
		// joined by a colon to a number, a number alone is a card as in a URL's path
		"1:4111111111119":           {},
		"orders:3:6123456789019":    {},
		"orders:3:4111111111111111": {"card:4111111111111111"},
	} {
		assert.Equal(t, want, found(text, s.Find(text)), "%q", text)
	}
}

// TestCardsAmongShortNumbersAreFound is a property test: a valid card of any network, plain,
// in its printed groups (joined by spaces, dashes, dots, no-break spaces, or spaces, dashes
// and dots mixed) or regrouped after its first four digits in groups of any length from
// three digits joined by a space or a dash, with short numbers before it and after it joined by any separator (the one next to
// it of up to three digits before it and four after it, a room's number or a security code,
// the others of one or two: groups of three digits or more joined by one space are a card's
// groups of any length too, and a card in such groups is read with one number beside it, not
// two: stretchEdge), is found whole, and nothing Find reports survives Redact.
func TestCardsAmongShortNumbersAreFound(t *testing.T) {
	s := newScanner(t, KindCard)
	all := newScanner(t)
	r := rand.New(rand.NewPCG(21, 7))
	short := func(maxLen int) string {
		n := 1 + r.IntN(maxLen)
		b := []byte{byte('1' + r.IntN(9))}
		for len(b) < n {
			b = append(b, byte('0'+r.IntN(10)))
		}
		return string(b)
	}
	joins := []string{" ", "  ", "\u00a0", ", ", ": ", ":", "; ", " - ", " x ", "\n"}
	for iter := 0; iter < 20000; iter++ {
		c := cardSamples[r.IntN(len(cardSamples))]
		digits := validCard(r, c.prefix, c.length)
		var card string
		kind := r.IntN(5)
		if kind == 2 && c.layout[len(c.layout)-1] > 5 {
			kind = 1 // spaces, dashes and dots mixed only in a layout a card is printed in
		}
		switch kind {
		case 0:
			card = digits
		case 1:
			card = formatCard(digits, c.layout, []string{" ", "-", ".", "\u00a0"}[r.IntN(4)])
		case 2:
			// the printed groups, joined by spaces, dashes and dots mixed
			parts := strings.Split(formatCard(digits, c.layout, " "), " ")
			seps := []string{" ", "-", "."}
			first := r.IntN(3)
			card = parts[0]
			for k, p := range parts[1:] {
				sep := seps[r.IntN(3)]
				if k == 0 {
					sep = seps[first]
				} else if k == 1 {
					sep = seps[(first+1+r.IntN(2))%3]
				}
				card += sep + p
			}
		default:
			// groups of any length from three digits after the first four, as text blocks
			// run together cut them
			sep := []string{" ", "-"}[r.IntN(2)]
			parts := []string{digits[:4]}
			for rest := digits[4:]; rest != ""; {
				n := min(len(rest), 3+r.IntN(9))
				if len(rest)-n < 3 {
					n = len(rest)
				}
				parts, rest = append(parts, rest[:n]), rest[n:]
			}
			card = strings.Join(parts, sep)
		}
		var b strings.Builder
		b.WriteString([]string{"", "room ", "paid ", "(", "ref "}[r.IntN(5)])
		// a number alone joined by a colon to another is read as a card at 16 digits only
		// (15 for American Express), as in a URL's path (colonNumber)
		join := func(k int) string {
			j := joins[r.IntN(len(joins))]
			if j == ":" && kind == 0 && k == 1 {
				j = ": "
			}
			return j
		}
		for k := r.IntN(3); k > 0; k-- {
			b.WriteString(short(3 - min(1, k-1)))
			b.WriteString(join(k))
		}
		start := b.Len()
		b.WriteString(card)
		end := b.Len()
		for k, after := 0, r.IntN(3); k < after; k++ {
			b.WriteString(join(k + 1))
			b.WriteString(short(2 + 2*max(0, 1-k)))
		}
		b.WriteString([]string{"", ".", " thanks", ")"}[r.IntN(4)])
		text := b.String()
		ms := s.Find(text)
		covered := 0
		for _, m := range ms {
			covered += max(0, min(m.End, end)-max(m.Start, start))
		}
		// a number beside the card may be read as a card with it, as one of its groups is
		// ("5038 9985 6762 197": a 12-digit card and a code, or a 15-digit one); none hides it
		require.Equal(t, end-start, covered, "iteration %d: %q: %v", iter, text, found(text, ms))
		red, _ := all.Redact(text)
		require.NotContains(t, red, card, "iteration %d: %q", iter, text)
		require.Empty(t, all.Find(red), "iteration %d: %q redacts to %q", iter, text, red)
	}
}

// TestCardWrappedAfterASpaceOrASeparator: a card whose groups wrap over lines is found when
// its line ends in a space or in the separator of its groups, or the next line is indented,
// as text wrapped at a width (after a hyphen, leaving the space before the break) or set out
// in a list writes it: only a line break right after a group joined them.
func TestCardWrappedAfterASpaceOrASeparator(t *testing.T) {
	s := newScanner(t, KindCard)
	for _, card := range []string{
		"4111 1111 \n1111 1111", "4111 1111\n  1111 1111", "4111 1111 \r\n 1111 1111", "4111-1111-\n1111-1111",
		"4111-\n1111-1111-1111", "4111.1111.\n1111.1111", "4111 1111-\n1111 1111", "4111 1111 1111 \n1111",
		"4111\u00a01111\u00a0\r\n1111\u00a01111", "３７８２－\n８２２４６３－\n１０００５",
	} {
		text := "card on file: " + card + " thanks"
		assert.Equal(t, []string{"card:" + card}, found(text, s.Find(text)), "%q", text)
	}
	// a column of numbers stays one, however its lines are indented or end
	for _, text := range []string{"1234 \n5678 \n9012 \n3456", "  1234\n  5678\n  9012\n  3456", "4111-\n-1111"} {
		assert.Empty(t, s.Find(text), "%q", text)
	}
}

// TestSSNWrappedAfterASeparator: a social security number whose line ends in one of its
// separators, the rest on the next line, is found as a card so wrapped is.
func TestSSNWrappedAfterASeparator(t *testing.T) {
	s := newScanner(t, KindSSN)
	for _, ssn := range []string{"123-45-\n6789", "123-\n45-6789", "123 45 \r\n  6789", "123.45.\n6789"} {
		text := "SSN " + ssn + " ok"
		assert.Equal(t, []string{"ssn:" + ssn}, found(text, s.Find(text)), "%q", text)
	}
	for _, text := range []string{"123-45-\n\n6789", "123-45\n-6789", "123-45-\n67890"} {
		assert.Empty(t, s.Find(text), "%q", text)
	}
}
