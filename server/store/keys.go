package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// An API key is "kdp_" + key id (16 hex digits, not secret: it names the key
// in logs and in the admin API) + "_" + secret (256 random bits, base64url).
// The store keeps only SHA-256 of the secret; the key is shown once, when it
// is issued.
const keyPrefix = "kdp_"

// Roles of API keys.
const (
	RoleAdmin   = "admin"
	RoleAnalyst = "analyst"
)

// Key is an API key as the admin API shows it: never its secret.
type Key struct {
	ID      string     `json:"id"`
	Created time.Time  `json:"created_at"`
	Revoked *time.Time `json:"revoked_at,omitempty"`
}

// newKey returns a fresh key id and the full key text.
func newKey() (id, key string, secretHash []byte) {
	var idb [8]byte
	var sec [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		panic(err) // crypto/rand.Read never fails on supported platforms
	}
	if _, err := rand.Read(sec[:]); err != nil {
		panic(err)
	}
	id = hex.EncodeToString(idb[:])
	secret := base64.RawURLEncoding.EncodeToString(sec[:])
	h := sha256.Sum256([]byte(secret))
	return id, keyPrefix + id + "_" + secret, h[:]
}

// ErrBadKey is the only error a caller with a wrong key ever sees: it does not
// say whether the id exists, the key was revoked or the secret was wrong.
var ErrBadKey = errors.New("invalid or revoked API key")

// parseKey splits a key into its id and the SHA-256 of its secret.
func parseKey(key string) (id string, secretHash []byte, ok bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return "", nil, false
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || len(id) != 16 || len(secret) != 43 {
		return "", nil, false
	}
	if _, err := hex.DecodeString(id); err != nil {
		return "", nil, false
	}
	h := sha256.Sum256([]byte(secret))
	return id, h[:], true
}

// KeyID returns the id of a key in knowdp's format (the part that names it
// in logs and in the admin API), and whether key has that format.
func KeyID(key string) (string, bool) {
	id, _, ok := parseKey(key)
	return id, ok
}

// Principal is who holds a key.
type Principal struct {
	KeyID     string
	Role      string // RoleAdmin or RoleAnalyst
	AnalystID string // empty for the admin
	Analyst   string // the analyst's name
}

// dummyHash is compared against when a key id is unknown, so that a lookup
// miss costs the same comparison as a hit.
var dummyHash = make([]byte, sha256.Size)

// Authenticate checks key and returns its principal. The secret is compared
// in constant time; every refusal is ErrBadKey, and other errors are the
// database's.
func (db *DB) Authenticate(ctx context.Context, key string) (Principal, error) {
	id, h, ok := parseKey(key)
	if !ok {
		subtle.ConstantTimeCompare(dummyHash, dummyHash)
		return Principal{}, ErrBadKey
	}
	var (
		p       Principal
		stored  []byte
		revoked sql.NullInt64
		analyst sql.NullString
		name    sql.NullString
	)
	err := db.readRow(ctx, `SELECT k.role, k.analyst_id, a.name, k.secret_sha256, k.revoked_at
		FROM api_keys k LEFT JOIN analysts a ON a.id = k.analyst_id WHERE k.id = ?`, id).
		Scan(&p.Role, &analyst, &name, &stored, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		subtle.ConstantTimeCompare(dummyHash, h)
		return Principal{}, ErrBadKey
	}
	if err != nil {
		return Principal{}, fmt.Errorf("authenticate: %w", err)
	}
	if subtle.ConstantTimeCompare(stored, h) != 1 || revoked.Valid {
		return Principal{}, ErrBadKey
	}
	p.KeyID, p.AnalystID, p.Analyst = id, analyst.String, name.String
	return p, nil
}

// insertKey stores a key's hash. analystID is empty for an admin key.
func (db *DB) insertKey(ctx context.Context, tx *sql.Tx, id, role, analystID string, secretHash []byte) error {
	var a any
	if analystID != "" {
		a = analystID
	}
	_, err := tx.ExecContext(ctx, db.d.q(`INSERT INTO api_keys (id, analyst_id, role, secret_sha256, created_at) VALUES (?, ?, ?, ?, ?)`),
		id, a, role, secretHash, time.Now().UnixNano())
	return err
}

