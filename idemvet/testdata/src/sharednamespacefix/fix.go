package sharednamespacefix

import (
	"fmt"

	"github.com/idemkit/idem"
)

func chargeKey(id string) (idem.Key, error) {
	return idem.ParseKey(fmt.Sprintf("charge:%s", id)) // want `has no version`
}

func refundKey(id string) (idem.Key, error) {
	return idem.ParseKey("refund/" + id) // want `has no version`
}
