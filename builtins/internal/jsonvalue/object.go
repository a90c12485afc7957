package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
)

// Object is a JSON object as a text writes it: its members in the order written (a key may
// be written twice, and both members are kept). A model reads a JSON text in that order, not
// in the order of its keys, so MapTextJoined reads the values of an Object in it, and an
// Object is written back so (MarshalJSON). DecodeOrdered returns the objects of a text as
// Objects.
type Object struct {
	Keys   []string
	Values []any
}

// MarshalJSON writes the members of o in their order, its strings without HTML escapes.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := writeValue(&b, enc, o); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeValue writes v as JSON to b, through enc. The objects and arrays an Object holds are
// written here, not by encoding/json, which checks again the text each MarshalJSON returns
// in every object around it: objects nested n deep cost a time that grew with n².
func writeValue(b *bytes.Buffer, enc *json.Encoder, v any) error {
	switch x := v.(type) {
	case Object:
		b.WriteByte('{')
		for i, k := range x.Keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeValue(b, enc, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeValue(b, enc, x.Values[i]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case []any:
		if x == nil {
			b.WriteString("null")
			return nil
		}
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeValue(b, enc, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	}
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // the line break Encode ends with
	return nil
}

// DecodeOrdered decodes the JSON text s: its objects as Object (their members in the order
// written), its arrays as []any, its numbers as json.Number. Text after the value is an
// error.
func DecodeOrdered(s string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the JSON value")
	}
	return v, nil
}

func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		var o Object
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := k.(string)
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			o.Keys, o.Values = append(o.Keys, key), append(o.Values, v)
		}
		_, err := dec.Token() // '}'
		return o, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return tok, nil
}

// mapObject is mapLeaves for an Object: its values are read in the order written, and its
// keys renamed as renameKeys renames them, in that order.
func mapObject(x Object, f func(string) (string, int), other func(any) (any, int), rd readers) (any, int) {
	vals := make([]any, len(x.Values))
	total := 0
	for i, k := range x.Keys {
		e, m := rd.member(k, x.Values[i])
		vals[i], total = e, total+m
	}
	total += rd.named(x.Keys, vals)
	total += mapRunsInPlace(vals, x.Keys, f, other, rd)
	key := rd.keyFunc(f)
	keys := make([]string, len(x.Keys))
	renamed := make([]bool, len(x.Keys))
	taken := map[string]bool{}
	for i, k := range x.Keys {
		keys[i] = k
		if nk, n := key(k); n > 0 && nk != k {
			keys[i], renamed[i] = nk, true
			total += n
			continue
		}
		taken[k] = true
	}
	for i, k := range keys {
		if !renamed[i] {
			continue
		}
		name := k
		for j := 2; taken[name]; j++ {
			name = k + "#" + strconv.Itoa(j)
		}
		keys[i], taken[name] = name, true
	}
	return Object{Keys: keys, Values: vals}, total
}
