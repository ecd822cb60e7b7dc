package gateway

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/arizuko/arizukod/internal/fakemodel"
)

// TestModelJudgesTheExactKeys: the fields the gateway judges are read from their one exact
// key. A body whose duplicate or case-variant key says something else than the key judged
// (encoding/json matches keys case-insensitively and takes the last) is refused naming the
// key, before anything reaches the upstream.
func TestModelJudgesTheExactKeys(t *testing.T) {
	fake := fakemodel.Start()
	defer fake.Close()
	up, _ := url.Parse(fake.URL)
	const tok = "arz-this-turns-token-0123456789"
	for _, tc := range []struct {
		name, body string
		code       int
		field      string // named in the refusal
	}{
		{"case variant", `{"model":"claude-x","MODEL":"allowed","max_tokens":5}`, 400, `MODEL: a case variant of "model"`},
		{"case variant first", `{"Model":"allowed","model":"claude-x","max_tokens":5}`, 400, `Model: a case variant of "model"`},
		{"kelvin sign", `{"model":"allowed","max_to\u212aens":5,"max_tokens":5}`, 400, `a case variant of "max_tokens"`},
		{"duplicate", `{"model":"allowed","model":"claude-x","max_tokens":5}`, 400, "model: the key appears twice"},
		{"escaped duplicate", `{"mod\u0065l":"claude-x","model":"allowed","max_tokens":5}`, 400, "model: the key appears twice"},
		{"max_tokens twice", `{"model":"allowed","max_tokens":5,"max_tokens":100000}`, 400, "max_tokens: the key appears twice"},
		{"stream variant", `{"model":"allowed","max_tokens":5,"stream":false,"STREAM":true}`, 400, `STREAM: a case variant of "stream"`},
		{"model not a string", `{"model":["allowed"],"max_tokens":5}`, 400, "model: must be a string"},
		{"max_tokens not an integer", `{"model":"allowed","max_tokens":"5"}`, 400, "max_tokens: must be an integer"},
		{"max_tokens zero", `{"model":"allowed","max_tokens":0}`, 400, "max_tokens: must be an integer"},
		{"stream not a bool", `{"model":"allowed","max_tokens":5,"stream":"yes"}`, 400, "stream: must be true or false"},
		{"not an object", `["model","allowed"]`, 400, "not a JSON object"},
		{"not JSON", `{"model":"allowed",`, 400, "not JSON"},
		// Keys below the top level and in strings are the upstream's business.
		{"nested keys", `{"metadata":{"MODEL":"x","model":"y"},"model":"allowed","max_tokens":5,"messages":[{"role":"user","content":"{\"MODEL\":\"x\"}"}]}`, 200, ""},
		{"escaped exact key", `{"mod\u0065l":"allowed","max_tokens":5}`, 200, ""},
		{"spaces", " {\n \"model\" :\t\"allowed\" , \"max_tokens\" : 5 }\n", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c, _ := startModel(t, up, func(c *ModelConfig) { c.Models = []string{"allowed"} })
			n := len(fake.Requests())
			resp, body := post(t, c, "/v1/messages", tok, tc.body)
			if resp.StatusCode != tc.code {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, tc.code)
			}
			reached := len(fake.Requests()) - n
			if tc.code != 200 {
				if typ, msg := apiErrorOf(t, body); typ != "invalid_request_error" || !strings.Contains(msg, tc.field) {
					t.Errorf("%s: want an invalid_request_error naming %s", body, tc.field)
				}
				if reached != 0 {
					t.Errorf("a refused request reached the upstream")
				}
			} else if reached != 1 || fake.Requests()[n].Body["model"] != "allowed" {
				t.Errorf("the upstream saw %d requests", reached)
			}
		})
	}
}

func TestMembers(t *testing.T) {
	body := `{"a":1,"b\"":{"c":[1,"]}"]},"d":"x\\","e":true,"f":null,"g":-1.5e3,"h":[]}`
	var keys, values []string
	if err := members([]byte(body), func(k string, v []byte) error {
		keys, values = append(keys, k), append(values, string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", `b"`, "d", "e", "f", "g", "h"}
	wantV := []string{"1", `{"c":[1,"]}"]}`, `"x\\"`, "true", "null", "-1.5e3", "[]"}
	if strings.Join(keys, " ") != strings.Join(want, " ") || strings.Join(values, " ") != strings.Join(wantV, " ") {
		t.Errorf("keys %q values %q", keys, values)
	}
}

// FuzzMembers holds members to encoding/json's reading of a valid object: the same keys,
// decoded, with the same raw values, in order.
func FuzzMembers(f *testing.F) {
	for _, seed := range []string{
		`{"a":1,"b\"":{"c":[1,"]}"]},"d":"x\\","e":true,"f":null,"g":-1.5e3,"h":[]}`,
		` { "mod\u0065l" : "m" , "max_tokens":[{"x":"\\\""}] } `,
		`{}`, `{"":""}`, `{"a":{"b":{"c":{}}},"a":[[[]]]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !json.Valid([]byte(body)) || !strings.HasPrefix(strings.TrimLeft(body, " \t\r\n"), "{") {
			return
		}
		type member struct{ key, value string }
		var want []member
		dec := json.NewDecoder(strings.NewReader(body))
		dec.Token()
		for dec.More() {
			k, _ := dec.Token()
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			want = append(want, member{k.(string), string(v)})
		}
		var got []member
		if err := members([]byte(body), func(k string, v []byte) error {
			got = append(got, member{k, string(v)})
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: members %q, encoding/json %q", body, got, want)
		}
		for i := range got {
			// A key too long to be a judged one is handed on undecoded.
			long := len(got[i].key) > 2+6*len("max_tokens")
			if got[i].value != want[i].value || !long && got[i].key != want[i].key ||
				long && !bytes.Equal(bytes.TrimSpace([]byte(got[i].key)), []byte(got[i].key)) {
				t.Fatalf("%q: member %d is %q, encoding/json says %q", body, i, got[i], want[i])
			}
		}
	})
}
