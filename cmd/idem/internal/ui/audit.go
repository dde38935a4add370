package ui

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"
)

// AuditEntry is one decision taken through the dashboard, as the audit
// log keeps it (one JSON object a line).
type AuditEntry struct {
	At       time.Time `json:"at"`
	Operator string    `json:"operator"`
	Scope    string    `json:"scope"`
	Key      string    `json:"key"`
	// Decision is succeeded, failed or released.
	Decision string `json:"decision"`
	Status   int    `json:"status,omitempty"`
	Reason   string `json:"reason"`
	// FromFence is the record's fence when decided; ToFence the fence of
	// the decided record (0 when released).
	FromFence int64  `json:"from_fence"`
	ToFence   int64  `json:"to_fence,omitempty"`
	Remote    string `json:"remote,omitempty"`
}

// auditLog appends entries to a file and reads a record's back. Appends
// are fsync'd: the trail must outlive a crash of the dashboard.
type auditLog struct {
	path string
	mu   sync.Mutex
}

func (a *auditLog) append(e AuditEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// forRecord returns the entries for (scope, key), oldest first. A log
// that does not exist yet holds none.
func (a *auditLog) forRecord(scope, key string) ([]AuditEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f, err := os.Open(a.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var e AuditEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Scope == scope && e.Key == key {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}
