package source

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
)

// csvReader splits RFC 4180 records out of large buffered reads without
// allocating per field: unquoted fields are slices of the read buffer, and
// quoted fields are unescaped into one scratch buffer per record. It accepts
// exactly what encoding/csv accepts with its defaults (comma separator, no
// comments, strict quotes), skips empty lines as it does, and normalises
// CRLF to LF the same way; FuzzCSVReader checks that.
type csvReader struct {
	r     io.Reader
	buf   []byte
	pos   int // start of the unread data in buf
	end   int // end of the data in buf
	eof   bool
	rerr  error // a failed read, returned when more data is needed
	n     int64 // bytes read from r
	line  int   // lines consumed so far
	start int   // line on which the last record started
	// startRel is the line, counted from the parse position, on which the
	// record being parsed starts, and startOff its byte offset there.
	startRel, startOff int
	// recStart is the offset in the input of the last record returned.
	recStart int64

	fields  [][]byte
	spans   []span
	scratch []byte
}

// span locates one field of the record being parsed: in buf (quoted false)
// or in scratch (quoted true), so that growing scratch does not invalidate
// fields already found.
type span struct {
	quoted bool
	a, b   int
}

// csvBufSize is the size of one read; records longer than that grow the
// buffer.
const csvBufSize = 1 << 20

func newCSVReader(r io.Reader) *csvReader { return newCSVReaderSize(r, csvBufSize) }

// newCSVReaderSize reads size bytes at a time (at least 1); the tests use
// tiny buffers so that records straddle reads and outgrow the buffer.
func newCSVReaderSize(r io.Reader, size int) *csvReader {
	return &csvReader{r: r, buf: make([]byte, max(size, 1))}
}

// errNeedMore says that the buffered data ends inside the record.
var errNeedMore = errors.New("need more data")

// csvSyntaxError is a malformed record: which line it started on, the line
// the problem is on, and one of csv.ErrQuote or csv.ErrBareQuote.
type csvSyntaxError struct {
	startLine, line int
	err             error
}

func (e *csvSyntaxError) Error() string {
	if e.line != e.startLine {
		return fmt.Sprintf("line %d: %v", e.line, e.err)
	}
	return e.err.Error()
}

func (e *csvSyntaxError) Unwrap() error { return e.err }

// read returns the fields of the next non-empty record, or io.EOF. The
// slices are valid until the next call.
func (r *csvReader) read() ([][]byte, error) {
	for {
		lines, next, err := r.parse(r.buf[r.pos:r.end], r.eof)
		if err == errNeedMore {
			if ferr := r.fill(); ferr != nil {
				return nil, ferr
			}
			continue
		}
		if err != nil {
			var se *csvSyntaxError
			if errors.As(err, &se) {
				se.startLine += r.line
				se.line += r.line
				r.start = se.startLine
			}
			// Skip the bad record so that a caller that goes on reading
			// does not see it again.
			r.line += lines
			r.pos += next
			return nil, err
		}
		if next == 0 && lines == 0 {
			return nil, io.EOF
		}
		r.start = r.line + r.startRel
		r.recStart = r.n - int64(r.end-r.pos) + int64(r.startOff)
		r.pos += next
		r.line += lines
		if r.fields == nil && len(r.spans) == 0 {
			continue // only empty lines were consumed
		}
		return r.fields, nil
	}
}

