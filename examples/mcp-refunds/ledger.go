package main

import (
	"context"
	"database/sql"
	"fmt"
)

// ledger is the refunds table: the effect the tool must not repeat.
type ledger struct{ db *sql.DB }

type refund struct {
	ID          string `json:"refund_id"`
	ChargeID    string `json:"charge_id"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
	Reason      string `json:"reason,omitempty"`
	// Key is the idempotency key the refund was issued under, as a
	// payment provider would receive it.
	Key string `json:"idempotency_key"`
}

func newLedger(ctx context.Context, db *sql.DB) (*ledger, error) {
	// The unique key column is what a payment provider does with a
	// forwarded key; idem keeps the agent from reaching it twice.
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS refunds (
		seq INTEGER PRIMARY KEY AUTOINCREMENT,
		charge_id TEXT NOT NULL,
		amount_cents INTEGER NOT NULL,
		currency TEXT NOT NULL,
		reason TEXT NOT NULL,
		idempotency_key TEXT NOT NULL UNIQUE
	)`)
	if err != nil {
		return nil, fmt.Errorf("create refunds table: %w", err)
	}
	return &ledger{db: db}, nil
}

func (l *ledger) insert(ctx context.Context, r refund) (refund, error) {
	var seq int64
	err := l.db.QueryRowContext(ctx, `INSERT INTO refunds (charge_id, amount_cents, currency, reason, idempotency_key)
		VALUES (?, ?, ?, ?, ?) RETURNING seq`, r.ChargeID, r.AmountCents, r.Currency, r.Reason, r.Key).Scan(&seq)
	if err != nil {
		return refund{}, err
	}
	r.ID = fmt.Sprintf("re_%06d", seq)
	return r, nil
}

func (l *ledger) list(ctx context.Context, chargeID string) ([]refund, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT seq, charge_id, amount_cents, currency, reason, idempotency_key
		FROM refunds WHERE charge_id = ? ORDER BY seq`, chargeID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	rs := []refund{}
	for rows.Next() {
		var r refund
		var seq int64
		if err := rows.Scan(&seq, &r.ChargeID, &r.AmountCents, &r.Currency, &r.Reason, &r.Key); err != nil {
			return nil, err
		}
		r.ID = fmt.Sprintf("re_%06d", seq)
		rs = append(rs, r)
	}
	return rs, rows.Err()
}

// count returns how many refunds were issued in all.
func (l *ledger) count(ctx context.Context) (n int, err error) {
	err = l.db.QueryRowContext(ctx, `SELECT count(*) FROM refunds`).Scan(&n)
	return n, err
}
