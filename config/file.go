package config

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/BurntSushi/toml"
)

// tables are the file's tables; every other key is a value.
var tables = []string{"limits", "memory", "model", "delivery", "metrics", "tracing", "retention", "kubernetes"}

// errMark stops a decode whose only purpose is the position of a key.
var errMark = errors.New("mark")

// unmarshaler hands one TOML value to a function. Decoding a Primitive into
// it makes the TOML library report a failure with the key and its line.
type unmarshaler func(v any) error

func (u unmarshaler) UnmarshalTOML(v any) error { return u(v) }

// decode applies the file's keys in file order. Values are decoded one by
// one from Primitives, so that every error carries its line and the first
// mistake in the file is the one reported. Keys are matched exactly: the
// TOML library alone would also accept a key spelled in another case.
func (l *loader) decode(path string, data []byte) error {
	var top map[string]toml.Primitive
	md, err := toml.Decode(string(data), &top)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return &Error{Source: path, Line: pe.Position.Line, Err: fmt.Errorf("invalid TOML: %s", pe.Message)}
		}
		return &Error{Source: path, Err: err}
	}
	prims := map[string]toml.Primitive{}
	for k, p := range top {
		prims[toml.Key{k}.String()] = p
	}
	for _, t := range tables {
		p, ok := top[t]
		if !ok {
			continue
		}
		if err := l.value(&md, path, t, p, isTable); err != nil {
			return err
		}
		var sub map[string]toml.Primitive
		if err := md.PrimitiveDecode(p, &sub); err != nil {
			return &Error{Source: path, Line: lineOf(&md, p), Key: t, Err: err}
		}
		for k, sp := range sub {
			prims[toml.Key{t, k}.String()] = sp
		}
	}
	if p, ok := top["webhook"]; ok {
		if err := l.webhooks(&md, path, p); err != nil {
			return err
		}
	}
	if p, ok := top["prices"]; ok {
		if err := l.prices(&md, path, p); err != nil {
			return err
		}
	}
	for _, k := range md.Keys() {
		name := k.String()
		if slices.Contains(tables, name) || k[0] == "webhook" || k[0] == "prices" || inValue(k) {
			continue
		}
		set, ok := fileKeys[name]
		if !ok {
			return &Error{Source: path, Line: keyLine(&md, prims, k), Key: name, Err: errors.New("unknown key")}
		}
		if err := l.value(&md, path, name, prims[name], set); err != nil {
			return err
		}
		l.set[name] = true
		l.lines[name] = lineOf(&md, prims[name])
	}
	return nil
}

// inValue says whether k is a key inside a value that is a table (node_selector): the
// value's setter judged it whole.
func inValue(k toml.Key) bool {
	for i := 1; i < len(k); i++ {
		if _, ok := fileKeys[k[:i].String()]; ok {
			return true
		}
	}
	return false
}

// value decodes the Primitive p of key name with set.
func (l *loader) value(md *toml.MetaData, path, name string, p toml.Primitive, set setter) error {
	var failed error
	err := md.PrimitiveDecode(p, unmarshaler(func(v any) error {
		failed = set(l.c, v)
		return failed
	}))
	if err == nil {
		return nil
	}
	if failed == nil {
		failed = err
	}
	return &Error{Source: path, Line: parseLine(err), Key: name, Err: failed}
}

func isTable(_ *Config, v any) error {
	if _, ok := v.(map[string]any); !ok {
		return fmt.Errorf("want a table, not %s", typeName(v))
	}
	return nil
}

// keyLine is the line of k or of its closest enclosing key, 0 if unknown.
func keyLine(md *toml.MetaData, prims map[string]toml.Primitive, k toml.Key) int {
	for i := len(k); i > 0; i-- {
		if p, ok := prims[k[:i].String()]; ok {
			return lineOf(md, p)
		}
	}
	return 0
}

// lineOf is the line where the TOML library saw p's key.
func lineOf(md *toml.MetaData, p toml.Primitive) int {
	return parseLine(md.PrimitiveDecode(p, unmarshaler(func(any) error { return errMark })))
}

func parseLine(err error) int {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return pe.Position.Line
	}
	return 0
}

// typeName names the TOML type of a decoded value.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	}
	return fmt.Sprintf("%T", v)
}
