// Package migration is what the SQL stores (sqlitestore, pgstore,
// mysqlstore, and a third-party store may use it) share about their schema migrations: the embedded files are
// loaded and checked here, and applied here in order, each store bringing
// its own statements for the bookkeeping table and its own lock.
package migration

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one numbered schema step, a file NNNN_name.sql.
type Migration struct {
	Version int    // NNNN: 1, 2, … without gaps
	File    string // the file name, "0001_records.sql"
	Name    string // what follows the number, "records"
	SQL     string // the file's text
}

// Load reads the files of fsys that match pattern (e.g. "migrations/*.sql")
// in version order. A file not named NNNN_name.sql, or versions that are not
// 1..n, is an error naming pkg: the files are embedded, so this is a build
// defect that the store's tests catch.
func Load(pkg string, fsys fs.FS, pattern string) ([]Migration, error) {
	files, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	ms := make([]Migration, 0, len(files))
	for _, f := range files {
		file := path.Base(f)
		num, name, ok := strings.Cut(strings.TrimSuffix(file, ".sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 || name == "" || !strings.HasSuffix(file, ".sql") {
			return nil, fmt.Errorf("%s: migration file %q is not named NNNN_name.sql", pkg, file)
		}
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, File: file, Name: name, SQL: string(b)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("%s: migrations are not numbered 1..n: found %d at position %d", pkg, m.Version, i+1)
		}
	}
	return ms, nil
}

// Target is where migrations are applied: a store's connection or
// transaction, under the store's lock.
type Target interface {
	// Applied returns the versions the bookkeeping table holds; it
	// creates the table first if it is missing.
	Applied(ctx context.Context) (map[int]bool, error)
	// Apply runs m and records its version in the bookkeeping table.
	Apply(ctx context.Context, m Migration) error
}

// Run applies, in order, each of ms that t has not recorded. An error names
// the migration that failed.
func Run(ctx context.Context, t Target, ms []Migration) error {
	applied, err := t.Applied(ctx)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if err := t.Apply(ctx, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.File, err)
		}
	}
	return nil
}
