package idemhttp

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"
)

// preludeInline is the room the recorder keeps for an encoded prelude
// (status and recorded headers) without allocating; a longer one goes to
// the heap.
const preludeInline = 64

// recorder holds a handler's response until its outcome is recorded, so
// that what is recorded is what the handler wrote, whether or not the
// client is still there to read it. It keeps the response encoded as the
// record: the prelude (status and allow-listed headers, snapshot when the
// status is set) and then the body. The record is allocated at the first
// body byte, sized for the prelude and that write, so a response written
// at once costs one allocation of its own size; the same bytes are later
// written to the client (send).
//
// A body that outgrows MaxResponse cannot be recorded: the recorder then
// sends what it holds and passes the rest through as the handler writes it
// (flushes included), and the record only says how large it was.
//
// Writes never fail for the handler: a client that went away or stopped
// reading is noted (gone) and the handler runs to its end.
type recorder struct {
	w http.ResponseWriter
	m *Middleware
	// buf is the record: the prelude and the body. It is nil while the
	// prelude fits in pre and no body byte is recorded.
	buf      []byte
	size     int64
	status   int32
	preN     int32 // the prelude's length: buf[:preN] when buf is set, else pre[:preN]
	wrote    bool  // the final status is set
	tooLarge bool
	passing  bool // the response goes to the client as it is written (too large)
	// switched is set when the handler answered 101 Switching Protocols or
	// asked to hijack the connection: what it does then cannot be
	// recorded, so the outcome is unknown.
	switched bool
	gone     bool // a write to the client failed
	pre      [preludeInline]byte
}

func (r *recorder) reset(w http.ResponseWriter, m *Middleware) {
	*r = recorder{w: w, m: m}
}

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(code int) {
	if code < 100 || code > 999 {
		// As net/http does, in the handler, where the engine sees it and
		// the outcome becomes unknown; the status is never recorded.
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	switch {
	case r.wrote:
		if r.passing {
			r.w.WriteHeader(code) // superfluous: net/http logs it
		}
	case code == http.StatusSwitchingProtocols:
		r.wrote, r.switched, r.status = true, true, int32(code)
	case code >= 100 && code < 200:
		r.w.WriteHeader(code) // informational: sent now, not the final status
	default:
		r.snapshot(code)
	}
}

// snapshot records the final status and the allow-listed headers as they
// are when the status is set.
func (r *recorder) snapshot(code int) {
	r.wrote = true
	r.status = int32(code)
	h := r.w.Header()
	var arr [16]string
	names := arr[:0]
	for k := range h {
		if r.m.allow[k] {
			names = append(names, k)
		}
	}
	p := appendPrelude(r.pre[:0], code, h, names)
	r.preN = int32(len(p))
	if !r.inline() {
		r.buf = p
	}
}

// inline reports whether the prelude is held in pre.
func (r *recorder) inline() bool { return r.preN <= preludeInline }

func (r *recorder) prelude() []byte {
	if r.buf != nil {
		return r.buf[:r.preN]
	}
	return r.pre[:r.preN]
}

// body is the body held so far.
func (r *recorder) body() []byte {
	if r.buf == nil {
		return nil
	}
	return r.buf[r.preN:]
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	if r.switched || len(p) == 0 {
		return len(p), nil
	}
	r.size += int64(len(p))
	switch {
	case r.passing:
		r.toClient(p)
	case r.size > r.m.cfg.MaxResponse:
		// Never keep a truncated body: a replay would serve it as whole.
		r.tooLarge, r.passing = true, true
		r.w.WriteHeader(int(r.status))
		r.toClient(r.body())
		r.toClient(p)
		// And free the body's memory.
		if r.inline() {
			r.buf = nil
		} else {
			r.buf = slices.Clone(r.buf[:r.preN])
		}
	case r.buf == nil:
		r.buf = append(append(make([]byte, 0, int(r.preN)+len(p)), r.pre[:r.preN]...), p...)
	default:
		r.buf = append(r.buf, p...)
	}
	return len(p), nil
}

// toClient writes p to the client unless a write already failed.
func (r *recorder) toClient(p []byte) {
	if !r.gone && writeClient(r.w, p, r.m.cfg.WriteTimeout) != nil {
		r.gone = true
	}
}

// Flush sends what was written so far once the response is passed
// through. While it is held (until its outcome is recorded) a flush does
// not reach the client.
func (r *recorder) Flush() {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	if r.passing && !r.gone {
		_ = http.NewResponseController(r.w).Flush()
	}
}

// errSwitchProtocols is what a protected handler gets when it asks to
// hijack the connection.
var errSwitchProtocols = fmt.Errorf("idemhttp: a protected request cannot take over its connection: %w", http.ErrNotSupported)

// Hijack refuses to hand the connection over: what a handler does on a
// hijacked connection cannot be recorded. Asking is enough to make the
// outcome unknown, since the handler may have acted already.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	r.switched = true
	return nil, nil, errSwitchProtocols
}

// Unwrap lets http.ResponseController reach the underlying writer (for
// deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// finalStatus is the status the handler set: 200 when it wrote nothing.
func (r *recorder) finalStatus() int {
	if !r.wrote {
		return http.StatusOK
	}
	return int(r.status)
}

// record returns the encoded response. A handler that wrote nothing
// answers 200 with no body, with the headers it set.
func (r *recorder) record() []byte {
	if !r.wrote {
		r.snapshot(http.StatusOK)
	}
	switch {
	case r.tooLarge:
		return markTooLarge(append(make([]byte, 0, int(r.preN)+binary.MaxVarintLen64), r.prelude()...), r.size)
	case r.buf == nil:
		return slices.Clone(r.pre[:r.preN])
	}
	return r.buf
}

// send writes the held response to the client, once its outcome is
// decided. A response passed through is already there; a handler that
// wrote nothing leaves net/http to answer 200.
func (r *recorder) send() {
	if r.passing || !r.wrote {
		return
	}
	setWriteDeadline(r.w, r.m.cfg.WriteTimeout)
	r.w.WriteHeader(int(r.status))
	r.toClient(r.body())
}

// writeChunk is how much of a response is written under one write
// deadline: a client must take this much within the write timeout.
const writeChunk = 64 << 10

// writeClient writes p to the client in chunks, each under a fresh write
// deadline timeout from now (none when timeout is negative), so that a
// client that stops reading is given up on while one that reads slowly is
// served.
func writeClient(w http.ResponseWriter, p []byte, timeout time.Duration) error {
	for len(p) > 0 {
		n := min(len(p), writeChunk)
		setWriteDeadline(w, timeout)
		if _, err := w.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// setWriteDeadline sets the connection's write deadline to timeout from
// now, when timeout is positive and w (or a writer it wraps) supports it.
// It walks the wrappers as http.ResponseController does, without the
// allocation of the controller's error for a writer that has no deadline.
func setWriteDeadline(w http.ResponseWriter, timeout time.Duration) {
	if timeout <= 0 {
		return
	}
	for {
		switch x := w.(type) {
		case interface{ SetWriteDeadline(time.Time) error }:
			_ = x.SetWriteDeadline(time.Now().Add(timeout))
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}