// fill moves the unread data to the front of buf, growing buf if it is all
// unread, and reads until buf is full or the input ends.
func (r *csvReader) fill() error {
	if r.rerr != nil {
		return r.rerr
	}
	if r.eof {
		return nil
	}
	if r.pos > 0 {
		r.end = copy(r.buf, r.buf[r.pos:r.end])
		r.pos = 0
	} else if r.end == len(r.buf) {
		nb := make([]byte, 2*len(r.buf))
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	for r.end < len(r.buf) {
		k, err := r.r.Read(r.buf[r.end:])
		r.end += k
		r.n += int64(k)
		if err == io.EOF {
			r.eof = true
			return nil
		}
		if err != nil {
			// Parse what arrived first; the error comes when more is
			// needed, so a cut-off last record is never taken for a
			// short one.
			r.rerr = err
			return nil
		}
	}
	return nil
}

// parse parses one record at the start of data, skipping empty lines
// before it. It returns the number of lines and bytes consumed; both are 0
// at the end of the input. atEOF says that data is all there is. On success
// r.fields holds the record (nil if only empty lines were consumed, which
// happens only when the data ends with them).
func (r *csvReader) parse(data []byte, atEOF bool) (lines, consumed int, err error) {
	r.fields = r.fields[:0]
	r.spans = r.spans[:0]
	r.scratch = r.scratch[:0]
	p := 0
	var (
		line   []byte
		next   int
		nl, ok bool
	)
	// Skip empty lines ("\n", "\r\n", and a lone "\r" at the very end).
	for {
		line, next, nl, ok = nextLine(data, p, atEOF)
		if !ok {
			return 0, 0, errNeedMore
		}
		if next == p {
			// End of input.
			if lines == 0 {
				return 0, 0, nil
			}
			r.fields = nil
			return lines, p, nil
		}
		if len(line) > 0 {
			break
		}
		lines++
		p = next
	}
	startLine := lines + 1
	r.startRel, r.startOff = startLine, p
	lines++
	// Fast path: split on commas in one pass over the line, unless it has
	// a quote (byte loops beat bytes.IndexByte on fields this short).
	a, quote := 0, false
	for k, c := range line {
		if c == ',' {
			r.fields = append(r.fields, line[a:k:k])
			a = k + 1
		} else if c == '"' {
			quote = true
			break
		}
	}
	if !quote {
		r.fields = append(r.fields, line[a:len(line):len(line)])
		return lines, next, nil
	}
	r.fields = r.fields[:0]
	base := p // offset of line in data
	i := 0
	for {
		// One field starting at line[i].
		if i == len(line) || line[i] != '"' {
			j := bytes.IndexByte(line[i:], ',')
			f := line[i:]
			if j >= 0 {
				f = line[i : i+j]
			}
			if bytes.IndexByte(f, '"') >= 0 {
				return lines, next, &csvSyntaxError{startLine: startLine, line: lines, err: csv.ErrBareQuote}
			}
			r.spans = append(r.spans, span{a: base + i, b: base + i + len(f)})
			if j < 0 {
				break
			}
			i += j + 1
			continue
		}
		// Quoted field.
		i++
		a := len(r.scratch)
		for {
			k := bytes.IndexByte(line[i:], '"')
			if k >= 0 {
				r.scratch = append(r.scratch, line[i:i+k]...)
				i += k + 1
				switch {
				case i < len(line) && line[i] == '"':
					r.scratch = append(r.scratch, '"')
					i++
					continue
				case i < len(line) && line[i] == ',':
					i++
					r.spans = append(r.spans, span{quoted: true, a: a, b: len(r.scratch)})
				case i == len(line):
					r.spans = append(r.spans, span{quoted: true, a: a, b: len(r.scratch)})
					r.finish(data)
					return lines, next, nil
				default:
					return lines, next, &csvSyntaxError{startLine: startLine, line: lines, err: csv.ErrQuote}
				}
				break
			}
			// The field goes on past the end of the line.
			r.scratch = append(r.scratch, line[i:]...)
			if !nl {
				return lines, next, &csvSyntaxError{startLine: startLine, line: lines, err: csv.ErrQuote}
			}
			r.scratch = append(r.scratch, '\n')
			line2, next2, nl2, ok := nextLine(data, next, atEOF)
			if !ok {
				return 0, 0, errNeedMore
			}
			if next2 == next {
				return lines, next, &csvSyntaxError{startLine: startLine, line: lines, err: csv.ErrQuote}
			}
			lines++
			base, line, next, nl, i = next, line2, next2, nl2, 0
		}
	}
	r.finish(data)
	return lines, next, nil
}

// finish turns the spans of a record with quoted fields into slices.
func (r *csvReader) finish(data []byte) {
	for _, s := range r.spans {
		if s.quoted {
			r.fields = append(r.fields, r.scratch[s.a:s.b:s.b])
		} else {
			r.fields = append(r.fields, data[s.a:s.b:s.b])
		}
	}
}

// nextLine returns the line starting at data[p] without its line ending,
// the offset after it, and whether it ended with a newline. A "\r" before
// the newline is dropped, and so is a "\r" ending the input (as
// encoding/csv does). ok is false when the data ends before the line does
// and more may come.
func nextLine(data []byte, p int, atEOF bool) (line []byte, next int, nl, ok bool) {
	i := bytes.IndexByte(data[p:], '\n')
	if i < 0 {
		if !atEOF {
			return nil, 0, false, false
		}
		line = data[p:]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		return line, len(data), false, true
	}
	line = data[p : p+i]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, p + i + 1, true, true
}
