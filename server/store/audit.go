package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// ActorStart is the audit trail's actor for what the server does at start:
// registering the admin key of a key file, or one it generated.
const ActorStart = "start"

// AuditEvent is one record of the admin audit trail: who (the admin key's
// id), when, what, on which analyst, dataset or key, with the action's
// details. Records are only ever inserted, each in the transaction of the
// change it describes.
type AuditEvent struct {
	Seq     int64           `json:"seq"`
	Created time.Time       `json:"created_at"`
	Actor   string          `json:"actor"`
	Action  string          `json:"action"`
	Analyst string          `json:"analyst_id,omitempty"`
	Dataset string          `json:"dataset,omitempty"`
	Key     string          `json:"key_id,omitempty"`
	Details json.RawMessage `json:"details"`
}

// audit records ev, with details (nil: none) as its Details, in tx, the
// transaction of the change it describes.
func (db *DB) audit(ctx context.Context, tx *sql.Tx, ev AuditEvent, details any) error {
	_, err := db.auditRecord(ctx, tx, ev, details)
	return err
}

// auditRecord is audit, returning the event as recorded.
func (db *DB) auditRecord(ctx context.Context, tx *sql.Tx, ev AuditEvent, details any) (AuditEvent, error) {
	ev.Details = json.RawMessage("{}")
	if details != nil {
		b, err := json.Marshal(details)
		if err != nil {
			return AuditEvent{}, err
		}
		ev.Details = b
	}
	ev.Created = time.Now().UTC()
	null := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	err := tx.QueryRowContext(ctx, db.d.q(`INSERT INTO admin_audit (created_at, actor, action, analyst_id, dataset_id, key_id, details) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq`),
		ev.Created.UnixNano(), ev.Actor, ev.Action, null(ev.Analyst), null(ev.Dataset), null(ev.Key), string(ev.Details)).Scan(&ev.Seq)
	return ev, err
}

// AuditEvents lists the audit trail, newest first: of one analyst and/or
// dataset when given, before a sequence number when before > 0, at most
// limit.
func (db *DB) AuditEvents(ctx context.Context, analyst, dataset string, before int64, limit int) ([]AuditEvent, error) {
	var where []string
	var args []any
	if analyst != "" {
		where, args = append(where, "analyst_id = ?"), append(args, analyst)
	}
	if dataset != "" {
		where, args = append(where, "dataset_id = ?"), append(args, dataset)
	}
	if before > 0 {
		where, args = append(where, "seq < ?"), append(args, before)
	}
	q := `SELECT seq, created_at, actor, action, analyst_id, dataset_id, key_id, details FROM admin_audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC LIMIT ?"
	rows, err := db.r.QueryContext(ctx, db.d.q(q), append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []AuditEvent{}
	for rows.Next() {
		var ev AuditEvent
		var created int64
		var analyst, dataset, key sql.NullString
		var details string
		if err := rows.Scan(&ev.Seq, &created, &ev.Actor, &ev.Action, &analyst, &dataset, &key, &details); err != nil {
			return nil, err
		}
		ev.Created = time.Unix(0, created).UTC()
		ev.Analyst, ev.Dataset, ev.Key = analyst.String, dataset.String, key.String
		ev.Details = json.RawMessage(details)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// SetRetired retires a dataset (retire) or puts it back in service, and
// records it with the operator's note (if any). Retiring a retired dataset,
// or reinstating one in service, changes and records nothing. Nothing is
// deleted either way.
func (db *DB) SetRetired(ctx context.Context, actor, id string, retire bool, note string) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		var retired sql.NullInt64
		err := tx.QueryRowContext(ctx, db.d.q(`SELECT retired_at FROM datasets WHERE id = ?`+db.d.forUpdate), id).Scan(&retired)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return ErrNotFound
		case err != nil:
			return err
		case retired.Valid == retire:
			return nil
		}
		var at any
		action := "dataset.reinstated"
		if retire {
			at, action = time.Now().UnixNano(), "dataset.retired"
		}
		if _, err := tx.ExecContext(ctx, db.d.q(`UPDATE datasets SET retired_at = ? WHERE id = ?`), at, id); err != nil {
			return err
		}
		var details any
		if note != "" {
			details = map[string]string{"note": note}
		}
		return db.audit(ctx, tx, AuditEvent{Actor: actor, Action: action, Dataset: id}, details)
	})
}

// ChangeBudget sets the total of the analyst's budget on a dataset (created
// with defaultTotal if the analyst has none yet; ErrNotFound if there is no
// such analyst) to newTotal of it, and records the change with the
// operator's note, in one transaction that locks the budget row: a charge
// committed at the same time is checked against the old total or the new
// one, never a mix. newTotal refuses a change with an error, which is
// returned as it is, and nothing changes. unit ("epsilon" or "rho") is
// recorded with the totals.
func (db *DB) ChangeBudget(ctx context.Context, actor, analyst, dataset string, defaultTotal int64, unit string, newTotal func(Budget) (int64, error), note string) (Budget, AuditEvent, error) {
	var b Budget
	var ev AuditEvent
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, db.d.q(`SELECT COUNT(*) FROM analysts WHERE id = ?`), analyst).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return ErrNotFound
		}
		if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO budgets (analyst_id, dataset_id, total_steps, spent_steps) VALUES (?, ?, ?, 0) ON CONFLICT DO NOTHING`),
			analyst, dataset, defaultTotal); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, db.d.q(`SELECT total_steps, spent_steps, ledger_bytes FROM budgets WHERE analyst_id = ? AND dataset_id = ?`+db.d.forUpdate),
			analyst, dataset).Scan(&b.Total, &b.Spent, &b.LedgerBytes); err != nil {
			return err
		}
		before := b.Total
		after, err := newTotal(b)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, db.d.q(`UPDATE budgets SET total_steps = ? WHERE analyst_id = ? AND dataset_id = ?`), after, analyst, dataset); err != nil {
			return err
		}
		b.Total = after
		// Spending reads the totals back from the details.
		details := map[string]any{"unit": unit, "total_before_steps": before, "total_after_steps": after, "spent_steps": b.Spent,
			"total_before": stepsValue(before), "total_after": stepsValue(after)}
		if note != "" {
			details["note"] = note
		}
		ev, err = db.auditRecord(ctx, tx, AuditEvent{Actor: actor, Action: "budget.changed", Analyst: analyst, Dataset: dataset}, details)
		return err
	})
	return b, ev, err
}
