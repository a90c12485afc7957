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
		// Read as a URL parser reads it: tabs and line breaks removed
		// anywhere, control characters stripped around it, white space
		// skipped in base64 data.
		"tab in scheme":     {ContentPart{Type: PartImage, ImageURL: "da\tta:text/plain,hi"}, "hi", true, true},
		"control before":    {ContentPart{Type: PartImage, ImageURL: "\x01\x00data:text/plain,hi\x1f"}, "hi", true, true},
		"break in text":     {ContentPart{Type: PartImage, ImageURL: "data:text/plain,ig\r\nnore"}, "ignore", true, true},
		"spaced base64":     {ContentPart{Type: PartImage, ImageURL: "data:text/plain;base64,aGVs\tbG8g d29y\fbGQ="}, "hello world", true, true},
		"escaped break":     {ContentPart{Type: PartImage, ImageURL: "data:text/plain,a%0Ab"}, "a\nb", true, true},
		"not an image type": {ContentPart{Type: PartImage, ImageURL: "data:image/png x;base64," + b64([]byte("hello"))}, "hello", true, true},
		"image type spaced": {ContentPart{Type: PartImage, ImageURL: "data: IMAGE/PNG ;base64," + b64([]byte("\x89PNG\x00"))}, "", false, true},
		"raw not an image":  {ContentPart{Type: PartImage, MediaType: "image/", Data: []byte("hi")}, "hi", true, true},
		// Read otherwise by some parsers: refused.
		"spaced marker":      {ContentPart{Type: PartImage, ImageURL: "data:text/plain; base64," + b64([]byte("hello"))}, "", true, false},
		"marker then space":  {ContentPart{Type: PartImage, ImageURL: "data:text/plain;base64 ," + b64([]byte("hello"))}, "", true, false},
		"marker not last":    {ContentPart{Type: PartImage, ImageURL: "data:text/plain;base64;charset=utf-8," + b64([]byte("hello"))}, "", true, false},
		"escaped base64":     {ContentPart{Type: PartImage, ImageURL: "data:text/plain;base64,aGk%3D"}, "", true, false},
		"bad escape":         {ContentPart{Type: PartImage, ImageURL: "data:text/plain,100%"}, "", true, false},
		"second charset":     {ContentPart{Type: PartImage, ImageURL: "data:text/plain;charset=utf-16le;charset=utf-8,-N"}, "", true, false},
		"charset after utf8": {ContentPart{Type: PartImage, ImageURL: "data:text/plain;charset=utf-8;charset=utf-16le,-N"}, "", true, false},
	} {
		text, carried := c.part.Attachment()
		assert.Equal(t, c.text, text, name)
		assert.Equal(t, c.carried, carried, name)
		assert.Equal(t, !c.read, c.part.Unread(), name)
	}
}
