package mask

import (
	"slices"
	"strconv"
	"strings"
)

// cardWords are the words a key names a card, or its number, by ("card_first", "ccNum",
// "PAN"): read as whole words of the key (keyWords), in lower case.
var cardWords = []string{"card", "cc", "ccn", "ccnum", "ccnumber", "cardnum", "cardnumber", "cardno",
	"creditcard", "pan"}

// cardKeys reports whether keys, those of the fields of an object read as a card's groups
// (readGroups), name the parts of one value: they share one stem and differ only by a counter
// (their last digits, with the same text after them or none), counting up by one from 0 or 1,
// or "a" ("cc1", "cc2", "cc3", "cc4"; "card_0"...; "number_part_1"...; "number[0]"...;
// "group_1_digits"...; "pan-a", "pan-b"...; "ccA", "ccB"...; "0", "1"... and "a", "b"... as an
// array is written as an object), or each holds a card word (cardWords: "card_first",
// "card_second"...). Other keys ("invoice", "line", "sku", "qty") name other things, whose
// codes side by side are no card's groups, though one in twenty passes a card's checks read
// joined by spaces.
func cardKeys(keys []string) bool {
	return counterKeys(keys) || !slices.ContainsFunc(keys, func(k string) bool {
		return !slices.ContainsFunc(keyWords(k), func(w string) bool { return slices.Contains(cardWords, w) })
	})
}

// counterKeys reports whether keys share one stem and end in a counter that counts up by one
// from the first key to the last (keyCounter), from 0 or 1, or "a": the first part of the value
// is the first field so named (years, "2021" to "2024", are no parts).
func counterKeys(keys []string) bool {
	var stem string
	var next int
	var letter bool
	for i, k := range keys {
		s, n, l, ok := keyCounter(k)
		if !ok || (i == 0 && (n > 1 || l && n > 0)) || (i > 0 && (s != stem || n != next || l != letter)) {
			return false
		}
		stem, next, letter = s, n+1, l
	}
	return len(keys) > 1
}

// keyCounter splits the key k into a stem and its counter: its last digits ("cc12": 12), the
// text around them the stem ("number[3]", "group_3_digits": 3), or a letter that ends it,
// counted from "a" as 0, after a separator ("pan-b": 1), after a lower-case letter when upper
// case ("ccB": 1), or alone ("b": 1). ok is false for a key with neither.
func keyCounter(k string) (stem string, n int, letter, ok bool) {
	end := len(k)
	for end > 0 && (k[end-1] < '0' || k[end-1] > '9') {
		end--
	}
	i := end
	for i > 0 && k[i-1] >= '0' && k[i-1] <= '9' {
		i--
	}
	if i < end {
		n, err := strconv.Atoi(k[i:end])
		if err != nil {
			return "", 0, false, false
		}
		// The stem is the text before the counter and the text after it, kept apart by a
		// NUL byte, so "a1b" and "ab1" differ.
		return k[:i] + "\x00" + k[end:], n, false, true
	}
	if k == "" {
		return "", 0, false, false
	}
	c := k[len(k)-1]
	lower := c | 0x20
	if lower < 'a' || lower > 'z' {
		return "", 0, false, false
	}
	stem = k[:len(k)-1]
	if stem != "" {
		before := stem[len(stem)-1]
		upper := c >= 'A' && c <= 'Z'
		if !strings.ContainsRune("_-. ", rune(before)) && !(upper && before >= 'a' && before <= 'z') {
			return "", 0, false, false
		}
	}
	return stem, int(lower - 'a'), true, true
}

// keyWords returns the words of the key k in lower case: its runs of letters, split where a
// lower-case letter is followed by an upper-case one ("cardNumber") and where an upper-case
// run ends before a word ("PANGroup": "pan", "group").
func keyWords(k string) []string {
	var words []string
	start := -1
	isUpper := func(c byte) bool { return c >= 'A' && c <= 'Z' }
	isLower := func(c byte) bool { return c >= 'a' && c <= 'z' }
	for i := 0; i <= len(k); i++ {
		letter := i < len(k) && (isUpper(k[i]) || isLower(k[i]))
		split := !letter || (start >= 0 && isUpper(k[i]) && (isLower(k[i-1]) || (i+1 < len(k) && isLower(k[i+1]) && isUpper(k[i-1]))))
		if split && start >= 0 {
			words = append(words, strings.ToLower(k[start:i]))
			start = -1
		}
		if letter && start < 0 {
			start = i
		}
	}
	return words
}
