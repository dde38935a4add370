package ignoredirective

import (
	"github.com/google/uuid"
	"github.com/idemkit/idem"
)

func a() {
	//idem:ignore keyentropy // want `directive without a reason`
	_, _ = idem.ParseKey(uuid.NewString())

	_ = 1 //idem:ignore keyentrpy typo in the name // want `names "keyentrpy", which is not an idem analyzer`

	//idem:ignore // want `names no analyzer`

	//idem:ignore nounique a schema kept for a migration test
	_ = 2

	//idem:ignore keyentropy a test of key validation, not an idempotency key
	_, _ = idem.ParseKey(uuid.NewString())

	//idem:ignoreme is not a directive
	_ = 3
}

func b() {
	//idem:ignore keyentropy,nounique two analyzers, one reason
	_ = 4

	//idem:ignore keyentropy,nosuch one unknown // want `names "nosuch"`
	_ = 5
}
