package bench

import (
	"context"
	"sync"
)

// memRaw is the raw baseline of memory://: a map under one mutex, the
// least any in-memory store can do.
type memRaw struct {
	mu   sync.Mutex
	rows map[string]*memRow
}

type memRow struct {
	state              string
	fence              int64
	fingerprint        [32]byte
	attempt            string
	result             []byte
	created, completed int64
}

func newMemRaw() *memRaw { return &memRaw{rows: make(map[string]*memRow)} }

func (m *memRaw) insert(_ context.Context, key string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.rows[key]; ok {
		return false, nil
	}
	m.rows[key] = &memRow{state: "in_progress", fence: 1, fingerprint: benchFingerprint, attempt: benchAttempt, created: nowMicros()}
	return true, nil
}

func (m *memRaw) update(_ context.Context, key string, result []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.rows[key]; r != nil {
		r.state, r.result, r.completed = "succeeded", append([]byte(nil), result...), nowMicros()
	}
	return nil
}

func (m *memRaw) read(_ context.Context, key string) (bool, error) {
	m.mu.Lock()
	r := m.rows[key]
	var cp memRow
	if r != nil {
		cp = *r
	}
	m.mu.Unlock()
	_ = cp
	return r != nil, nil
}

func (m *memRaw) close() error { return nil }
