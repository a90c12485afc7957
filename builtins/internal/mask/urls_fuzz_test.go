package mask_test

import (
	"strings"
	"testing"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/runtime"
)

// FuzzURLText: any URL an image part holds, a data: URL's head or a
// malformed escape, is read without a panic, in at most three readings.
func FuzzURLText(f *testing.F) {
	for _, s := range []string{"https://h/a%4", "https://h/%zz?q=a+b", "data:", "data:text/plain", "data:text/plain;name=a%2", "DATA:\t,x",
		"//", "http://u@h\\p?x#y", "https://h?%%%", "data:;base64,%41", "data:a,b,c", "https://h/" + strings.Repeat("%25", 50)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		msgs := []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartImage, ImageURL: u}}}}
		for p := range mask.PartURLs(msgs, false) {
			if text := mask.URLText(p.URL); len(text) > 3*len(p.URL)+2 {
				t.Fatalf("%q: read as %d bytes", p.URL, len(text))
			}
		}
	})
}
