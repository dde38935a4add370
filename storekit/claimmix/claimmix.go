// Package claimmix tracks whether a store's recent claims found an existing
// record, so that the store can pick the cheaper claim path: a plain read
// first while duplicates dominate (a replay then costs exactly one read and
// never touches the write path), the claim statement straight away while
// first-time claims dominate (saving them the read). Both paths give the
// same answers — the read decides nothing, the store's atomic claim does —
// only their cost differs.
package claimmix

import "sync/atomic"

// Bound caps the score, so a change of workload is noticed within a few
// dozen claims.
const Bound = 16

// Mix is the recent balance of duplicates and first-time claims. The zero
// value starts in the read-first mode. It is safe for concurrent use.
type Mix struct{ score atomic.Int32 }

// ReadFirst reports whether recent claims were mostly duplicates.
func (m *Mix) ReadFirst() bool { return m.score.Load() >= 0 }

// Observe records whether a claim found an existing record.
func (m *Mix) Observe(existing bool) {
	d := int32(-1)
	if existing {
		d = 1
	}
	if v := m.score.Load() + d; v >= -Bound && v <= Bound {
		m.score.Store(v) // racy by design: a lost update only delays the switch
	}
}

// Pin puts the mix at the end of its range, in the read-first mode or the
// claim-first one, as after a long run of that kind of claim. For tests.
func (m *Mix) Pin(readFirst bool) {
	if readFirst {
		m.score.Store(Bound)
	} else {
		m.score.Store(-Bound)
	}
}

// Score returns the current balance, for test messages.
func (m *Mix) Score() int32 { return m.score.Load() }
