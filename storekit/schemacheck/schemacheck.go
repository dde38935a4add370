// Package schemacheck turns what an SQL store read about its own schema
// into findings, the same way for every SQL store.
package schemacheck

import (
	"fmt"

	"github.com/idemkit/idem"
)

// Schema is what a store read about its schema.
type Schema struct {
	// Table names the records table as its operator writes it.
	Table string
	// HasTable: the records table exists.
	HasTable bool
	// Unique: a unique index or primary key covers exactly (scope, key).
	Unique bool
	// Version is the highest migration applied (0: none recorded); Latest
	// the highest this build embeds.
	Version, Latest int
	// AddUnique is the statement that adds the missing constraint.
	AddUnique string
}

// Findings reports a missing table, a missing unique constraint on
// (scope, key) — without it two claimers of one key can both insert, and
// the effect runs twice — and migrations not applied yet.
func Findings(s Schema) []idem.Finding {
	var out []idem.Finding
	switch {
	case !s.HasTable:
		out = append(out, idem.Finding{Setting: "table " + s.Table, Value: "absent",
			Problem: "the records table does not exist", Fix: "idem migrate --store DSN (or apply the SQL of idem migrate --print)",
			Severity: idem.SeverityRefuse})
	case !s.Unique:
		out = append(out, idem.Finding{Setting: "unique constraint (scope, key)", Value: "absent",
			Problem:  "nothing stops two claimers of one key from both inserting: the effect can run twice",
			Fix:      s.AddUnique + " (after removing duplicate rows), or recreate the table with idem migrate",
			Severity: idem.SeverityRefuse})
	}
	if s.HasTable && s.Version < s.Latest {
		out = append(out, idem.Finding{Setting: "schema version", Value: fmt.Sprintf("%d of %d", s.Version, s.Latest),
			Problem: "migrations this build needs are not applied", Fix: "idem migrate --store DSN",
			Severity: idem.SeverityWarning})
	}
	return out
}
