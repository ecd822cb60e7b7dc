package ipc

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/arizuko/arizukod/internal/exactjson"
)

// Argument limits. They are checked before any grant rule is matched, so
// that the cost of glob matching stays bounded whatever the agent sends.
const (
	MaxTextBytes  = 64 << 10 // text, prompt
	MaxRoutes     = 256      // items of set_routes
	maxShortBytes = 256      // chat_jid, name, schedule, task id
	maxFolderLen  = 255      // folder names (groupfolder.MaxFolderLen)
	maxDescBytes  = 4 << 10  // description
	maxPathBytes  = 4 << 10  // send_document's path
	maxMatchBytes = 1 << 10  // a route match expression
)

// argKind is the JSON type of a tool parameter.
type argKind uint8

const (
	argString argKind = iota
	argInteger
	argRoutes // an array of {seq, match, target} objects
)

// param is one parameter of a tool: it gives both the JSON schema the agent
// sees and the check every call goes through.
type param struct {
	name       string
	kind       argKind
	required   bool
	allowEmpty bool // a required string that may be ""
	max        int  // strings: bytes; routes: items
	enum       []string
	desc       string
}

// argError is a bad argument; its text names the argument.
type argError struct {
	arg string
	msg string
}

func (e *argError) Error() string { return fmt.Sprintf("bad argument %s: %s", e.arg, e.msg) }

func badArg(arg, format string, a ...any) error {
	return &argError{arg: arg, msg: fmt.Sprintf(format, a...)}
}

// args are the checked arguments of one call: strings as string, integers
// as json.Number in plain decimal, routes as []any of map[string]any with
// checked fields. The same map is what grant rules are matched against.
type args map[string]any

func (a args) has(name string) bool { _, ok := a[name]; return ok }

func (a args) str(name string) string { s, _ := a[name].(string); return s }

func (a args) int(name string) int64 {
	n, _ := a[name].(json.Number)
	v, _ := n.Int64()
	return v
}

// routeArg is one checked item of set_routes.
type routeArg struct {
	Seq    int64
	Match  string
	Target string
}

func (a args) routes(name string) []routeArg {
	items, _ := a[name].([]any)
	out := make([]routeArg, 0, len(items))
	for _, it := range items {
		m := args(it.(map[string]any))
		out = append(out, routeArg{Seq: m.int("seq"), Match: m.str("match"), Target: m.str("target")})
	}
	return out
}

// routeItem describes the fields of one set_routes item.
var routeItem = []param{
	{name: "seq", kind: argInteger, required: true, desc: "Order of the route: lower seq is tried first."},
	{name: "match", kind: argString, required: true, allowEmpty: true, max: maxMatchBytes, desc: matchDesc},
	{name: "target", kind: argString, required: true, max: maxFolderLen, desc: "Folder whose inbox receives the matching messages."},
}

const matchDesc = `Whitespace-separated key=glob terms over platform, room, chat_jid, sender and verb, all of which must match, e.g. "platform=telegram verb=mention" or "room=-5075870332"; "" matches every message.`

// decodeArgs turns the arguments of a tools/call into a map, keeping
// numbers exact. Missing arguments are an empty map. A string that is not
// valid UTF-8 as sent (which encoding/json would keep as U+FFFD, so that a
// route's match or a task's prompt would say something else) is refused,
// naming the argument.
func decodeArgs(raw any) (map[string]any, error) {
	if b, ok := raw.(json.RawMessage); ok {
		b = bytes.TrimSpace(b)
		if len(b) == 0 || string(b) == "null" {
			return map[string]any{}, nil
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, badArg("arguments", "not valid JSON: %v", err)
		}
		if path, bad := exactjson.Mangled(b); bad {
			return nil, badArg(cmp.Or(strings.TrimPrefix(path, "."), "arguments"),
				"must be valid UTF-8 (an invalid byte or an unpaired surrogate escape was sent)")
		}
		raw = v
	}
	switch v := raw.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return v, nil
	}
	return nil, badArg("arguments", "must be a JSON object, not %s", jsonType(raw))
}

