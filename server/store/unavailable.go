package store

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Unavailable reports whether err is a storage failure: the database
// cannot be reached, went away mid-request (a closed connection, an
// unexpected end of its stream, an administrator's or a crash's shutdown),
// refused the work for the time being (too many connections, a
// serialization failure, a read-only standby, SQLite busy or locked), or
// could not write (I/O error, disk full). The server answers such a failure
// 503 with Retry-After: nothing was charged that a retry with the same
// idempotency key does not return.
func Unavailable(err error) bool {
	var (
		ne   net.Error
		ce   *pgconn.ConnectError
		pe   *pgconn.PgError
		code interface{ Code() int }
	)
	switch {
	case errors.As(err, &ne), errors.As(err, &ce),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone), errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		pgconn.SafeToRetry(err), pgconn.Timeout(err):
		return true
	case errors.As(err, &pe):
		switch c := pe.Code; {
		case strings.HasPrefix(c, "08"), // connection exception
			strings.HasPrefix(c, "53"),  // insufficient resources
			strings.HasPrefix(c, "57P"), // admin, crash or other shutdown; cannot connect now
			strings.HasPrefix(c, "58"),  // system error (I/O)
			c == "40001", c == "40P01",  // serialization failure, deadlock
			c == "25006", // read-only transaction (a standby)
			c == "57014": // query canceled (statement timeout)
			return true
		}
		return false
	case errors.As(err, &code):
		// SQLite result codes (the primary code is the low byte).
		switch code.Code() & 0xff {
		case 5, 6, 8, 10, 13, 14, 15: // BUSY, LOCKED, READONLY, IOERR, FULL, CANTOPEN, PROTOCOL
			return true
		}
	}
	return false
}
