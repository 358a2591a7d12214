package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"time"
)

// Analyst is an analyst with their keys (never a key's secret).
type Analyst struct {
	ID      string
	Name    string
	Created time.Time
	Keys    []Key
}

// CreateAnalyst creates an analyst with a first API key and returns them and
// the key's text, to be shown once. A name already taken is ErrExists.
// actor is the admin key that asked, for the audit trail.
func (db *DB) CreateAnalyst(ctx context.Context, actor, name string) (Analyst, string, error) {
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		panic(err)
	}
	a := Analyst{ID: "a_" + hex.EncodeToString(idb[:]), Name: name, Created: time.Now().UTC()}
	var key string
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, db.d.q(`SELECT COUNT(*) FROM analysts WHERE name = ?`), name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return ErrExists
		}
		if _, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO analysts (id, name, created_at) VALUES (?, ?, ?)`), a.ID, a.Name, a.Created.UnixNano()); err != nil {
			return err
		}
		id, k, h := newKey()
		key = k
		a.Keys = []Key{{ID: id, Created: a.Created}}
		if err := db.insertKey(ctx, tx, id, RoleAnalyst, a.ID, h); err != nil {
			return err
		}
		return db.audit(ctx, tx, AuditEvent{Actor: actor, Action: "analyst.created", Analyst: a.ID, Key: id}, map[string]any{"name": name})
	})
	if err != nil {
		return Analyst{}, "", err
	}
	return a, key, nil
}

// IssueKey issues another key to an analyst (ErrNotFound if there is no
// such analyst) and returns it and its text, to be shown once.
func (db *DB) IssueKey(ctx context.Context, actor, analyst string) (Key, string, error) {
	var kv Key
	var key string
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, db.d.q(`SELECT COUNT(*) FROM analysts WHERE id = ?`), analyst).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return ErrNotFound
		}
		id, k, h := newKey()
		key = k
		kv = Key{ID: id, Created: time.Now().UTC()}
		if err := db.insertKey(ctx, tx, id, RoleAnalyst, analyst, h); err != nil {
			return err
		}
		return db.audit(ctx, tx, AuditEvent{Actor: actor, Action: "key.issued", Analyst: analyst, Key: id}, nil)
	})
	return kv, key, err
}

// RevokeKey revokes a key, an analyst's or an admin key (ErrNotFound if
// there is none with this id); revoking twice is not an error (and is
// recorded once, when it revoked the key).
func (db *DB) RevokeKey(ctx context.Context, actor, id string) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		var role string
		var analyst sql.NullString
		var revoked sql.NullInt64
		err := tx.QueryRowContext(ctx, db.d.q(`SELECT role, analyst_id, revoked_at FROM api_keys WHERE id = ?`), id).Scan(&role, &analyst, &revoked)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return ErrNotFound
		case err != nil:
			return err
		case revoked.Valid:
			return nil
		}
		if _, err := tx.ExecContext(ctx, db.d.q(`UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`), time.Now().UnixNano(), id); err != nil {
			return err
		}
		action := "key.revoked"
		if role == RoleAdmin {
			action = "admin_key.revoked"
		}
		return db.audit(ctx, tx, AuditEvent{Actor: actor, Action: action, Analyst: analyst.String, Key: id}, nil)
	})
}

// Analysts lists every analyst with their keys, by name.
func (db *DB) Analysts(ctx context.Context) ([]Analyst, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, name, created_at FROM analysts ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var out []Analyst
	byID := map[string]int{}
	for rows.Next() {
		var a Analyst
		var created int64
		if err := rows.Scan(&a.ID, &a.Name, &created); err != nil {
			rows.Close()
			return nil, err
		}
		a.Created = time.Unix(0, created).UTC()
		a.Keys = []Key{}
		byID[a.ID] = len(out)
		out = append(out, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = db.r.QueryContext(ctx, db.d.q(`SELECT id, analyst_id, created_at, revoked_at FROM api_keys WHERE role = ? ORDER BY created_at`), RoleAnalyst)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k Key
		var analyst string
		var created int64
		var revoked sql.NullInt64
		if err := rows.Scan(&k.ID, &analyst, &created, &revoked); err != nil {
			return nil, err
		}
		k.Created = time.Unix(0, created).UTC()
		if revoked.Valid {
			t := time.Unix(0, revoked.Int64).UTC()
			k.Revoked = &t
		}
		if i, ok := byID[analyst]; ok {
			out[i].Keys = append(out[i].Keys, k)
		}
	}
	return out, rows.Err()
}

// AnalystNames maps analyst ids to names.
func (db *DB) AnalystNames(ctx context.Context) (map[string]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, name FROM analysts`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, err
		}
		m[id] = name
	}
	return m, rows.Err()
}

// AnalystName returns an analyst's name, or ErrNotFound.
func (db *DB) AnalystName(ctx context.Context, id string) (string, error) {
	var name string
	err := db.readRow(ctx, `SELECT name FROM analysts WHERE id = ?`, id).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return name, err
}
