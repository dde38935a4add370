package idemhttp

import (
	"encoding/binary"
	"net/http"
	"slices"
)

// preludeInline is the room the recorder keeps for an encoded prelude
// (status and recorded headers) without allocating; a longer one goes to
// the heap.
const preludeInline = 64

// recorder passes a handler's response through to the client as it is
// written (so streaming and flushing work) and keeps a copy, up to
// MaxResponse bytes, to record. The copy is encoded as it is written: the
// prelude (status and allow-listed headers, snapshot when the status is
// sent) and then the body. The record is allocated at the first body byte,
// sized for the prelude and that write, so a response written at once
// costs one allocation of its own size.
type recorder struct {
	w http.ResponseWriter
	m *Middleware
	// buf is the record: the prelude and the body. It is nil while the
	// prelude fits in pre and no body byte is recorded.
	buf      []byte
	size     int64
	status   int32
	preN     int32 // the prelude's length: buf[:preN] when buf is set, else pre[:preN]
	wrote    bool
	tooLarge bool
	pre      [preludeInline]byte
}

func (r *recorder) reset(w http.ResponseWriter, m *Middleware) {
	*r = recorder{w: w, m: m}
}

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(code int) {
	if r.wrote {
		r.w.WriteHeader(code) // superfluous: net/http logs it
		return
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		r.w.WriteHeader(code) // informational: sent, not the final status
		return
	}
	r.snapshot(code)
	r.w.WriteHeader(code)
}

// snapshot records the final status and the allow-listed headers as they
// are when the status is sent.
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

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.w.Write(p)
	r.size += int64(n)
	switch {
	case r.tooLarge, n == 0:
	case r.size > r.m.cfg.MaxResponse:
		// Never keep a truncated body: a replay would serve it as whole.
		r.tooLarge = true
		// And free the body's memory.
		if r.inline() {
			r.buf = nil
		} else {
			r.buf = slices.Clone(r.buf[:r.preN])
		}
	case r.buf == nil:
		r.buf = append(append(make([]byte, 0, int(r.preN)+n), r.pre[:r.preN]...), p[:n]...)
	default:
		r.buf = append(r.buf, p[:n]...)
	}
	return n, err
}

// Flush sends what was written so far; handlers that stream keep working.
func (r *recorder) Flush() {
	if !r.wrote {
		r.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(r.w).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer (for
// deadlines). A handler that hijacks the connection leaves nothing to record.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// finalStatus is the status the client got: 200 when the handler wrote
// nothing.
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
