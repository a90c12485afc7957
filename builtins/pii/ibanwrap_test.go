package pii_test

import "testing"

// TestStreamedIBANWrappedAfterASpaceMaskedAsWhole: an IBAN wrapped over lines whose line ends
// in a space or whose next line is indented goes out as the whole text is masked, cut at
// every byte: its first groups went out in clear, the rest masked as a phone number.
func TestStreamedIBANWrappedAfterASpaceMaskedAsWhole(t *testing.T) {
	c := newStreamedAsWhole(t)
	for _, text := range []string{
		"Hello.\nIBAN DE89 3704 0044 \n0532 0130 00 ok\n", "Hello.\nIBAN DE89 3704\n    0044 0532 0130 00\n",
		"Hello.\nGB29 NWBK \r\n  6016 1331 9268 19 ok\n",
	} {
		c.check(t, text, []string{text})
		for i := 0; i <= len(text); i++ {
			c.check(t, text, []string{text[:i], text[i:]})
		}
	}
}
