// Package jsonfields lists the JSON names of a struct's fields as
// encoding/json sees them, and walks a JSON document along a Go type.
package jsonfields

import (
	"encoding/json"
	"reflect"
	"strings"
)

// Of maps the JSON names of the struct type t's fields (those of embedded
// structs included, a field of t's own winning over one of theirs) to
// their types.
func Of(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range Of(ft) {
					if _, dup := out[k]; !dup {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// Open reports whether t leaves its JSON form open: an interface, or a
// type that decodes itself (json.RawMessage among them). Pointers are
// followed.
func Open(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType)
}

// Walk reads a JSON document along a Go type, as encoding/json would
// decode it, and asks its hooks about each member and value.
type Walk struct {
	Dec *json.Decoder
	// Member returns the type of the member key of an object read as a
	// struct (fields: Of the struct) at path, or nil to skip its value.
	Member func(path, key string, fields map[string]reflect.Type) (reflect.Type, error)
	// Value, when set, is called with the first token of each value read
	// as a type that does not leave its form open (Open), other than null,
	// before is the decoder's offset before the token; skip skips the
	// value.
	Value func(path string, t reflect.Type, tok json.Token, before int64) (skip bool, err error)
	// Opaque, when set, is called with the whole of each value read as a
	// type that leaves its form open (Open), which is otherwise skipped.
	Opaque func(path string, t reflect.Type, raw json.RawMessage) error
	// Field and Key name the place of a struct's member and of a map's
	// entry from their holder's path; Index that of a list's item.
	Field, Key func(path, key string) string
	Index      func(path string, i int) string
}

// Read reads the next value of the decoder as t at path. An error of a
// hook ends the walk, and so does one of the decoder.
func (w *Walk) Read(t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	open := Open(t)
	if open && w.Opaque != nil {
		var raw json.RawMessage
		if err := w.Dec.Decode(&raw); err != nil {
			return err
		}
		return w.Opaque(path, t, raw)
	}
	before := w.Dec.InputOffset()
	tok, err := w.Dec.Token()
	if err != nil {
		return err
	}
	if w.Value != nil && !open && tok != nil {
		skip, err := w.Value(path, t, tok, before)
		if err != nil {
			return err
		}
		if skip {
			return w.skipRest(tok)
		}
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch {
	case d == '{' && !open && t.Kind() == reflect.Struct:
		fields := Of(t)
		for w.Dec.More() {
			kt, err := w.Dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			ft, err := w.Member(path, key, fields)
			if err != nil {
				return err
			}
			if ft == nil {
				if err := w.Dec.Decode(new(json.RawMessage)); err != nil {
					return err
				}
				continue
			}
			if err := w.Read(ft, w.Field(path, key)); err != nil {
				return err
			}
		}
	case d == '{' && !open && t.Kind() == reflect.Map:
		for w.Dec.More() {
			kt, err := w.Dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			if err := w.Read(t.Elem(), w.Key(path, key)); err != nil {
				return err
			}
		}
	case d == '[' && !open && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
		for i := 0; w.Dec.More(); i++ {
			if err := w.Read(t.Elem(), w.Index(path, i)); err != nil {
				return err
			}
		}
	default:
		// A value the types leave open: skip it.
		return w.skipRest(tok)
	}
	_, err = w.Dec.Token() // the closing delimiter
	return err
}

// skipRest reads the rest of a value whose opening token was read.
func (w *Walk) skipRest(tok json.Token) error {
	if d, ok := tok.(json.Delim); !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := w.Dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}