// EnsureAdminKey makes sure an admin key exists. If fromFile is set it is
// that key (registered if new; refused if it was revoked: a revocation is
// final). Otherwise, when no admin key is active, a new key is generated,
// passed to out (if set) before its hash is stored, and returned so the
// caller can show it once. It returns "" when nothing needs showing. Either
// registration is recorded in the audit trail with actor ActorStart.
func (db *DB) EnsureAdminKey(ctx context.Context, fromFile string, out func(string) error) (shown string, err error) {
	err = db.tx(ctx, func(tx *sql.Tx) error {
		if fromFile != "" {
			id, h, ok := parseKey(fromFile)
			if !ok {
				return errors.New("admin key file: not a knowdp key (kdp_<16 hex>_<43 base64url>); delete the file to have one generated")
			}
			var role string
			var stored []byte
			var revoked sql.NullInt64
			err := tx.QueryRowContext(ctx, db.d.q(`SELECT role, secret_sha256, revoked_at FROM api_keys WHERE id = ?`), id).Scan(&role, &stored, &revoked)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				if err := db.insertKey(ctx, tx, id, RoleAdmin, "", h); err != nil {
					return err
				}
				return db.audit(ctx, tx, AuditEvent{Actor: ActorStart, Action: "admin_key.registered", Key: id}, map[string]any{"from": "the admin key file"})
			case err != nil:
				return err
			case role != RoleAdmin || subtle.ConstantTimeCompare(stored, h) != 1:
				return errors.New("admin key file: its key id is already used by another key")
			case revoked.Valid:
				return fmt.Errorf("admin key file: key %s was revoked, and a revoked key stays revoked; delete the file to have a new key generated", id)
			}
			return nil
		}
		var n int
		if err := tx.QueryRowContext(ctx, db.d.q(`SELECT COUNT(*) FROM api_keys WHERE role = ? AND revoked_at IS NULL`), RoleAdmin).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		id, key, h := newKey()
		if out != nil {
			if err := out(key); err != nil {
				return err
			}
		}
		shown = key
		if err := db.insertKey(ctx, tx, id, RoleAdmin, "", h); err != nil {
			return err
		}
		return db.audit(ctx, tx, AuditEvent{Actor: ActorStart, Action: "admin_key.registered", Key: id}, map[string]any{"from": "generated at start"})
	})
	if err != nil {
		return "", fmt.Errorf("admin key: %w", err)
	}
	return shown, nil
}

// AdminKeys lists the admin keys, revoked ones included, oldest first.
func (db *DB) AdminKeys(ctx context.Context) ([]Key, error) {
	rows, err := db.r.QueryContext(ctx, db.d.q(`SELECT id, created_at, revoked_at FROM api_keys WHERE role = ? ORDER BY created_at`), RoleAdmin)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Key{}
	for rows.Next() {
		var k Key
		var created int64
		var revoked sql.NullInt64
		if err := rows.Scan(&k.ID, &created, &revoked); err != nil {
			return nil, err
		}
		k.Created = time.Unix(0, created).UTC()
		if revoked.Valid {
			t := time.Unix(0, revoked.Int64).UTC()
			k.Revoked = &t
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// IssueAdminKey issues another admin key (to rotate keys: issue, switch,
// revoke the old one) and returns it and its text, to be shown once. actor
// is the admin key that asked, for the audit trail.
func (db *DB) IssueAdminKey(ctx context.Context, actor string) (Key, string, error) {
	var kv Key
	var key string
	err := db.tx(ctx, func(tx *sql.Tx) error {
		id, k, h := newKey()
		key = k
		kv = Key{ID: id, Created: time.Now().UTC()}
		if err := db.insertKey(ctx, tx, id, RoleAdmin, "", h); err != nil {
			return err
		}
		return db.audit(ctx, tx, AuditEvent{Actor: actor, Action: "admin_key.issued", Key: id}, nil)
	})
	return kv, key, err
}

// GenerateKey returns a new API key in knowdp's format, for an admin key file
// made outside the server (see EnsureAdminKey).
func GenerateKey() string {
	_, key, _ := newKey()
	return key
}
