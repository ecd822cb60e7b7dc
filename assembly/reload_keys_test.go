package assembly

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arizuko/arizukod/config"
)

// TestReloadNamesEveryKey: a change of any setting of the configuration is either applied
// by a reload and named in its "configuration reloaded" entry (changedKeys), or named as
// needing a restart (restartKeys); none is dropped without a word.
func TestReloadNamesEveryKey(t *testing.T) {
	base := func() *config.Config {
		c, err := config.Load(config.ModeUser, "", func(k string) string { return map[string]string{"HOME": "/home/u"}[k] })
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var leaves [][]int
	var walk func(typ reflect.Type, path []int)
	walk = func(typ reflect.Type, path []int) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			p := append(slices.Clone(path), i)
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, p)
				continue
			}
			leaves = append(leaves, p)
		}
	}
	walk(reflect.TypeFor[config.Config](), nil)
	for _, path := range leaves {
		old, cfg := base(), base()
		v := reflect.ValueOf(cfg).Elem().FieldByIndex(path)
		var parts []string
		for i := range path {
			parts = append(parts, reflect.TypeFor[config.Config]().FieldByIndex(path[:i+1]).Name)
		}
		name := strings.Join(parts, ".")
		if name == "Source" {
			continue
		}
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Uint32:
			v.SetUint(v.Uint() + 1)
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Slice:
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
		case reflect.Map:
			m := reflect.MakeMap(v.Type())
			m.SetMapIndex(reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem())
			v.Set(m)
		case reflect.Pointer:
			if v.Type() != reflect.TypeFor[*time.Location]() {
				t.Fatalf("%s: a %s: teach this test to change it", name, v.Type())
			}
			v.Set(reflect.ValueOf(time.FixedZone("X", 3600)))
		default:
			t.Fatalf("%s: a %s: teach this test to change it", name, v.Type())
		}
		var named []string
		for _, k := range restartKeys {
			if !reflect.DeepEqual(k.get(old), k.get(cfg)) {
				named = append(named, "restart "+k.key)
			}
		}
		named = append(named, changedKeys(old, cfg)...)
		if len(named) == 0 {
			t.Errorf("a change of Config.%s is neither reloaded nor named as needing a restart", name)
		} else {
			t.Logf("Config.%s: %s", name, strings.Join(named, ", "))
		}
	}
}
