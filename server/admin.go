package server

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// analystView is an analyst as the admin API shows it.
type analystView struct {
	ID      string       `json:"id"`
	Name    string       `json:"name"`
	Created time.Time    `json:"created_at"`
	Keys    []keyView    `json:"keys"`
	Budgets []budgetView `json:"budgets"`
}

type keyView struct {
	ID      string     `json:"id"`
	Created time.Time  `json:"created_at"`
	Revoked *time.Time `json:"revoked_at,omitempty"`
}

// budgetView is a budget in epsilon and in exact steps of 2^-40.
type budgetView struct {
	Dataset        string  `json:"dataset,omitempty"`
	Analyst        string  `json:"analyst,omitempty"`
	Unit           string  `json:"unit"` // "epsilon", or "rho" for zCDP budgets
	Total          float64 `json:"total"`
	Spent          float64 `json:"spent"`
	Remaining      float64 `json:"remaining"`
	TotalSteps     int64   `json:"total_steps"`
	SpentSteps     int64   `json:"spent_steps"`
	RemainingSteps int64   `json:"remaining_steps"`
}

func viewBudget(b budgetState, unit string) budgetView {
	return budgetView{Unit: unit,
		Total: stepsEpsilon(b.Total), Spent: stepsEpsilon(b.Spent), Remaining: stepsEpsilon(b.Total - b.Spent),
		TotalSteps: b.Total, SpentSteps: b.Spent, RemainingSteps: b.Total - b.Spent,
	}
}

var errNotFound = errors.New("not found")

var namePattern = func(name string) error {
	if name == "" || len(name) > 128 || strings.TrimSpace(name) != name {
		return fmt.Errorf("name %q: use 1 to 128 characters without leading or trailing spaces", name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("name %q: control characters are not allowed", name)
		}
	}
	return nil
}

// createAnalyst creates an analyst with a first API key and returns the key.
func (s *store) createAnalyst(ctx context.Context, name string) (analystView, string, error) {
	var idb [8]byte
	if _, err := rand.Read(idb[:]); err != nil {
		panic(err)
	}
	a := analystView{ID: "a_" + hex.EncodeToString(idb[:]), Name: name, Created: time.Now().UTC()}
	var key string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, s.d.q(`SELECT COUNT(*) FROM analysts WHERE name = ?`), name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return &inputError{msg: fmt.Sprintf("an analyst named %q exists already", name)}
		}
		if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO analysts (id, name, created_at) VALUES (?, ?, ?)`), a.ID, a.Name, a.Created.UnixNano()); err != nil {
			return err
		}
		id, k, h := newKey()
		key = k
		a.Keys = []keyView{{ID: id, Created: a.Created}}
		return s.insertKey(ctx, tx, id, roleAnalyst, a.ID, h)
	})
	if err != nil {
		return analystView{}, "", err
	}
	a.Budgets = []budgetView{}
	return a, key, nil
}

// issueKey issues another key to an analyst.
func (s *store) issueKey(ctx context.Context, analyst string) (keyView, string, error) {
	var kv keyView
	var key string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, s.d.q(`SELECT COUNT(*) FROM analysts WHERE id = ?`), analyst).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errNotFound
		}
		id, k, h := newKey()
		key = k
		kv = keyView{ID: id, Created: time.Now().UTC()}
		return s.insertKey(ctx, tx, id, roleAnalyst, analyst, h)
	})
	return kv, key, err
}

// revokeKey revokes a key; revoking twice is not an error.
func (s *store) revokeKey(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, s.d.q(`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`), time.Now().UnixNano(), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return errNotFound
	}
	return nil
}

// analysts lists every analyst with keys and budgets.
func (s *store) analysts(ctx context.Context) ([]analystView, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, name, created_at FROM analysts ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var out []analystView
	byID := map[string]int{}
	for rows.Next() {
		var a analystView
		var created int64
		if err := rows.Scan(&a.ID, &a.Name, &created); err != nil {
			rows.Close()
			return nil, err
		}
		a.Created = time.Unix(0, created).UTC()
		a.Keys, a.Budgets = []keyView{}, []budgetView{}
		byID[a.ID] = len(out)
		out = append(out, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = s.r.QueryContext(ctx, s.d.q(`SELECT id, analyst_id, created_at, revoked_at FROM api_keys WHERE role = ? ORDER BY created_at`), roleAnalyst)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k keyView
		var analyst string
		var created int64
		var revoked sql.NullInt64
		if err := rows.Scan(&k.ID, &analyst, &created, &revoked); err != nil {
			rows.Close()
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
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	budgets, err := s.budgets(ctx)
	if err != nil {
		return nil, err
	}
	for _, b := range budgets {
		if i, ok := byID[b.Analyst]; ok {
			b.Analyst = ""
			out[i].Budgets = append(out[i].Budgets, b)
		}
	}
	return out, nil
}

// budgets lists every budget row.
func (s *store) budgets(ctx context.Context) ([]budgetView, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT analyst_id, dataset_id, total_steps, spent_steps FROM budgets ORDER BY analyst_id, dataset_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []budgetView
	for rows.Next() {
		var a, d string
		var b budgetState
		if err := rows.Scan(&a, &d, &b.Total, &b.Spent); err != nil {
			return nil, err
		}
		v := viewBudget(b, "") // the caller knows the datasets' units
		v.Analyst, v.Dataset = a, d
		out = append(out, v)
	}
	return out, rows.Err()
}

// entries lists ledger entries, newest first: of one analyst and/or dataset
// when given, before a sequence number when before > 0.
func (s *store) entries(ctx context.Context, analyst, dataset string, before int64, limit int) ([]*entry, error) {
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
	q := `SELECT ` + entryColumns + ` FROM ledger`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC LIMIT ?"
	args = append(args, limit)
	rows, err := s.r.QueryContext(ctx, s.d.q(q), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*entry{}
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// entryByID returns one ledger entry.
func (s *store) entryByID(ctx context.Context, id string) (*entry, error) {
	e, err := scanEntry(s.r.QueryRowContext(ctx, s.d.q(`SELECT `+entryColumns+` FROM ledger WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNotFound
	}
	return e, err
}

// analystNames maps analyst ids to names.
func (s *store) analystNames(ctx context.Context) (map[string]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, name FROM analysts`)
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
