package runtime_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/agentc-dev/agentc/runtime"
)

// FuzzDataURL: any data: URL an image part holds is read without a panic,
// and the text the layers read in it (Attachment) is the data a provider
// is sent of it (DataSource).
func FuzzDataURL(f *testing.F) {
	for _, s := range []string{"data:", "data:text/plain", "data:text/plain,a%4", "data:text/plain,%zz", "data:;base64,QUJD", "DATA:\ttext/plain;base64,QU JD",
		"data:text/plain;charset=latin1,a", "data:text/plain;base64 ,QUJD", "data:a,b,c", "data:text/plain,%2541", "data:text/plain;base64,QUJ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, u string) {
		p := runtime.ContentPart{Type: runtime.PartImage, ImageURL: u}
		text, carried := p.Attachment()
		_ = p.HeldText()
		_ = p.Unread()
		_, _ = runtime.CanonicalDataURL(u)
		media, data, ok := runtime.DataSource(u)
		if text == "" || !ok {
			return
		}
		if !carried {
			t.Fatalf("%q: text %q not carried", u, text)
		}
		sent, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			sent, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(data, "="))
		}
		if err != nil || string(sent) != text {
			t.Fatalf("%q: the layers read %q, the provider is sent %q (%s, %v)", u, text, sent, media, err)
		}
	})
}