// checkArgs checks raw against params: no unknown names, required ones
// present, types, sizes and enumerations. JSON null counts as absent.
func checkArgs(params []param, raw map[string]any, prefix string) (args, error) {
	var unknown []string
	for k := range raw {
		if !slices.ContainsFunc(params, func(p param) bool { return p.name == k }) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, badArg(prefix+unknown[0], "no such parameter (parameters: %s)", paramNames(params))
	}
	out := make(args, len(params))
	for _, p := range params {
		v, ok := raw[p.name]
		if !ok || v == nil {
			if p.required {
				return nil, badArg(prefix+p.name, "required")
			}
			continue
		}
		cv, err := checkArg(p, v, prefix+p.name)
		if err != nil {
			return nil, err
		}
		out[p.name] = cv
	}
	return out, nil
}

func checkArg(p param, v any, name string) (any, error) {
	switch p.kind {
	case argString:
		s, ok := v.(string)
		if !ok {
			return nil, badArg(name, "must be a string, not %s", jsonType(v))
		}
		switch {
		case len(s) > p.max:
			return nil, badArg(name, "is %d bytes, at most %d allowed", len(s), p.max)
		case s == "" && !p.allowEmpty:
			return nil, badArg(name, "must not be empty")
		case strings.IndexByte(s, 0) >= 0:
			return nil, badArg(name, "must not contain NUL bytes")
		case !utf8.ValidString(s):
			return nil, badArg(name, "must be valid UTF-8")
		case len(p.enum) > 0 && !slices.Contains(p.enum, s):
			return nil, badArg(name, "%q is not one of %s", s, strings.Join(p.enum, ", "))
		}
		return s, nil
	case argInteger:
		n, err := integer(v)
		if err != nil {
			return nil, badArg(name, "%v", err)
		}
		return json.Number(strconv.FormatInt(n, 10)), nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, badArg(name, "must be an array, not %s", jsonType(v))
	}
	if len(items) > p.max {
		return nil, badArg(name, "has %d items, at most %d allowed", len(items), p.max)
	}
	out := make([]any, len(items))
	for i, it := range items {
		iname := fmt.Sprintf("%s[%d]", name, i)
		obj, ok := it.(map[string]any)
		if !ok {
			return nil, badArg(iname, "must be an object with seq, match and target, not %s", jsonType(it))
		}
		checked, err := checkArgs(routeItem, obj, iname+".")
		if err != nil {
			return nil, err
		}
		out[i] = map[string]any(checked)
	}
	return out, nil
}

// maxExactInt is the largest integer a JSON number survives as a float64.
const maxExactInt = 1 << 53

// integer accepts a JSON integer, or a string of decimal digits (language
// models sometimes quote numbers).
func integer(v any) (int64, error) {
	switch v := v.(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n, nil
		}
		return 0, fmt.Errorf("%s is not an integer", v)
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > maxExactInt {
			return 0, fmt.Errorf("%v is not an integer", v)
		}
		return int64(v), nil
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an integer", v)
		}
		return n, nil
	}
	return 0, fmt.Errorf("must be an integer, not %s", jsonType(v))
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, float32, int, int64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func paramNames(params []param) string {
	if len(params) == 0 {
		return "none"
	}
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

// schema renders params as the JSON schema of a tool's input. The schema
// is made of maps, strings, integers and string slices, which always encode.
func schema(params []param) json.RawMessage {
	b, _ := json.Marshal(objectSchema(params))
	return b
}

func objectSchema(params []param) map[string]any {
	props := make(map[string]any, len(params))
	required := []string{}
	for _, p := range params {
		props[p.name] = paramSchema(p)
		if p.required {
			required = append(required, p.name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func paramSchema(p param) map[string]any {
	var s map[string]any
	switch p.kind {
	case argString:
		s = map[string]any{"type": "string", "maxLength": p.max}
		if !p.allowEmpty && p.required {
			s["minLength"] = 1
		}
		if len(p.enum) > 0 {
			s["enum"] = p.enum
		}
	case argInteger:
		s = map[string]any{"type": "integer"}
	case argRoutes:
		s = map[string]any{"type": "array", "maxItems": p.max, "items": objectSchema(routeItem)}
	}
	s["description"] = p.desc
	return s
}
