package pii

import "github.com/agentc-dev/agentc/builtins/internal/mask"

// items returns the personal data the scanner finds in text as items to mask whole
// (mask.Transcript.AcrossParts, mask.Elements), labelled with their kind.
func (s *Scanner) items(text string) []mask.Item {
	var out []mask.Item
	for _, mt := range s.Find(text) {
		out = append(out, mask.Item{From: mt.Start, To: mt.End, Start: mt.Start, End: mt.End, With: Placeholder(mt.Kind), Label: string(mt.Kind), EndsAtBreak: true})
	}
	return out
}
