package idemmcp_test

import (
	"errors"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/idemmcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCallKey(t *testing.T) {
	t.Parallel()
	a, err := idemmcp.CallKey("conv-1", "call_1")
	if err != nil || a != "mcp-tool-call:v1:conv-1:call_1" {
		t.Fatalf("CallKey = %q, %v", a, err)
	}
	if again, _ := idemmcp.CallKey("conv-1", "call_1"); again != a {
		t.Fatal("CallKey is not stable")
	}
	x, _ := idemmcp.CallKey("a:b", "c")
	y, _ := idemmcp.CallKey("a", "b:c")
	if x == y {
		t.Fatalf("different id pairs gave the same key %q", x)
	}
	if _, err := idemmcp.CallKey("", "call_1"); !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("empty conversation id: %v", err)
	}
}

func TestSetCallKeyCopiesMeta(t *testing.T) {
	t.Parallel()
	shared := mcp.Meta{"other": 1}
	p := &mcp.CallToolParams{Name: "t", Meta: shared}
	if err := idemmcp.SetCallKey(p, "conv", "call"); err != nil {
		t.Fatal(err)
	}
	if p.Meta[idemmcp.MetaKey] != "mcp-tool-call:v1:conv:call" || p.Meta["other"] != 1 {
		t.Fatalf("meta = %v", p.Meta)
	}
	if _, ok := shared[idemmcp.MetaKey]; ok {
		t.Fatal("SetCallKey changed a shared _meta map")
	}
}
