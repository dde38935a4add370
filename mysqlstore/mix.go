package mysqlstore

import "sync/atomic"

// claimMix tracks whether recent claims found an existing record, so Claim
// can pick the cheaper path: a SELECT first when duplicates dominate (a
// replay then costs one read instead of a failed INSERT and a read), the
// INSERT straight away when first-time claims dominate (saving them the
// read). Both paths give the same answers; only their cost differs.
type claimMix struct{ score atomic.Int32 }

// mixBound caps the score, so a change of workload is noticed within a
// few dozen claims.
const mixBound = 16

func (m *claimMix) readFirst() bool { return m.score.Load() >= 0 }

// observe records whether a claim found an existing record.
func (m *claimMix) observe(existing bool) {
	d := int32(-1)
	if existing {
		d = 1
	}
	if v := m.score.Load() + d; v >= -mixBound && v <= mixBound {
		m.score.Store(v) // racy by design: a lost update only delays the switch
	}
}
