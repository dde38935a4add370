package testenv

import (
	"reflect"
	"testing"
)

func TestHostPorts(t *testing.T) {
	for in, want := range map[string][]string{
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable": {"127.0.0.1:5432"},
		"root@tcp(127.0.0.1:3306)/test":                           {"127.0.0.1:3306"},
		"redis+cluster://127.0.0.1:7000,127.0.0.1:7001":           {"127.0.0.1:7000", "127.0.0.1:7001"},
		"127.0.0.1:7000,127.0.0.1:7001":                           {"127.0.0.1:7000", "127.0.0.1:7001"},
		"amqp://guest:guest@127.0.0.1:5672/":                      {"127.0.0.1:5672"},
	} {
		if got := hostPorts(in); !reflect.DeepEqual(got, want) {
			t.Errorf("hostPorts(%q) = %q, want %q", in, got, want)
		}
	}
}
