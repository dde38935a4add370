package unkeyedtool_test

import (
	"testing"

	"github.com/idemkit/idem/idemvet/internal/vettest"
	"github.com/idemkit/idem/idemvet/unkeyedtool"
)

func TestUnkeyedTool(t *testing.T) {
	vettest.Run(t, unkeyedtool.Analyzer, "unkeyedtool")
}
