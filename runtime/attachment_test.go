package runtime

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAttachment: the data an image part carries in place of an image is
// text the layers read when it is UTF-8, and unread (refused) otherwise.
func TestAttachment(t *testing.T) {
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	for name, c := range map[string]struct {
		part          ContentPart
		text          string
		carried, read bool
	}{
		"utf-8":         {ContentPart{Type: PartImage, ImageURL: "data:text/plain;base64," + b64([]byte("hello"))}, "hello", true, true},
		"utf-8 charset": {ContentPart{Type: PartImage, ImageURL: "data:text/plain;charset=UTF-8,hello%20you"}, "hello you", true, true},
		"upper scheme":  {ContentPart{Type: PartImage, ImageURL: " DATA:text/plain,hi"}, "hi", true, true},
		"svg":           {ContentPart{Type: PartImage, ImageURL: "data:image/svg+xml,<svg/>"}, "<svg/>", true, true},
		"raw data":      {ContentPart{Type: PartImage, MediaType: "text/plain", Data: []byte("hi")}, "hi", true, true},
		"latin-1":       {ContentPart{Type: PartImage, ImageURL: "data:text/plain;base64," + b64([]byte("caf\xe9"))}, "", true, false},
		"utf-16":        {ContentPart{Type: PartImage, ImageURL: "data:text/plain;charset=utf-16le;base64," + b64([]byte("h\x00i\x00"))}, "", true, false},
		"nul":           {ContentPart{Type: PartImage, ImageURL: "data:application/octet-stream;base64," + b64([]byte("h\x00i\x00"))}, "", true, false},
		"bad base64":    {ContentPart{Type: PartImage, ImageURL: "data:text/plain;base64,!!!"}, "", true, false},
		"no comma":      {ContentPart{Type: PartImage, ImageURL: "data:text/plain;base64"}, "", true, false},
		"png":           {ContentPart{Type: PartImage, ImageURL: "data:image/png;base64," + b64([]byte("\x89PNG\x00"))}, "", false, true},
		"url":           {ContentPart{Type: PartImage, ImageURL: "https://example.com/a.txt"}, "", false, true},
		"empty":         {ContentPart{Type: PartImage, ImageURL: "data:text/plain,"}, "", false, true},
		"text part":     {ContentPart{Type: PartText, Text: "x"}, "", false, true},
		"pdf":           {ContentPart{Type: PartDocument, ImageURL: "data:application/pdf;base64,JVBE"}, "", false, false},
	} {
		text, carried := c.part.Attachment()
		assert.Equal(t, c.text, text, name)
		assert.Equal(t, c.carried, carried, name)
		assert.Equal(t, !c.read, c.part.Unread(), name)
	}
}
