package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/storekit/sqlcodec"
)

func (o ops) resolve(ctx context.Context, p idem.ResolveParams) (*idem.Record, error) {
	from, err := fromStates(p.From)
	if err != nil {
		return nil, err
	}
	where := ` WHERE scope = ? AND key = ? AND (? = 0 OR fence = ?) AND state IN (` + from + `)`
	args := []any{p.Scope, p.Key, p.Fence, p.Fence}
	var q string
	switch {
	case p.Release:
		q = `DELETE FROM idem_records` + where
	case p.To.Terminal():
		q = `UPDATE idem_records SET state = ?, fence = fence + 1, attempt_id = ?, result = ?,
			completed_at = ?, expires_at = ?` + where
		args = append([]any{string(p.To), p.AttemptID, sqlcodec.Bytes(p.Result), sqlcodec.Micros(p.Now), sqlcodec.Micros(p.ExpiresAt)}, args...)
	case p.To == idem.StateInProgress:
		q = `UPDATE idem_records SET state = 'in_progress', fence = fence + 1, attempt_id = ?,
			result = NULL, lease_until = ?, completed_at = NULL, expires_at = NULL` + where
		args = append([]any{p.AttemptID, sqlcodec.Micros(p.LeaseUntil)}, args...)
	default:
		return nil, badParam("resolve: target state %q is not succeeded, failed or in_progress", p.To)
	}
	r, err := writeReturning(ctx, o.write, q+` RETURNING `+columns, args...)
	if !errors.Is(err, sql.ErrNoRows) {
		return r, err
	}
	return nil, o.whyUnchanged(ctx, p.Scope, p.Key)
}

// fromStates renders p.From as a SQL list of literals; empty means unknown.
func fromStates(states []idem.State) (string, error) {
	if len(states) == 0 {
		return `'unknown'`, nil
	}
	quoted := make([]string, len(states))
	for i, st := range states {
		if !st.Valid() {
			return "", badParam("resolve: from state %q is not a record state", st)
		}
		quoted[i] = "'" + string(st) + "'" // valid states hold no quotes
	}
	return strings.Join(quoted, ", "), nil
}

// whyUnchanged explains a fenced write that matched no row: the record is
// absent (ErrNotFound) or has moved on (ErrFenced).
func (o ops) whyUnchanged(ctx context.Context, scope, key string) error {
	_, err := o.get(ctx, o.write, scope, key)
	if err != nil {
		return err
	}
	return fenced(scope, key, "is in another state or under another fence")
}

func (o ops) setMark(ctx context.Context, scope, key string, fence int64, mark idem.Mark) error {
	res, err := o.write.ExecContext(ctx,
		`UPDATE idem_records SET mark = ? WHERE scope = ? AND key = ? AND fence = ?`,
		string(mark), scope, key, fence)
	n, err := affected(res, err)
	if err != nil || n > 0 {
		return err
	}
	return o.whyUnchanged(ctx, scope, key)
}
